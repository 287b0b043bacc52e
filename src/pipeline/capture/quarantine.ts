// Poison changes are quarantined, not fatal (docs/design.md, "Quarantine"). A record whose view
// capture cannot shape (a value the decoder rejects, a NaN where a number is read, a table
// whose columns no longer fit what the service reads) keeps its last good view and its events
// are held; every other change goes on, in order. The mirror follows the app as before, so
// the records a held row feeds (an audit's items) stay exact.
//
// A held record is shaped again at every later change that reaches it, and on `retry`: once it
// shapes, its view is written and the events it owes fire once, as the comparison of its row
// when it was held with its row now (src/domain/events.ts compares two states anyway), in
// the transaction capture is applying then, so they land at the outbox's frontier. `discard`
// drops what it owes. Retry and discard travel through the WAL (a transactional logical
// message) so capture meets them in stream order and applies them with its checkpoint.
//
// All SQL of the quarantine is here: capture's batch statements, and the operators' reads
// and requests (status, /metrics, the CLI).
import { Effect } from "effect"
import type { Sql as PgSql, TransactionSql } from "postgres"
import { APP_COLUMNS, NEVER_COLUMNS } from "../../domain/records/columns.ts"
import type { Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable, type Resource } from "../../domain/resources.ts"
import { typeFits } from "../../platform/db/app-contract.ts"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import { appQuery, query } from "../../platform/db/Sql.ts"
import type { Tx as Handle } from "../../platform/db/Database.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { ProjectionBug, TableMap } from "../projection/store.ts"

type Db = PgSql<Record<string, unknown>> | TransactionSql<Record<string, unknown>>

/** Prefix of the logical messages that carry operators' retry and discard requests. */
export const QUARANTINE_PREFIX = "safety-records-quarantine"
/** Prefix of the messages capture's contract watch writes: an app table's fit as the catalog shows it. */
export const CONTRACT_PREFIX = "safety-records-contract"

/** What a transaction asks of the quarantine at its start (in stream order). */
export type QuarantineMarker =
  /** The table's columns fit what the service reads (null), or these problems (a Relation message, the contract watch). */
  | { readonly kind: "contract"; readonly table: string; readonly problems: ReadonlyArray<string> | null }
  /** Shape these held records again now. */
  | { readonly kind: "retry"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Shape again every held record up to entry `upTo` whose table fits. */
  | { readonly kind: "retry-all"; readonly upTo: string }
  /** Drop these held records: their events are not sent; their view stays as it is. */
  | { readonly kind: "discard"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Shape these records now, held or not, holding those that fail (rebuild-views' findings). */
  | { readonly kind: "check"; readonly records: ReadonlyArray<readonly [string, string]> }
  /** Nothing: a transaction that lets capture go on with retries it has queued. */
  | { readonly kind: "continue" }
  /** Rows re-read from the app (resync.ts): the changes they make are in the transaction; `done` ends a table's resync. */
  | { readonly kind: "resynced"; readonly table: string; readonly after: string | null; readonly rows: number }

/** A request message's content, as the CLI (and rebuild-views, capture itself) write it. */
export interface QuarantineRequest {
  readonly op: "retry" | "discard" | "check" | "continue"
  readonly records?: ReadonlyArray<readonly [string, string]>
  readonly all?: boolean
  /** With all: the newest entry id the request covers. */
  readonly upTo?: string
}

/** The marker a request message makes; null for a message that is not one (it is ignored). */
export const markerOf = (content: string): QuarantineMarker | null => {
  try {
    const r = JSON.parse(content) as QuarantineRequest
    const records = Array.isArray(r.records)
      ? r.records.filter(
          (x): x is readonly [string, string] =>
            Array.isArray(x) && typeof x[0] === "string" && typeof x[1] === "string"
        )
      : []
    if (r.op === "retry")
      return r.all === true
        ? { kind: "retry-all", upTo: typeof r.upTo === "string" && /^\d{1,18}$/.test(r.upTo) ? r.upTo : "0" }
        : { kind: "retry", records }
    if (r.op === "discard") return { kind: "discard", records }
    if (r.op === "check") return { kind: "check", records }
    if (r.op === "continue") return { kind: "continue" }
    return null
  } catch {
    return null
  }
}

/** The marker a contract watch message makes (null: not one). */
export const contractMarkerOf = (content: string): QuarantineMarker | null => {
  try {
    const r = JSON.parse(content) as { table?: unknown; problems?: unknown }
    if (typeof r.table !== "string" || !(r.table in APP_COLUMNS)) return null
    const problems = Array.isArray(r.problems) ? r.problems.filter((p): p is string => typeof p === "string") : null
    return { kind: "contract", table: r.table, problems: problems === null || problems.length === 0 ? null : problems }
  } catch {
    return null
  }
}

// ---- what counts as poison ------------------------------------------------------------------

/**
 * Whether an error thrown while shaping is the data's fault (the record is held) rather than
 * the database's, the connection's or a bug's (the run ends and is retried, as before).
 * Shapers throw plain errors (TypeError: a value of the wrong type); postgres.js errors carry
 * a code; a row read before it was loaded is capture's own bug.
 */
export const isPoison = (e: unknown): boolean => {
  if (e instanceof ProjectionBug) return false
  if (!(e instanceof Error)) return true
  const code = (e as { code?: unknown }).code
  if (typeof code !== "string") return true
  // SQLSTATE classes 22 (data exception) and 23 (integrity) are the data's; the rest
  // (connection, resources, operator intervention) are not.
  return /^2[23][0-9A-Z]{3}$/.test(code)
}

export const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))

// ---- the contract: what a table's columns must be ---------------------------------------------

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

/** Every followed app table's columns and publication columns, from the catalog. */
export const readCatalog = async (sql: Handle, publication: string): Promise<Map<string, CatalogTable>> => {
  const tables = Object.keys(APP_COLUMNS)
  const rows = await sql<{ table: string; column: string | null; type: string | null; is_enum: boolean | null }[]>`
    select c.relname as table, a.attname as column,
           format_type(coalesce(nullif(t.typbasetype, 0), t.oid), null) as type, (bt.typtype = 'e') as is_enum
    from pg_class c
    join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'app'
    left join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    left join pg_type t on t.oid = a.atttypid
    left join pg_type bt on bt.oid = coalesce(nullif(t.typbasetype, 0), t.oid)
    where c.relkind in ('r', 'p') and c.relname = any(${tables})`
  const published = await sql<{ tablename: string; attnames: string[] | null }[]>`
    select tablename, attnames::text[] as attnames from pg_publication_tables
    where pubname = ${publication} and schemaname = 'app' and tablename = any(${tables})`
  const columns = new Map<string, SeenColumn[]>()
  for (const r of rows) {
    let cs = columns.get(r.table)
    if (cs === undefined) columns.set(r.table, (cs = []))
    if (r.column !== null) cs.push({ name: r.column, type: r.type, isEnum: r.is_enum ?? false })
  }
  const pub = new Map(published.map((p) => [p.tablename, p.attnames ?? []]))
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

// ---- capture's state for one run -----------------------------------------------------------

/** Why a record is held, as far as shaping it again goes. */
export interface HeldInfo {
  /** The app table whose contract break (or re-read) holds it: it shapes again once that is over. */
  readonly blockedBy: string | null
  /** The app row with a value the decoder rejected: it shapes again only from a whole copy of it. */
  readonly source: readonly [string, string] | null
}

/** A record held by a batch: why, and what it owes. */
export interface Held {
  readonly ref: RecordRef
  readonly table: string
  /** Why; null: it still waits for what its entry says (a table, a whole copy of a row), the entry keeps its error. */
  readonly error: string | null
  readonly companyId: string | null
  /** Its row as of its last good view (null: it had none); undefined when it was held already (what it owes is stored). */
  readonly before: Row | null | undefined
  readonly info: HeldInfo
  readonly lsn: Lsn
}

/** What a batch changes in the quarantine, written in its transaction. */
export interface QuarantineDelta {
  /** The batch (CaptureQuarantine.nextBatch): which in-memory changes its commit settles. */
  readonly batch: number
  /** Records held (new, or held again: attempts go up). */
  readonly held: ReadonlyArray<Held>
  /** Records no longer held: shaped again, gone, or discarded. */
  readonly released: ReadonlyArray<RecordRef>
  /** Contract changes: problems, or null when the table fits again. */
  readonly contract: ReadonlyArray<{
    readonly table: string
    readonly problems: ReadonlyArray<string> | null
    readonly lsn: Lsn
  }>
  /** Re-reads of whole tables: started (after ''), moved on (after a key) with rows, or done (null). */
  readonly resync: ReadonlyArray<{ readonly table: string; readonly after: string | null; readonly rows: number }>
}

export const emptyDelta = (batch: number): QuarantineDelta => ({
  batch,
  held: [],
  released: [],
  contract: [],
  resync: []
})

export const deltaIsEmpty = (d: QuarantineDelta) =>
  d.held.length === 0 && d.released.length === 0 && d.contract.length === 0 && d.resync.length === 0

/** Whether a record is held before a batch, and why (undefined: not held). */
export type HeldLookup = (table: string, key: string) => HeldInfo | undefined

/** Retries still to shape, taken a chunk per batch. */
type RetryWork =
  | { readonly kind: "all"; readonly upTo: string; after: string }
  | { readonly kind: "blocked"; readonly table: string; after: string }

/** Held records shaped again per batch, at most: a retry of thousands goes on in later batches. */
export const RETRY_CHUNK = 500

/** Held keys kept in memory, at most (about 100 bytes each); past it they are looked up per batch. */
export const HELD_IN_MEMORY = 20_000

const NONE: HeldLookup = () => undefined

/**
 * The held records and broken tables capture knows, for one run: loaded at its start, changed
 * as batches are prepared (in stream order), written with each batch. A run that fails drops
 * it; the next loads what was committed. Held keys stay in memory while there are at most
 * `limit`; past that they are read from the table for each batch's records, with what batches
 * not yet committed changed laid over the answer (as src/pipeline/projection/store.ts does for
 * rows). What a record owes (its row when it was held) is read only when it shapes again.
 */
export class CaptureQuarantine {
  private keys: TableMap<HeldInfo> | null = new TableMap()
  private count = 0
  readonly limit: number
  readonly broken = new Map<string, ReadonlyArray<string>>()
  /** Tables being re-read from the app (resync.ts): records they block stay held until it ends. */
  readonly resyncing = new Set<string>()
  /** What batches not yet committed changed: held (with what a new hold owes) or released (null). */
  private readonly overlay = new TableMap<{
    readonly batch: number
    readonly info: HeldInfo | null
    readonly before?: Row | null
  }>()
  private batches = 0
  /** Retries still to shape. */
  private readonly retries: RetryWork[] = []
  /** Rows to re-read from the app for retried records whose source row lacks a value (resync.ts). */
  readonly rereads: Array<readonly [string, string]> = []

  constructor(limit = HELD_IN_MEMORY) {
    this.limit = limit
  }

  get size(): number {
    return this.count
  }

  /** Held keys are looked up per batch rather than kept in memory. */
  get spilled(): boolean {
    return this.keys === null
  }

  /** Nothing held, broken, re-read or queued: a batch that brings nothing for it pays nothing. */
  get empty(): boolean {
    return this.count === 0 && this.broken.size === 0 && this.resyncing.size === 0 && this.retries.length === 0
  }

  /** Retries remain queued: capture writes a `continue` request so they go on without waiting for traffic. */
  get retriesQueued(): boolean {
    return this.retries.length > 0
  }

  static async load(sql: Db, limit = HELD_IN_MEMORY): Promise<CaptureQuarantine> {
    const q = new CaptureQuarantine(limit)
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`select count(*)::int as n from service.capture_quarantine`
    q.count = n
    if (n > limit) q.keys = null
    else {
      const held = await sql<
        { tbl: string; key: string; blocked_by: string | null; source_tbl: string | null; source_key: string | null }[]
      >`select tbl, key, blocked_by, source_tbl, source_key from service.capture_quarantine`
      for (const h of held) q.keys!.set(h.tbl, h.key, infoOf(h))
    }
    const broken = await sql<{ tbl: string; problems: string[] }[]>`select tbl, problems from service.capture_contract`
    for (const b of broken) q.broken.set(b.tbl, b.problems)
    const resync = await sql<{ tbl: string }[]>`select tbl from service.capture_resync`
    for (const r of resync) q.resyncing.add(r.tbl)
    return q
  }

  nextBatch(): number {
    return ++this.batches
  }

  /** Whether a held record's table still blocks it (broken, or being re-read). */
  blocks(info: HeldInfo): boolean {
    return info.blockedBy !== null && (this.broken.has(info.blockedBy) || this.resyncing.has(info.blockedBy))
  }

  /**
   * Which of `keys` are held before the batch: in memory, the live map (batches prepared before
   * changed it already); spilled, the table as committed with uncommitted batches' changes over it.
   */
  async lookup(
    sql: Db,
    keys: ReadonlyArray<readonly [string, string]>,
    found: TableMap<HeldInfo> = new TableMap()
  ): Promise<HeldLookup> {
    if (this.count === 0 && this.overlay.isEmpty()) return NONE
    const mem = this.keys
    if (mem !== null) return (t, k) => mem.get(t, k)
    for (let i = 0; i < keys.length; i += 5000) {
      const part = keys.slice(i, i + 5000)
      const rows = await sql<
        { tbl: string; key: string; blocked_by: string | null; source_tbl: string | null; source_key: string | null }[]
      >`
        select q.tbl, q.key, q.blocked_by, q.source_tbl, q.source_key from service.capture_quarantine q
        join unnest(${part.map(([t]) => t)}::text[], ${part.map(([, k]) => k)}::text[]) as w(tbl, key)
          on q.tbl = w.tbl and q.key = w.key`
      for (const r of rows) found.set(r.tbl, r.key, infoOf(r))
    }
    const overlay = this.overlay
    return (t, k) => {
      const o = overlay.get(t, k)
      return o === undefined ? found.get(t, k) : (o.info ?? undefined)
    }
  }

  /**
   * A prepared batch's changes, before it is written (the next batch, prepared meanwhile, sees
   * them). `held` with `before` defined are new entries.
   */
  apply(delta: QuarantineDelta, was: HeldLookup): void {
    for (const r of delta.released) {
      const table = RESOURCE_INFO[r.resource].table
      if (was(table, r.id) === undefined) continue
      this.count--
      this.keys?.delete(table, r.id)
      this.overlay.set(table, r.id, { batch: delta.batch, info: null })
    }
    for (const h of delta.held) {
      if (h.before !== undefined) {
        this.count++
        this.overlay.set(h.table, h.ref.id, { batch: delta.batch, info: h.info, before: h.before })
      } else this.overlay.set(h.table, h.ref.id, { batch: delta.batch, info: h.info })
      this.keys?.set(h.table, h.ref.id, h.info)
    }
    // Past the limit the keys go: from here on they are read per batch (the overlay holds
    // what is not committed yet).
    if (this.keys !== null && this.count > this.limit) this.keys = null
  }

  /** The batch committed: the table has what it changed. */
  settled(delta: QuarantineDelta): void {
    const drop = (t: string, k: string) => {
      if (this.overlay.get(t, k)?.batch === delta.batch) this.overlay.delete(t, k)
    }
    for (const h of delta.held) drop(h.table, h.ref.id)
    for (const r of delta.released) drop(RESOURCE_INFO[r.resource].table, r.id)
  }

  /** What the given held records owe: their row when they were held (null: none). */
  async owedBy(sql: Db, refs: ReadonlyArray<RecordRef>): Promise<TableMap<Row | null>> {
    const out = new TableMap<Row | null>()
    const ask: Array<[string, string]> = []
    // Batches not committed first: should one commit meanwhile, the table has it by the read.
    for (const r of refs) {
      const table = RESOURCE_INFO[r.resource].table
      const o = this.overlay.get(table, r.id)
      if (o?.before !== undefined) out.set(table, r.id, o.before)
      else ask.push([table, r.id])
    }
    if (ask.length > 0) {
      const rows = await sql<{ tbl: string; key: string; before: string | null }[]>`
        select q.tbl, q.key, q.before from service.capture_quarantine q
        join unnest(${ask.map(([t]) => t)}::text[], ${ask.map(([, k]) => k)}::text[]) as w(tbl, key)
          on q.tbl = w.tbl and q.key = w.key`
      for (const r of rows) out.set(r.tbl, r.key, r.before === null ? null : (JSON.parse(r.before) as Row))
    }
    return out
  }

  /** Queues a retry of every held record up to entry `upTo` whose table fits. */
  retryAll(upTo: string): void {
    this.retries.push({ kind: "all", upTo, after: "0" })
  }

  /** Queues a retry of the records a table blocked (its re-read is over). */
  retryBlocked(table: string): void {
    this.retries.push({ kind: "blocked", table, after: "0" })
  }

  /**
   * The next retries to shape, at most `max`: the records named, then queued ones, read from the
   * table as committed. Those whose source row lacks a value are not shaped from the mirror: that
   * row is re-read from the app (rereads), and they shape when it arrives.
   */
  async takeRetries(sql: Db, named: ReadonlyArray<readonly [string, string]>, max = RETRY_CHUNK): Promise<RecordRef[]> {
    type R = { id: string; tbl: string; key: string; source_tbl: string | null; source_key: string | null }
    const rows: R[] = []
    if (named.length > 0) {
      rows.push(
        ...(await sql<R[]>`
          select q.id::text, q.tbl, q.key, q.source_tbl, q.source_key from service.capture_quarantine q
          join unnest(${named.map(([t]) => t)}::text[], ${named.map(([, k]) => k)}::text[]) as w(tbl, key)
            on q.tbl = w.tbl and q.key = w.key`)
      )
    }
    const blocking = [...this.broken.keys(), ...this.resyncing]
    while (this.retries.length > 0 && rows.length < max) {
      const w = this.retries[0]!
      const limit = max - rows.length
      const part =
        w.kind === "all"
          ? await sql<R[]>`
            select id::text, tbl, key, source_tbl, source_key from service.capture_quarantine
            where id > ${w.after}::bigint and id <= ${w.upTo}::bigint
              and (blocked_by is null or blocked_by <> all(${blocking}::text[]))
            order by id limit ${limit}`
          : await sql<R[]>`
            select id::text, tbl, key, source_tbl, source_key from service.capture_quarantine
            where id > ${w.after}::bigint and blocked_by = ${w.table} order by id limit ${limit}`
      rows.push(...part)
      if (part.length < limit) this.retries.shift()
      else w.after = part[part.length - 1]!.id
    }
    const out: RecordRef[] = []
    for (const r of rows) {
      if (r.source_tbl !== null && r.source_key !== null) this.rereads.push([r.source_tbl, r.source_key])
      else {
        const resource = resourceOfTable(r.tbl)
        if (resource !== undefined) out.push({ resource, id: r.key })
      }
    }
    return out
  }
}

const infoOf = (r: { blocked_by: string | null; source_tbl: string | null; source_key: string | null }): HeldInfo => ({
  blockedBy: r.blocked_by,
  source: r.source_tbl !== null && r.source_key !== null ? [r.source_tbl, r.source_key] : null
})

// ---- a batch's statements --------------------------------------------------------------------

/** The quarantine's statements for a batch, in its transaction (after the checkpoint's). */
export const quarantineWrites = (delta: QuarantineDelta) => {
  if (deltaIsEmpty(delta)) return null
  const released =
    delta.released.length > 0
      ? {
          tbl: delta.released.map((r) => RESOURCE_INFO[r.resource].table),
          key: delta.released.map((r) => r.id)
        }
      : null
  const held =
    delta.held.length > 0
      ? JSON.stringify(
          delta.held.map((h) => ({
            lsn: formatLsn(h.lsn),
            tbl: h.table,
            key: h.ref.id,
            company_id: h.companyId,
            // '' for "keeps its error" (a record held again): the inserted row's value must not be null.
            error: h.error ?? "",
            before: h.before === null || h.before === undefined ? null : JSON.stringify(h.before),
            blocked_by: h.info.blockedBy,
            source_tbl: h.info.source?.[0] ?? null,
            source_key: h.info.source?.[1] ?? null
          }))
        )
      : null
  const { contract, resync } = delta
  return async (tx: TransactionSql<Record<string, unknown>>) => {
    // Released first: a record discarded and held again in one batch starts a new entry.
    if (released !== null) {
      await tx`
        delete from service.capture_quarantine q
        using unnest(${released.tbl}::text[], ${released.key}::text[]) as r(tbl, key)
        where q.tbl = r.tbl and q.key = r.key`
    }
    // Held again: the entry keeps what it owes (its row when it was first held) and its first LSN.
    if (held !== null) {
      await tx`
        insert into service.capture_quarantine (lsn, tbl, key, company_id, error, before, blocked_by, source_tbl, source_key)
        select lsn, tbl, key, company_id, error, before, blocked_by, source_tbl, source_key
        from json_to_recordset(${held}::text::json)
          as x(lsn pg_lsn, tbl text, key text, company_id uuid, error text, before text, blocked_by text,
               source_tbl text, source_key text)
        on conflict (tbl, key) do update set error = coalesce(nullif(excluded.error, ''), service.capture_quarantine.error), last_seen = now(),
          attempts = service.capture_quarantine.attempts + 1, blocked_by = excluded.blocked_by,
          source_tbl = excluded.source_tbl, source_key = excluded.source_key,
          company_id = coalesce(excluded.company_id, service.capture_quarantine.company_id)`
    }
    for (const c of contract) {
      if (c.problems === null) await tx`delete from service.capture_contract where tbl = ${c.table}`
      else
        await tx`
          insert into service.capture_contract (tbl, problems, lsn) values (${c.table}, ${c.problems as string[]}, ${formatLsn(c.lsn)}::pg_lsn)
          on conflict (tbl) do update set problems = excluded.problems`
    }
    for (const r of resync) {
      if (r.after === null) await tx`delete from service.capture_resync where tbl = ${r.table}`
      else if (r.after === "")
        await tx`
          insert into service.capture_resync (tbl) values (${r.table})
          on conflict (tbl) do update set after_key = '', rows = 0, started_at = now()`
      else
        await tx`update service.capture_resync set after_key = ${r.after}, rows = rows + ${r.rows} where tbl = ${r.table}`
    }
  }
}

// ---- operators: status, metrics, the CLI ---------------------------------------------------------

export interface QuarantineEntry {
  readonly id: string
  readonly lsn: string
  readonly table: string
  readonly key: string
  readonly resource: Resource | null
  readonly companyId: string | null
  readonly error: string
  readonly firstSeen: string
  readonly lastSeen: string
  readonly attempts: number
  /** The app table whose contract break holds it, or null. */
  readonly blockedBy: string | null
}

type EntryRow = {
  id: string
  lsn: string
  tbl: string
  key: string
  company_id: string | null
  error: string
  first_seen: Date
  last_seen: Date
  attempts: number
  blocked_by: string | null
}

const toEntry = (r: EntryRow): QuarantineEntry => ({
  id: r.id,
  lsn: r.lsn,
  table: r.tbl,
  key: r.key,
  resource: resourceOfTable(r.tbl) ?? null,
  companyId: r.company_id,
  error: r.error,
  firstSeen: r.first_seen.toISOString(),
  lastSeen: r.last_seen.toISOString(),
  attempts: r.attempts,
  blockedBy: r.blocked_by
})

/** Held records, oldest first (at most `limit`). */
export const listQuarantine = Effect.fn("listQuarantine")(function* (limit = 1000) {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine order by id limit ${limit}`
  )
  return rows.map(toEntry)
})

/** The entry with this id; null for none, or for text that is not an id. */
export const quarantineEntry = Effect.fn("quarantineEntry")(function* (id: string) {
  if (!/^\d{1,18}$/.test(id)) return null
  const [row] = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine where id = ${id}::bigint`
  )
  return row ? toEntry(row) : null
})

/** The entries with these ids still held (the others were released). */
export const quarantineEntries = Effect.fn("quarantineEntries")(function* (ids: ReadonlyArray<string>) {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine where id = any(${ids as string[]}::bigint[]) order by id`
  )
  return rows.map(toEntry)
})

export interface QuarantineSummary {
  /** Records held. */
  readonly count: number
  /** The oldest one's error, with its table and key. */
  readonly first: { readonly id: string; readonly table: string; readonly key: string; readonly error: string } | null
  /** App tables whose contract is broken, each with what does not fit. */
  readonly broken: ReadonlyArray<{
    readonly table: string
    readonly problems: ReadonlyArray<string>
    readonly since: string
  }>
  /** App tables being re-read from the app after their contract held again. */
  readonly resyncing: ReadonlyArray<{ readonly table: string; readonly rows: number; readonly since: string }>
}

export const quarantineSummary = Effect.fn("quarantineSummary")(function* () {
  const [row] = yield* query(
    (sql) => sql<
      {
        count: number
        first: { id: string; tbl: string; key: string; error: string } | null
        broken: Array<{ tbl: string; problems: string[]; since: string }> | null
        resync: Array<{ tbl: string; rows: number; since: string }> | null
      }[]
    >`
      select (select count(*)::int from service.capture_quarantine) as count,
        (select json_build_object('id', id::text, 'tbl', tbl, 'key', key, 'error', error)
           from service.capture_quarantine order by id limit 1) as first,
        (select json_agg(json_build_object('tbl', tbl, 'problems', problems, 'since', since) order by tbl)
           from service.capture_contract) as broken,
        (select json_agg(json_build_object('tbl', tbl, 'rows', rows, 'since', started_at) order by tbl)
           from service.capture_resync) as resync`
  )
  const summary: QuarantineSummary = {
    count: row!.count,
    first: row!.first
      ? { id: row!.first.id, table: row!.first.tbl, key: row!.first.key, error: row!.first.error }
      : null,
    broken: (row!.broken ?? []).map((b) => ({
      table: b.tbl,
      problems: b.problems,
      since: new Date(b.since).toISOString()
    })),
    resyncing: (row!.resync ?? []).map((r) => ({
      table: r.tbl,
      rows: Number(r.rows),
      since: new Date(r.since).toISOString()
    }))
  }
  return summary
})

/**
 * Sends a request to capture through the app's WAL (a transactional logical message), in the
 * caller's transaction (with its activity entries) when both are one database; with the
 * service's own database it commits on the app's at once, before the caller's entries commit.
 * Returns the message's LSN: capture has applied it once its checkpoint is past it.
 */
export const sendRequest = (request: QuarantineRequest) =>
  appQuery(
    (sql) => sql<{ lsn: string; at: Date }[]>`
      select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify(request)})::text as lsn, now() as at`
  ).pipe(Effect.map(([r]) => ({ lsn: r!.lsn, at: r!.at })))

/** Whether capture's checkpoint is at or past `lsn` (the request was applied). */
export const appliedPast = (lsn: string) =>
  query(
    (sql) => sql<{ ok: boolean }[]>`
      select coalesce(bool_or(checkpoint_lsn >= ${lsn}::pg_lsn), false) as ok from service.capture_state`
  ).pipe(Effect.map(([r]) => r?.ok ?? false))

/** The entries of the held records whose table fits, or none blocks (what `retry --all` asks). */
export const retryableEntries = Effect.fn("retryableEntries")(function* () {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine q
      where q.blocked_by is null or not exists (
        select 1 from service.capture_contract c where c.tbl = q.blocked_by
        union all select 1 from service.capture_resync r where r.tbl = q.blocked_by)
      order by id`
  )
  return rows.map(toEntry)
})
