// The contract: what an app table's columns must be for the service to read it. A table that
// no longer fits (a column it reads renamed, dropped or retyped, one it does not read published)
// holds its records until it fits again; the stream's Relation messages and the catalog (the
// contract watch) say it in the same words, naming app.table.column and the type expected.
import { APP_COLUMNS, NEVER_COLUMNS } from "../../../domain/records/columns.ts"
import { typeFits } from "../../../platform/db/app-contract.ts"
import type { Tx as Handle } from "../../../platform/db/Database.ts"

/** Built-in type OIDs and their names (format_type); user types (enums, domains, citext) are checked from the catalog. */
const BUILTIN_TYPES: ReadonlyMap<number, string> = new Map([
  [16, "boolean"],
  [17, "bytea"],
  [18, "char"],
  [19, "name"],
  [20, "bigint"],
  [21, "smallint"],
  [23, "integer"],
  [25, "text"],
  [26, "oid"],
  [114, "json"],
  [700, "real"],
  [701, "double precision"],
  [1000, "boolean[]"],
  [1005, "smallint[]"],
  [1007, "integer[]"],
  [1009, "text[]"],
  [1015, "character varying[]"],
  [1016, "bigint[]"],
  [1042, "character"],
  [1043, "character varying"],
  [1082, "date"],
  [1083, "time without time zone"],
  [1114, "timestamp without time zone"],
  [1184, "timestamp with time zone"],
  [1186, "interval"],
  [1231, "numeric[]"],
  [1266, "time with time zone"],
  [1700, "numeric"],
  [2950, "uuid"],
  [2951, "uuid[]"],
  [3802, "jsonb"],
  [3807, "jsonb[]"]
])

const FIRST_USER_OID = 16384

/** A column as the stream or the catalog shows it; type null: one only the catalog can judge. */
export interface SeenColumn {
  readonly name: string
  readonly type: string | null
  readonly isEnum?: boolean
}

/**
 * What a table's published columns show that does not fit what the service reads: a column it
 * reads missing (dropped with CASCADE, renamed, left out of the publication), one whose type
 * does not read the same, a column it does not read (renamed from one it reads, or added to
 * the publication). One line each, naming app.table.column and what the service expects. The
 * same words from the stream's Relation messages and from the catalog, so the two agree. Pure.
 */
export const columnProblems = (table: string, columns: ReadonlyArray<SeenColumn>): ReadonlyArray<string> => {
  const want = APP_COLUMNS[table]
  if (want === undefined) return []
  const found = new Map(columns.map((c) => [c.name, c]))
  const problems: string[] = []
  for (const [column, type] of Object.entries(want)) {
    const c = found.get(column)
    if (c === undefined)
      problems.push(
        `app.${table}.${column} is not in the change stream (dropped, renamed or not published); the service reads it as ${type}`
      )
    else if (c.type !== null && !typeFits(type, c.type, c.isEnum ?? false))
      problems.push(`app.${table}.${column} is ${c.type}; the service reads it as ${type}`)
  }
  const never = NEVER_COLUMNS[table] ?? []
  for (const c of columns) {
    if (c.name in want) continue
    problems.push(
      never.includes(c.name)
        ? `app.${table}.${c.name} is published, and it is NEVER sent: take it out of the publication`
        : `app.${table}.${c.name} is published, but the service does not read it (renamed from a column it reads, or added to the publication?)`
    )
  }
  return problems
}

/** columnProblems of a Relation message (type OIDs: built-in ones are named, user types left to the catalog). Pure. */
export const relationProblems = (
  table: string,
  columns: ReadonlyArray<{ readonly name: string; readonly typeOid: number }>
): ReadonlyArray<string> =>
  columnProblems(
    table,
    columns.map((c) => ({
      name: c.name,
      type: c.typeOid >= FIRST_USER_OID ? null : (BUILTIN_TYPES.get(c.typeOid) ?? `type ${c.typeOid}`)
    }))
  )

/** An app table as the catalog shows it. */
export interface CatalogTable {
  /** Every column of the table (null: there is no such table). */
  readonly columns: ReadonlyArray<SeenColumn> | null
  /** Its columns in the publication (null: it is not in the publication). */
  readonly published: ReadonlyArray<string> | null
}

/** What the catalog shows that does not fit, per table (none: it fits). Pure. */
export const catalogProblems = (table: string, publication: string, t: CatalogTable): ReadonlyArray<string> => {
  if (t.columns === null) return [`app.${table} is missing (dropped or renamed?); the service follows it`]
  const byName = new Map(t.columns.map((c) => [c.name, c]))
  if (t.published === null) {
    const want = APP_COLUMNS[table] ?? {}
    return [
      `app.${table} is not in publication ${publication} (a column it published was dropped with CASCADE, or the table was taken out): its changes no longer reach capture`,
      ...columnProblems(
        table,
        t.columns.filter((c) => c.name in want)
      ).filter((p) => !p.includes("is published"))
    ]
  }
  return columnProblems(
    table,
    t.published.map((name) => byName.get(name) ?? { name, type: null })
  )
}

/**
 * Every followed app table's columns and publication columns, from the catalog. One statement,
 * so one snapshot: read in two, a DROP COLUMN ... CASCADE landing between them showed the table
 * out of the publication with the dropped column still there (a finding half-made).
 */
export const readCatalog = async (sql: Handle, publication: string): Promise<Map<string, CatalogTable>> => {
  const tables = Object.keys(APP_COLUMNS)
  const rows = await sql<
    {
      table: string
      column: string | null
      type: string | null
      is_enum: boolean | null
      in_publication: boolean
      published: string[] | null
    }[]
  >`
    select c.relname as table, a.attname as column,
           format_type(coalesce(nullif(t.typbasetype, 0), t.oid), null) as type, (bt.typtype = 'e') as is_enum,
           (p.tablename is not null) as in_publication, p.attnames::text[] as published
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'app'
    left join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    left join pg_type t on t.oid = a.atttypid
    left join pg_type bt on bt.oid = coalesce(nullif(t.typbasetype, 0), t.oid)
    left join pg_publication_tables p on p.pubname = ${publication} and p.schemaname = 'app' and p.tablename = c.relname
    where c.relkind in ('r', 'p') and c.relname = any(${tables})`
  const columns = new Map<string, SeenColumn[]>()
  const pub = new Map<string, ReadonlyArray<string>>()
  for (const r of rows) {
    let cs = columns.get(r.table)
    if (cs === undefined) columns.set(r.table, (cs = []))
    if (r.column !== null) cs.push({ name: r.column, type: r.type, isEnum: r.is_enum ?? false })
    if (r.in_publication) pub.set(r.table, r.published ?? [])
  }
  return new Map(tables.map((t) => [t, { columns: columns.get(t) ?? null, published: pub.get(t) ?? null }]))
}

/** Per app table, what does not fit (only tables with problems). */
export const contractNow = async (sql: Handle, publication: string): Promise<Map<string, ReadonlyArray<string>>> => {
  const catalog = await readCatalog(sql, publication)
  const out = new Map<string, ReadonlyArray<string>>()
  for (const [table, t] of catalog) {
    const problems = catalogProblems(table, publication, t)
    if (problems.length > 0) out.set(table, problems)
  }
  return out
}
