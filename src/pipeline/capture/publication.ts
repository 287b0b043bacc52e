// The publication capture reads: every app table the service follows, with a column list
// that leaves NEVER columns out, so data that must never leave never reaches capture. The
// service uses the publication it finds and never widens one; it creates it only when it
// may (owning the app's tables, or superuser), else a DBA makes it from `database setup-sql`.
// Every statement here is on the app's database (`appQuery`).
import { Effect } from "effect"
import { appQuery as query } from "../../platform/db/Sql.ts"
import type { Tx } from "../../platform/db/Database.ts"
import { NEVER_COLUMNS, PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { APP_TABLES } from "../projection/tables.ts"

export const ident = (s: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new Error(`not a plain identifier: ${s}`)
  return s
}

/** Columns to publish per app table (every table, each with PUBLISHED_COLUMNS, unless given). */
type Columns = ReadonlyMap<string, ReadonlyArray<string>>

/** The table list with column lists, as CREATE/ALTER PUBLICATION take it. */
export const publicationTables = (separator = ", ", columns?: Columns) =>
  APP_TABLES.filter((t) => columns === undefined || (columns.get(t)?.length ?? 0) > 0)
    .map((t) => `app.${ident(t)} (${(columns?.get(t) ?? PUBLISHED_COLUMNS[t]!).map(ident).join(", ")})`)
    .join(separator)

export const createPublicationStatement = (name: string, separator = ", ", columns?: Columns) =>
  `create publication ${ident(name)} for table ${publicationTables(separator, columns)} with (publish = 'insert, update, delete, truncate')`

/**
 * The comment on a publication the service made itself, naming the tables it could not publish
 * whole then (a column it reads was not there: the app had renamed it away). Those, and only
 * those, the service completes once their columns are back (followOwnPublication); anything
 * else in a publication, the service never changes.
 */
const OWN = "made by safety-records-service"
const ownComment = (incomplete: ReadonlyArray<string>) =>
  incomplete.length === 0 ? OWN : `${OWN}; incomplete: ${incomplete.join(",")}`

/**
 * What the service publishes of the app's tables as they are now: the columns it reads that are
 * there (a column the app renamed away is left out until it is back; a table with none is left
 * out). Never a NEVER column.
 */
const columnsThere = async (sql: Tx): Promise<Map<string, ReadonlyArray<string>>> => {
  const rows = await sql<{ table: string; column: string }[]>`
    select c.relname as table, a.attname as column from pg_class c
    join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'app'
    join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where c.relkind in ('r', 'p') and c.relname = any(${APP_TABLES as string[]})`
  const there = new Map<string, Set<string>>()
  for (const r of rows) there.set(r.table, (there.get(r.table) ?? new Set()).add(r.column))
  return new Map(APP_TABLES.map((t) => [t, PUBLISHED_COLUMNS[t]!.filter((c) => there.get(t)?.has(c) ?? false)]))
}

/**
 * Completes the tables the service could not publish whole when it made the publication, once
 * every column it reads is there (renamed back): the table then fits, and capture reads it
 * again. Returns whether it changed the publication.
 */
export const followOwnPublication = async (sql: Tx, name: string): Promise<boolean> => {
  const [pub] = await sql<{ comment: string | null }[]>`
    select obj_description(oid, 'pg_publication') as comment from pg_publication where pubname = ${name}`
  const incomplete = pub?.comment?.startsWith(`${OWN}; incomplete: `)
    ? pub.comment
        .slice(`${OWN}; incomplete: `.length)
        .split(",")
        .filter((t) => APP_TABLES.includes(t))
    : []
  if (incomplete.length === 0) return false
  const there = await columnsThere(sql)
  const whole = incomplete.filter((t) => there.get(t)!.length === PUBLISHED_COLUMNS[t]!.length)
  if (whole.length === 0) return false
  const published = new Set(
    (
      await sql<{ tablename: string }[]>`
        select tablename from pg_publication_tables where pubname = ${name} and schemaname = 'app'`
    ).map((r) => r.tablename)
  )
  const statements = whole.flatMap((t) => [
    ...(published.has(t) ? [`alter publication ${ident(name)} drop table app.${ident(t)}`] : []),
    `alter publication ${ident(name)} add table app.${ident(t)} (${PUBLISHED_COLUMNS[t]!.map(ident).join(", ")})`
  ])
  const left = incomplete.filter((t) => !whole.includes(t))
  // One simple query (no parameters): all of it or none.
  await sql.unsafe(`${statements.join("; ")}; comment on publication ${ident(name)} is '${ownComment(left)}'`)
  return true
}

export interface FoundPublication {
  readonly allTables: boolean
  readonly publishes: {
    readonly insert: boolean
    readonly update: boolean
    readonly delete: boolean
    readonly truncate: boolean
  }
  /** "schema.table" to its published columns and row filter (null: none). */
  readonly tables: ReadonlyMap<string, { readonly columns: ReadonlyArray<string>; readonly rowFilter: string | null }>
}

/** What is wrong with a publication, one line each, naming `app.table.column`. Pure. */
export const publicationProblems = (name: string, pub: FoundPublication): ReadonlyArray<string> => {
  const { refusals, tables } = publicationFindings(name, pub)
  return [...refusals, ...tables]
}

/**
 * publicationProblems in two kinds. `refusals` stop capture from starting: a publication that
 * would stream NEVER data (FOR ALL TABLES, a NEVER column), or that cannot give capture every
 * change (an operation left out, a row filter, a table it does not follow). `tables` break one
 * table only (out of the publication, a column it reads missing, one it does not read there):
 * capture starts, holds that table's records and says so in `status` until it fits again
 * (quarantine/, the contract watch). Pure.
 */
export const publicationFindings = (name: string, pub: FoundPublication) => {
  const refusals: string[] = []
  const tables: string[] = []
  if (pub.allTables)
    refusals.push(`publication ${name} is FOR ALL TABLES: it publishes every column of every table, NEVER ones too`)
  for (const [op, on] of Object.entries(pub.publishes)) {
    if (!on)
      refusals.push(
        `publication ${name} does not publish ${op}s (publish = 'insert, update, delete, truncate' is needed)`
      )
  }
  for (const table of APP_TABLES) {
    const found = pub.tables.get(`app.${table}`)
    if (!found) {
      tables.push(`app.${table} is not in publication ${name}`)
      continue
    }
    const never = NEVER_COLUMNS[table] ?? []
    const wanted = PUBLISHED_COLUMNS[table]!
    for (const column of found.columns) {
      if (never.includes(column))
        refusals.push(`app.${table}.${column} is published, and it is NEVER sent: it must not reach capture either`)
      else if (!wanted.includes(column))
        tables.push(`app.${table}.${column} is published, but the service does not read it`)
    }
    for (const column of wanted)
      if (!found.columns.includes(column)) tables.push(`app.${table}.${column} is not published`)
    if (found.rowFilter !== null)
      refusals.push(`app.${table} is published with a row filter (${found.rowFilter}): capture must see every row`)
  }
  for (const table of pub.tables.keys()) {
    const [schema, name_] = table.split(".")
    if (schema !== "app" || !APP_TABLES.includes(name_!))
      refusals.push(`${table} is in publication ${name}, but the service does not follow it`)
  }
  return { refusals: refusals as ReadonlyArray<string>, tables: tables as ReadonlyArray<string> }
}

export const readPublication = Effect.fn("readPublication")(function* (name: string) {
  const [pub] = yield* query(
    (sql) => sql<
      { puballtables: boolean; pubinsert: boolean; pubupdate: boolean; pubdelete: boolean; pubtruncate: boolean }[]
    >`
    select puballtables, pubinsert, pubupdate, pubdelete, pubtruncate from pg_publication where pubname = ${name}`
  )
  if (!pub) return null
  const rows = yield* query(
    (sql) => sql<{ schemaname: string; tablename: string; attnames: string[] | null; rowfilter: string | null }[]>`
    select schemaname, tablename, attnames::text[] as attnames, rowfilter from pg_publication_tables where pubname = ${name}`
  )
  const found: FoundPublication = {
    allTables: pub.puballtables,
    publishes: { insert: pub.pubinsert, update: pub.pubupdate, delete: pub.pubdelete, truncate: pub.pubtruncate },
    tables: new Map(
      rows.map((r) => [`${r.schemaname}.${r.tablename}`, { columns: r.attnames ?? [], rowFilter: r.rowfilter }])
    )
  }
  return found
})

const setupHint = (role: string) => `npm run -s admin -- database setup-sql --role ${role}`

/**
 * Uses the publication named `name`: creates it when missing and this role may, then refuses
 * (StartRefused) unless it publishes exactly what the service reads. Never alters one.
 */
export const ensurePublication = Effect.fn("ensurePublication")(function* (name: string) {
  const [{ role } = { role: "?" }] = yield* query((sql) => sql<{ role: string }[]>`select current_user as role`)
  let pub = yield* readPublication(name)
  let created = false
  if (pub === null) {
    // The error code, or null when it was made. Another process made it meanwhile: use theirs.
    // One that committed first gives 42710; one whose CREATE was still open when ours began
    // gives 23505 (the catalog's unique index; replicas starting together meet this).
    // Made from the app's tables as they are: a column the app renamed away is left out (that
    // table is held until it is back, and the service then publishes it: followOwnPublication).
    const code = yield* query(async (sql) => {
      const columns = await columnsThere(sql)
      const incomplete = APP_TABLES.filter((t) => columns.get(t)!.length < PUBLISHED_COLUMNS[t]!.length)
      // One simple query (no parameters): both statements or neither.
      return sql
        .unsafe(
          `${createPublicationStatement(name, ", ", columns)}; comment on publication ${ident(name)} is '${ownComment(incomplete)}'`
        )
        .then(
          () => null,
          (e) => {
            const code = (e as { code?: string }).code
            if (code === "42710" || code === "23505" || code === "42501") return code
            throw e
          }
        )
    })
    if (code === "42501") {
      return yield* new StartRefused({
        message:
          `Publication ${name} does not exist, and role ${role} may not create it (only the owner of the app's tables or a superuser can). ` +
          `Have a DBA run the SQL that "${setupHint(role)}" prints, or set PUBLICATION to the name of the publication made for this service.`
      })
    }
    created = code === null
    pub = yield* readPublication(name)
    if (pub === null) return yield* Effect.die(new Error(`publication ${name} vanished right after it was created`))
  }
  // A table that does not fit stops only that table: capture's contract watch marks it (quarantine/).
  const { refusals: problems } = publicationFindings(name, pub)
  if (problems.length > 0) {
    return yield* new StartRefused({
      message:
        `Publication ${name} does not publish what the service reads, and the service never changes a publication:\n` +
        problems.map((p) => `  - ${p}`).join("\n") +
        `\nFix it as the owner of the app's tables or a superuser (the statement is also in "${setupHint(role)}"):\n` +
        `  alter publication ${ident(name)} set table ${publicationTables()};\n` +
        `  alter publication ${ident(name)} set (publish = 'insert, update, delete, truncate');`
    })
  }
  return { created }
})

/** What capture checks before it starts: the publication, and failover slots need 17+. */
export const checkCaptureStart = Effect.fn("checkCaptureStart")(function* (config: {
  readonly publication: string
  readonly failover: boolean
}) {
  if (config.failover) {
    const [row] = yield* query(
      (sql) => sql<{ version: number }[]>`select current_setting('server_version_num')::int as version`
    )
    if (row!.version < 170000) {
      return yield* new StartRefused({
        message: `REPLICATION_SLOT_FAILOVER=true needs PostgreSQL 17 or newer (failover slots); this server runs ${Math.floor(row!.version / 10000)}. Unset it, or use the pg_failover_slots extension on older servers.`
      })
    }
  }
  yield* ensurePublication(config.publication)
})
