// Who is acting and on which company. Read from the app's own tables (app.companies,
// app.users), which are authoritative even before the service has mirrored anything: an
// admin can make the first key for a company the service never saw running. They live in the
// app's database (`appQuery`), which may not be the service's: nothing here joins the two.
import { Effect } from "effect"
import { appQuery as query } from "../platform/db/Sql.ts"
import { isUuid } from "../domain/ids.ts"
import { at, forbidden, invalid, notFound, words } from "../domain/errors.ts"

export interface Company {
  readonly id: string
  readonly name: string
  readonly host: string
}

/** An admin user of a company, acting on that company. */
export interface AdminUser {
  readonly userId: string
  readonly email: string
  readonly name: string
  readonly companyId: string
}

/** A company by id or host. */
export const findCompany = Effect.fn("findCompany")(function* (ref: string) {
  const trimmed = ref.trim()
  if (trimmed === "") return yield* invalid(words`${at("company")} must name a company by id or host`)
  const rows = yield* query((sql) =>
    isUuid(trimmed)
      ? sql<Company[]>`select id, name, host from app.companies where id = ${trimmed}`
      : sql<Company[]>`select id, name, host from app.companies where lower(host) = lower(${trimmed})`
  )
  const company = rows[0]
  if (company === undefined) return yield* notFound(`no company with id or host "${trimmed}"`)
  return company
})

export const companyById = Effect.fn("companyById")(function* (id: string) {
  const [company] = yield* query((sql) => sql<Company[]>`select id, name, host from app.companies where id = ${id}`)
  if (company === undefined) return yield* notFound(`no company with id ${id}`)
  return company
})

/**
 * The admin user with this e-mail in this company (or in the only company where they are
 * an admin, when none is named). Fails unless the user has role admin there. With
 * `anyCompany` (commands over the whole service), an admin of several companies is taken too.
 */
export const findAdmin = Effect.fn("findAdmin")(function* (
  email: string,
  company?: Company,
  options: { readonly anyCompany?: boolean } = {}
) {
  const wanted = email.trim()
  if (!/^[^\s@]+@[^\s@]+$/.test(wanted))
    return yield* invalid(words`${at("admin")} must be an e-mail address, not "${email}"`)
  const users = yield* query(
    (sql) => sql<{ id: string; email: string; name: string; company_id: string; role: string }[]>`
    select id, email, name, company_id, role from app.users where lower(email) = lower(${wanted}) order by company_id`
  )
  if (users.length === 0) return yield* notFound(`no user with e-mail ${wanted}`)
  const toActor = (u: (typeof users)[number]): AdminUser => ({
    userId: u.id,
    email: u.email,
    name: u.name,
    companyId: u.company_id
  })
  if (company !== undefined) {
    const user = users.find((u) => u.company_id === company.id)
    if (user === undefined) return yield* forbidden(`${wanted} is not a user of ${company.name} (${company.host})`)
    if (user.role !== "admin")
      return yield* forbidden(`${wanted} is not an admin of ${company.name}: only admins can do this`)
    return toActor(user)
  }
  const admins = users.filter((u) => u.role === "admin")
  if (admins.length === 0) return yield* forbidden(`${wanted} is not an admin: only admins can do this`)
  if (admins.length > 1 && options.anyCompany !== true)
    return yield* invalid(words`${wanted} is an admin of several companies; name one with ${at("company")}`)
  return toActor(admins[0]!)
})

/**
 * The admin acting on something by its id (a key, a token) that belongs to `owner`. To an
 * admin of another company such an id is "no such thing", as every other id is: whose it is
 * stays unsaid. (An --as that is no admin anywhere is still told so.)
 */
export const adminOfOwner = Effect.fn("adminOfOwner")(function* (email: string, owner: Company, missing: string) {
  const inOwner = yield* query(
    (sql) => sql`select 1 from app.users where lower(email) = lower(${email.trim()}) and company_id = ${owner.id}`
  )
  if (inOwner.length === 0) {
    yield* findAdmin(email, undefined, { anyCompany: true })
    return yield* notFound(missing)
  }
  return yield* findAdmin(email, owner)
})

/** For commands over the whole service (status, rebuild-views): --as names an admin of any company. */
export const requireSomeAdmin = (email: string) => findAdmin(email, undefined, { anyCompany: true })

/** Whether the user is (still) an admin of the company. */
export const isAdmin = (userId: string, companyId: string) => Effect.map(adminNow(userId, companyId), (a) => a.admin)

/** The user and company as the app has them now: their names, and whether the user is (still) an admin there. */
export const adminNow = (userId: string, companyId: string) =>
  Effect.map(
    query(
      (sql) => sql<{ user_name: string | null; company_name: string | null; admin: boolean }[]>`
      select (select u.name from app.users u where u.id = ${userId}) as user_name,
             (select c.name from app.companies c where c.id = ${companyId}) as company_name,
             exists (select 1 from app.users where id = ${userId} and company_id = ${companyId} and role = 'admin') as admin`
    ),
    ([r]) => ({ userName: r?.user_name ?? null, companyName: r?.company_name ?? null, admin: r?.admin ?? false })
  )
