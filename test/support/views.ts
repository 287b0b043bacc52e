// Playing capture for the API's tests: companies as the app has them (app.*) and as capture
// mirrors them (service.companies, service.users), and records as service.views holds them.
// Record bodies are made by the real shapers from realistic app rows in which every NEVER
// column holds a marker, so a test can check that no response ever carries one.
import { randomUUID } from "node:crypto"
import type { Sql } from "postgres"
import { shape, viewMeta, type ShapeInput } from "../../src/domain/records/index.ts"
import { NEVER_COLUMNS } from "../../src/domain/records/columns.ts"
import { RESOURCE_INFO, RESOURCES, type Resource } from "../../src/domain/resources.ts"
import { FIXTURES } from "../domain/fixtures.ts"

/** Present in every NEVER column and in every field a privacy case withholds. */
export const NEVER_MARK = "NEVER-SENT-7f3a"

/** What an incident that is a privacy case sends in place of the person's details (docs/privacy.md). */
export const WITHHELD_IN_A_PRIVACY_CASE = {
  personName: null,
  workerId: null,
  location: null,
  description: null,
  bodyPart: null,
  injuryType: null
} as const

export interface TestCompany {
  readonly id: string
  readonly name: string
  readonly host: string
  readonly adminEmail: string
  readonly adminId: string
  readonly memberEmail: string
}

export interface CompanyOptions {
  readonly host?: string
  readonly name?: string
  readonly tier?: "starter" | "team" | "company"
  readonly apiEnabled?: boolean
  readonly modules?: ReadonlyArray<Resource>
  /** Mirror it into service.* as capture would (default true). */
  readonly mirrored?: boolean
}

let counter = 0

/** A company with an admin and a member, in app.* and (unless told otherwise) service.*. */
export const createCompany = async (sql: Sql, options: CompanyOptions = {}): Promise<TestCompany> => {
  const tag = `${Date.now().toString(36)}${(counter++).toString(36)}${Math.random().toString(36).slice(2, 6)}`
  const host = options.host ?? `c${tag}.safety.test`
  const name = options.name ?? `Company ${tag}`
  const tier = options.tier ?? "company"
  const apiEnabled = options.apiEnabled ?? true
  const modules = options.modules ?? RESOURCES
  const [c] = await sql<{ id: string; created_at: Date }[]>`
    insert into app.companies (name, host, tier, api_enabled) values (${name}, ${host}, ${tier}, ${apiEnabled})
    returning id::text, created_at`
  const companyId = c!.id
  for (const m of RESOURCES) {
    await sql`insert into app.company_modules (company_id, module, enabled) values (${companyId}, ${m}, ${modules.includes(m)})`
  }
  const adminEmail = `admin.${tag}@example.test`
  const memberEmail = `member.${tag}@example.test`
  const [admin] = await sql<{ id: string }[]>`
    insert into app.users (company_id, name, email, role) values (${companyId}, 'Ada Admin', ${adminEmail}, 'admin') returning id::text`
  const [member] = await sql<{ id: string }[]>`
    insert into app.users (company_id, name, email, role) values (${companyId}, 'Max Member', ${memberEmail}, 'member') returning id::text`
  if (options.mirrored ?? true) {
    await sql`
      insert into service.companies (id, name, host, tier, api_enabled, modules, created_at)
      values (${companyId}, ${name}, ${host}, ${tier}, ${apiEnabled}, ${modules as string[]}::text[], ${c!.created_at})`
    await sql`
      insert into service.users (id, company_id, name, email, role) values
        (${admin!.id}, ${companyId}, 'Ada Admin', ${adminEmail}, 'admin'),
        (${member!.id}, ${companyId}, 'Max Member', ${memberEmail}, 'member')`
  }
  return { id: companyId, name, host, adminEmail, adminId: admin!.id, memberEmail }
}

/** Changes a company as capture would after the app changed it. */
export const updateCompany = async (
  sql: Sql,
  companyId: string,
  change: { readonly tier?: string; readonly apiEnabled?: boolean; readonly modules?: ReadonlyArray<Resource> }
) => {
  if (change.tier !== undefined) await sql`update service.companies set tier = ${change.tier} where id = ${companyId}`
  if (change.apiEnabled !== undefined)
    await sql`update service.companies set api_enabled = ${change.apiEnabled} where id = ${companyId}`
  if (change.modules !== undefined) {
    await sql`update service.companies set modules = ${change.modules as string[]}::text[] where id = ${companyId}`
  }
}

const CHILD_TABLE: Partial<Record<Resource, string>> = {
  audits: "audit_items",
  inspections: "inspection_items",
  subcontractors: "subcontractor_documents"
}

const marked = (table: string, row: Record<string, unknown>) => {
  const out: Record<string, unknown> = { ...row }
  for (const column of NEVER_COLUMNS[table] ?? []) {
    out[column] = column.endsWith("photos") || column === "attachments" ? [NEVER_MARK] : NEVER_MARK
  }
  return out
}

export interface RecordOptions {
  readonly id?: string
  readonly companyId: string
  readonly createdAt: string
  /** Column values of the record's own app row (e.g. name, status, privacy_case). */
  readonly row?: Readonly<Record<string, unknown>>
}

/** A record shaped by the real shaper from a realistic app row carrying NEVER markers. */
export const makeRecord = (resource: Resource, options: RecordOptions): Record<string, unknown> => {
  const fixture: ShapeInput = FIXTURES[resource]
  const table = RESOURCE_INFO[resource].table
  const id = options.id ?? randomUUID()
  const childTable = CHILD_TABLE[resource]
  const input: ShapeInput = {
    row: marked(table, {
      ...fixture.row,
      id,
      company_id: options.companyId,
      created_at: options.createdAt,
      updated_at: options.createdAt,
      ...options.row
    }),
    children:
      childTable === undefined
        ? fixture.children
        : fixture.children.map((c) => marked(childTable, { ...c, id: randomUUID() })),
    acknowledgementCount: fixture.acknowledgementCount,
    equipment: fixture.equipment === null ? null : marked("equipment", fixture.equipment),
    equipmentJobSite: fixture.equipmentJobSite === null ? null : marked("job_sites", fixture.equipmentJobSite)
  }
  return shape(resource, input) as Record<string, unknown>
}

export interface StoredRecord {
  readonly id: string
  readonly createdAt: string
  readonly body: string
}

/** Stores records in service.views as capture would; returns them in insertion order. */
export const storeRecords = async (
  sql: Sql,
  resource: Resource,
  records: ReadonlyArray<Record<string, unknown>>,
  companyId: string
): Promise<ReadonlyArray<StoredRecord>> => {
  const rows = records.map((record) => {
    const meta = viewMeta(resource, record)
    // The change time (sql/012_sync.sql) of a record stored once: its updatedAt, else its createdAt.
    const updatedAt = typeof record["updatedAt"] === "string" ? record["updatedAt"] : null
    return {
      resource,
      id: String(record["id"]),
      company_id: companyId,
      created_at: meta.createdAt,
      updated_at: updatedAt,
      changed_at: updatedAt ?? meta.createdAt,
      name: meta.name,
      status: meta.status,
      body: JSON.stringify(record)
    }
  })
  for (let i = 0; i < rows.length; i += 1000) {
    await sql`insert into service.views ${sql(rows.slice(i, i + 1000))}`
  }
  return rows.map((r) => ({ id: r.id, createdAt: r.created_at, body: r.body }))
}

/** n records of a resource, created one second apart going back from `newest` (default now). */
export const seedRecords = async (
  sql: Sql,
  resource: Resource,
  companyId: string,
  n: number,
  options: {
    readonly newest?: Date
    readonly stepMillis?: number
    readonly row?: (i: number) => Readonly<Record<string, unknown>>
  } = {}
): Promise<ReadonlyArray<StoredRecord>> => {
  const newest = (options.newest ?? new Date()).getTime()
  const step = options.stepMillis ?? 1000
  const records = Array.from({ length: n }, (_, i) =>
    makeRecord(resource, {
      companyId,
      createdAt: new Date(newest - i * step).toISOString(),
      ...(options.row === undefined ? {} : { row: options.row(i) })
    })
  )
  return storeRecords(sql, resource, records, companyId)
}
