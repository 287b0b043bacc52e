// The app's tables are the app's: the service only checks, at start, that every table and
// column it reads is there with a type it can read, that changes to them can be followed
// (replica identity) and that its role may read them. Extra app columns are fine: they are
// neither published nor read. Nothing here writes.
import type { Sql } from "postgres"
import { APP_COLUMNS, type ColumnType } from "../../domain/records/columns.ts"
import { StartRefused } from "./refusal.ts"

/** Server types (format_type of the base type, without modifiers) that fit each column type. */
const FITS: Readonly<Record<ColumnType, ReadonlyArray<string>>> = {
  uuid: ["uuid"],
  text: ["text", "character varying", "character", "citext"],
  timestamptz: ["timestamp with time zone"],
  boolean: ["boolean"],
  integer: ["smallint", "integer", "bigint"],
  numeric: ["numeric", "real", "double precision", "smallint", "integer", "bigint"],
  "text[]": ["text[]", "character varying[]", "citext[]"],
  jsonb: ["jsonb", "json"]
}

/** The columns that identify a row of each table: its replica identity must be exactly these. */
export const keyColumns = (table: string): ReadonlyArray<string> =>
  table === "company_modules" ? ["company_id", "module"] : ["id"]

export interface FoundColumn {
  readonly type: string
  /** An enum type: read as its label, so it fits a text column. */
  readonly isEnum: boolean
  readonly readable: boolean
}

export interface FoundTable {
  readonly columns: ReadonlyMap<string, FoundColumn>
  /** pg_class.relreplident: d (primary key), i (an index), f (full), n (nothing). */
  readonly replicaIdentity: string
  /** Columns of the primary key (identity d) or of the identity index (i). */
  readonly identityColumns: ReadonlyArray<string>
}

/** Whether a server type (format_type of its base type) reads as `want`; an enum reads as text. */
export const typeFits = (want: ColumnType, type: string, isEnum = false) =>
  FITS[want].includes(type) || (want === "text" && isEnum)

const fits = (want: ColumnType, found: FoundColumn) => typeFits(want, found.type, found.isEnum)

const sameSet = (a: ReadonlyArray<string>, b: ReadonlyArray<string>) =>
  a.length === b.length && a.every((x) => b.includes(x))

/** What does not fit, one line per problem, each naming `app.table[.column]`. Pure. */
export const contractProblems = (found: ReadonlyMap<string, FoundTable>, role: string): ReadonlyArray<string> => {
  const { refusals, columns } = contractFindings(found, role)
  return [...columns, ...refusals]
}

/**
 * contractProblems in two kinds: `columns`, a column the service reads missing (dropped,
 * renamed) or of a type that does not read the same, which capture survives (it holds that
 * table's records until the column fits again: docs/design.md, "Quarantine"); `refusals`, the
 * rest (a table missing, a column the role may not read, an identity capture cannot follow).
 */
export const contractFindings = (found: ReadonlyMap<string, FoundTable>, role: string) => {
  const problems: string[] = []
  const columnProblems: string[] = []
  for (const [table, columns] of Object.entries(APP_COLUMNS)) {
    const t = found.get(table)
    if (!t) {
      problems.push(`app.${table} is missing`)
      continue
    }
    for (const [column, want] of Object.entries(columns)) {
      const c = t.columns.get(column)
      if (!c) columnProblems.push(`app.${table}.${column} is missing (read as ${want})`)
      else if (!fits(want, c))
        columnProblems.push(`app.${table}.${column} is ${c.type}; the service reads it as ${want}`)
      else if (!c.readable) problems.push(`app.${table}.${column} cannot be read by role ${role} (no SELECT on it)`)
    }
    const key = keyColumns(table)
    if (t.replicaIdentity === "f") {
      problems.push(
        `app.${table} has REPLICA IDENTITY FULL, which would publish every column (NEVER ones too) with each update; use its primary key (ALTER TABLE app.${table} REPLICA IDENTITY DEFAULT)`
      )
    } else if (t.replicaIdentity === "n") {
      problems.push(
        `app.${table} has REPLICA IDENTITY NOTHING: its updates and deletes cannot be followed (ALTER TABLE app.${table} REPLICA IDENTITY DEFAULT)`
      )
    } else if (!sameSet(t.identityColumns, key)) {
      problems.push(
        t.identityColumns.length === 0
          ? `app.${table} has no primary key: its updates and deletes cannot be followed (the service expects primary key (${key.join(", ")}))`
          : `app.${table} is identified by (${t.identityColumns.join(", ")}); the service expects (${key.join(", ")})`
      )
    }
  }
  return { refusals: problems as ReadonlyArray<string>, columns: columnProblems as ReadonlyArray<string> }
}

/** Reads what the app's tables look like (catalogs only, which every role may read). */
export const readAppTables = async (sql: Sql): Promise<ReadonlyMap<string, FoundTable>> => {
  const rows = await sql<
    {
      table: string
      column: string | null
      type: string | null
      is_enum: boolean | null
      readable: boolean | null
      replident: string
      identity: string[]
    }[]
  >`
    select c.relname as table, a.attname as column,
           format_type(coalesce(nullif(t.typbasetype, 0), t.oid), null) as type,
           (bt.typtype = 'e') as is_enum,
           case when a.attname is null then null else has_column_privilege(c.oid, a.attnum, 'SELECT') end as readable,
           c.relreplident::text as replident,
           array(select ia.attname::text from pg_index i
                   join pg_attribute ia on ia.attrelid = i.indrelid and ia.attnum = any(i.indkey)
                  where i.indrelid = c.oid and (case when c.relreplident = 'i' then i.indisreplident else i.indisprimary end)
                  order by ia.attnum) as identity
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'app'
    left join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    left join pg_type t on t.oid = a.atttypid
    left join pg_type bt on bt.oid = coalesce(nullif(t.typbasetype, 0), t.oid)
    where c.relkind in ('r', 'p') and c.relname = any(${Object.keys(APP_COLUMNS)})`
  const tables = new Map<
    string,
    { columns: Map<string, FoundColumn>; replicaIdentity: string; identityColumns: ReadonlyArray<string> }
  >()
  for (const r of rows) {
    let t = tables.get(r.table)
    if (!t) tables.set(r.table, (t = { columns: new Map(), replicaIdentity: r.replident, identityColumns: r.identity }))
    if (r.column !== null)
      t.columns.set(r.column, { type: r.type ?? "", isEnum: r.is_enum ?? false, readable: r.readable ?? false })
  }
  return tables
}

/**
 * Refuses to start, naming each `app.table.column`, unless the app's tables can be followed.
 * A column that no longer fits (dropped, renamed, retyped) does not refuse: capture holds that
 * table's records and `status` names it until it fits again; those lines are returned, to log.
 */
export const checkAppContract = async (sql: Sql): Promise<ReadonlyArray<string>> => {
  const [who] = await sql<{ role: string; db: string }[]>`select current_user as role, current_database() as db`
  const found = await readAppTables(sql)
  if (found.size === 0) {
    throw new StartRefused({
      message:
        `The app's tables are missing from database "${who!.db}" (no table of schema app that the service reads). ` +
        `This service reads a safety app's tables; it never creates them. Point DATABASE_URL at the app's database, ` +
        `or make a demo database there: "npm run seed" (tables and demo records) or "npm run seed -- --schema-only" (the tables alone).`
    })
  }
  const { refusals: problems, columns } = contractFindings(found, who!.role)
  if (problems.length > 0) {
    throw new StartRefused({
      message:
        `The app's tables in database "${who!.db}" do not match what the service reads ` +
        `(see docs/deployment.md#least-privilege-and-managed-postgresql):\n` +
        problems.map((p) => `  - ${p}`).join("\n") +
        `\nThe service never changes the app's tables: fix them on the app's side, or grant what is missing ` +
        `(npm run -s admin -- database setup-sql --role ${who!.role} prints the grants).`
    })
  }
  return columns
}
