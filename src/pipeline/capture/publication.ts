// The publication capture reads: every app table the service follows, with a column list
// that leaves NEVER columns out, so data that must never leave never reaches capture. The
// service uses the publication it finds and never widens one; it creates it only when it
// may (owning the app's tables, or superuser), else a DBA makes it from `database setup-sql`.
// Every statement here is on the app's database (`appQuery`).
import { Effect } from "effect"
import { appQuery as query } from "../../platform/db/Sql.ts"
import { NEVER_COLUMNS, PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { APP_TABLES } from "../projection/tables.ts"

export const ident = (s: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new Error(`not a plain identifier: ${s}`)
  return s
}

/** The table list with column lists, as CREATE/ALTER PUBLICATION take it. */
export const publicationTables = (separator = ", ") =>
  APP_TABLES.map((t) => `app.${ident(t)} (${PUBLISHED_COLUMNS[t]!.map(ident).join(", ")})`).join(separator)

export const createPublicationStatement = (name: string, separator = ", ") =>
  `create publication ${ident(name)} for table ${publicationTables(separator)} with (publish = 'insert, update, delete, truncate')`

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
    const code = yield* query((sql) =>
      sql.unsafe(createPublicationStatement(name)).then(
        () => null,
        (e) => {
          const code = (e as { code?: string }).code
          if (code === "42710" || code === "23505" || code === "42501") return code
          throw e
        }
      )
    )
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
