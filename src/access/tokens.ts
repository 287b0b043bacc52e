// Admin tokens for the admin HTTP API (/admin/v1). The CLI issues them to an admin user;
// the holder acts as that user, and every request re-checks that the user is still an admin.
import { toIsoUtcOrNull } from "../domain/time.ts"
import { Effect } from "effect"
import { ADMIN_TOKEN_PREFIX, fingerprintOf, looksLike, newSecret } from "./keys/bearer-secrets.ts"
import { writeAdminActivity } from "./activity.ts"
import { conflict, invalid, notFound, type RateLimited, rateLimited } from "../domain/errors.ts"
import { adminNow, type AdminUser } from "./identity.ts"
import { isUuid } from "../domain/ids.ts"
import { query, transaction } from "../platform/db/Sql.ts"
import { checkName, expiresAtOf, type Expiry } from "./keys/store.ts"

export const DEFAULT_TOKEN_EXPIRY: Expiry = "90d"

export interface CreatedToken {
  readonly id: string
  /** The token itself: shown once, never stored. */
  readonly token: string
  readonly name: string
  readonly prefix: string
  readonly companyId: string
  readonly userEmail: string
  readonly createdAt: string
  readonly expiresAt: string | null
}

export interface TokenInfo {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly userEmail: string
  readonly state: "active" | "expired" | "revoked"
  readonly createdAt: string
  readonly expiresAt: string | null
  readonly revokedAt: string | null
  readonly lastUsedAt: string | null
}

interface TokenRow {
  readonly id: string
  readonly company_id: string
  readonly user_id: string
  readonly user_email: string
  readonly name: string
  readonly prefix: string
  readonly created_at: Date
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  readonly last_used_at: Date | null
  readonly expired: boolean
}

const toInfo = (r: TokenRow): TokenInfo => ({
  id: r.id,
  name: r.name,
  prefix: r.prefix,
  userEmail: r.user_email,
  state: r.revoked_at !== null ? "revoked" : r.expired ? "expired" : "active",
  createdAt: r.created_at.toISOString(),
  expiresAt: toIsoUtcOrNull(r.expires_at),
  revokedAt: toIsoUtcOrNull(r.revoked_at),
  lastUsedAt: toIsoUtcOrNull(r.last_used_at)
})

export const createToken = Effect.fn("admin.createToken")(function* (
  actor: AdminUser,
  input: { readonly name: string; readonly expires: Expiry }
) {
  const problem = checkName(input.name)
  if (problem !== undefined) return yield* problem
  const secret = newSecret(ADMIN_TOKEN_PREFIX)
  const name = input.name.trim()
  return yield* transaction(
    Effect.gen(function* () {
      const [row] = yield* query(
        (tx) => tx<{ id: string; created_at: Date; expires_at: Date | null }[]>`
        insert into service.admin_tokens (company_id, user_id, user_email, name, prefix, fingerprint, expires_at, created_by_email)
        values (${actor.companyId}, ${actor.userId}, ${actor.email}, ${name}, ${secret.prefix}, ${secret.fingerprint},
                ${expiresAtOf(tx, input.expires)}, ${actor.email})
        returning id, created_at, expires_at`
      )
      const created: CreatedToken = {
        id: row!.id,
        token: secret.secret,
        name,
        prefix: secret.prefix,
        companyId: actor.companyId,
        userEmail: actor.email,
        createdAt: row!.created_at.toISOString(),
        expiresAt: toIsoUtcOrNull(row!.expires_at)
      }
      yield* writeAdminActivity(actor, "admin_token.created", created.id, {
        name,
        prefix: secret.prefix,
        expiresAt: created.expiresAt
      })
      return created
    })
  )
})

export const revokeToken = Effect.fn("admin.revokeToken")(function* (actor: AdminUser, tokenId: string) {
  // An id of another shape names no token, as an unknown one does.
  if (!isUuid(tokenId)) return yield* notFound(`no admin token with id ${tokenId}`)
  return yield* transaction(
    Effect.gen(function* () {
      const [row] = yield* query(
        (tx) => tx<TokenRow[]>`
        select *, (expires_at is not null and expires_at <= now()) as expired from service.admin_tokens where id = ${tokenId} for update`
      )
      if (row === undefined || row.company_id !== actor.companyId)
        return yield* notFound(`no admin token with id ${tokenId}`)
      if (row.revoked_at !== null)
        return yield* conflict(`admin token ${tokenId} was already revoked at ${row.revoked_at.toISOString()}`)
      const [updated] = yield* query(
        (tx) => tx<TokenRow[]>`
        update service.admin_tokens set revoked_at = now() where id = ${tokenId}
        returning *, (expires_at is not null and expires_at <= now()) as expired`
      )
      yield* writeAdminActivity(actor, "admin_token.revoked", tokenId, { name: row.name })
      return toInfo(updated!)
    })
  )
})

export const tokenCompany = Effect.fn("tokenCompany")(function* (tokenId: string) {
  if (!isUuid(tokenId))
    return yield* invalid(`"${tokenId}" is not a token id (a UUID, as tokens list shows)`, { field: "id" })
  const [row] = yield* query(
    (sql) => sql<{ company_id: string }[]>`select company_id from service.admin_tokens where id = ${tokenId}`
  )
  if (row === undefined) return yield* notFound(`no admin token with id ${tokenId}`)
  return row.company_id
})

export const listTokens = (companyId: string) =>
  Effect.map(
    query(
      (sql) => sql<TokenRow[]>`
      select *, (expires_at is not null and expires_at <= now()) as expired
        from service.admin_tokens where company_id = ${companyId} order by created_at desc, id desc`
    ),
    (rows) => rows.map(toInfo)
  )

/** A client over its limit of failed sign-ins (admin tokens, sessions), in the one wording. */
export const tooManyTokenFailures = (perMinute: number, seconds: number): RateLimited =>
  rateLimited(
    `too many requests with an unknown, revoked or expired admin token or session from this address (at most ${perMinute} a minute); retry in ${seconds} second${seconds === 1 ? "" : "s"}`
  )

/** Whether checking this credential takes a lookup (it has an admin token's shape); others are refused from memory. */
export const needsLookup = (credential: string): boolean => looksLike(ADMIN_TOKEN_PREFIX, credential.trim())

export type TokenCheck = { readonly actor: AdminUser } | { readonly refused: string }

const refused = (message: string): TokenCheck => ({ refused: message })

/** The admin a bearer token stands for, if it is active and its user is still an admin. */
export const authenticateToken = Effect.fn("authenticateToken")(function* (credential: string) {
  if (credential === "") return refused("missing admin token: send the header Authorization: Bearer mat_...")
  if (!looksLike(ADMIN_TOKEN_PREFIX, credential)) return refused("unknown admin token")
  const [row] = yield* query(
    (sql) => sql<TokenRow[]>`
    select t.*, (t.expires_at is not null and t.expires_at <= now()) as expired
      from service.admin_tokens t
     where t.fingerprint = ${fingerprintOf(credential)}`
  )
  if (row === undefined) return refused("unknown admin token")
  if (row.revoked_at !== null) return refused("this admin token was revoked")
  if (row.expired) return refused(`this admin token expired at ${row.expires_at?.toISOString()}`)
  // The user's name and role from the app's tables (its own database, perhaps).
  const now = yield* adminNow(row.user_id, row.company_id)
  if (!now.admin) return refused(`${row.user_email} is no longer an admin of this company`)
  yield* query((sql) => sql`update service.admin_tokens set last_used_at = now() where id = ${row.id}`)
  return {
    actor: {
      userId: row.user_id,
      email: row.user_email,
      name: now.userName ?? row.user_email,
      companyId: row.company_id
    }
  }
})
