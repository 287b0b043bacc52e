// Poison changes are quarantined, not fatal (docs/design.md, "Quarantine"). A record whose view
// capture cannot shape (a value the decoder rejects, a NaN where a number is read, a table
// whose columns no longer fit what the service reads) keeps its last good view and its events
// are held; every other change goes on, in order. The mirror follows the app as before, so
// the records a held row feeds (an audit's items) stay exact.
//
// A held record is shaped again at every later change that touches it, and on `retry`: once it
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
import { APP_COLUMNS, type ColumnType } from "../../domain/records/columns.ts"
import type { Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable, type Resource } from "../../domain/resources.ts"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import { query } from "../../platform/db/Sql.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { TableMap } from "../projection/store.ts"

/** Prefix of the logical messages that carry operators' retry and discard requests. */
export const QUARANTINE_PREFIX = "safety-records-quarantine"

/** What a transaction asks of the quarantine at its start (in stream order). */
export type QuarantineMarker =
  /** A Relation message: the table's columns fit what the service reads (null), or these problems. */
  | { readonly kind: "contract"; readonly table: string; readonly problems: ReadonlyArray<string> | null }
  /** Shape these held records again now (all: every held record whose table's contract holds). */
  | { readonly kind: "retry"; readonly records: ReadonlyArray<readonly [string, string]> | "all" }
  /** Drop these held records: their events are not sent; their view stays as it is. */
  | { readonly kind: "discard"; readonly records: ReadonlyArray<readonly [string, string]> }

/** A request message's content, as the CLI writes it. */
export interface QuarantineRequest {
  readonly op: "retry" | "discard"
  readonly records?: ReadonlyArray<readonly [string, string]>
  readonly all?: boolean
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
    if (r.op === "retry") return { kind: "retry", records: r.all === true ? "all" : records }
    if (r.op === "discard") return { kind: "discard", records }
    return null
  } catch {
    return null
  }
}

// ---- what counts as poison ------------------------------------------------------------------

/**
 * Whether an error thrown while shaping is the data's fault (the record is held) rather than
 * the database's or the connection's (the run ends and is retried, as before). Shapers throw
 * plain errors (TypeError: a value of the wrong type); postgres.js errors carry a code.
 */
export const isPoison = (e: unknown): boolean => {
  if (!(e instanceof Error)) return true
  const code = (e as { code?: unknown }).code
  if (typeof code !== "string") return true
  // SQLSTATE classes 22 (data exception) and 23 (integrity) are the data's; the rest
  // (connection, resources, operator intervention) are not.
  return /^2[23][0-9A-Z]{3}$/.test(code)
}

export const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))

// ---- the contract as the change stream describes it ------------------------------------------

/** Built-in type OIDs and their names (format_type); user types (enums, domains, citext) are checked at start only. */
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

const FITS: Readonly<Record<ColumnType, ReadonlyArray<number>>> = {
  uuid: [2950],
  text: [25, 1043, 1042],
  timestamptz: [1184],
  boolean: [16],
  integer: [20, 21, 23],
  numeric: [1700, 700, 701, 20, 21, 23],
  "text[]": [1009, 1015],
  jsonb: [3802, 114]
}

/**
 * What a Relation message of an app table shows that does not fit what the service reads:
 * a column it reads missing (dropped, renamed, or left out of the publication), or one of a
 * built-in type it cannot read as its kind. One line each, naming app.table.column and what
 * the service expects. Pure.
 */
export const relationProblems = (
  table: string,
  columns: ReadonlyArray<{ readonly name: string; readonly typeOid: number }>
): ReadonlyArray<string> => {
  const want = APP_COLUMNS[table]
  if (want === undefined) return []
  const found = new Map(columns.map((c) => [c.name, c.typeOid]))
  const problems: string[] = []
  for (const [column, type] of Object.entries(want)) {
    const oid = found.get(column)
    if (oid === undefined)
      problems.push(
        `app.${table}.${column} is missing from the change stream (dropped, renamed or no longer published); the service reads it as ${type}`
      )
    else if (oid < FIRST_USER_OID && !FITS[type].includes(oid))
      problems.push(
        `app.${table}.${column} is ${BUILTIN_TYPES.get(oid) ?? `type ${oid}`}; the service reads it as ${type}`
      )
  }
  return problems
}

/** The tables a record's view reads: its own, its children's, an inspection's equipment and site. */
const READS: Partial<Record<Resource, ReadonlyArray<string>>> = {
  audits: ["audits", "audit_items"],
  inspections: ["inspections", "inspection_items", "equipment", "job_sites"],
  policies: ["policies", "policy_acknowledgements"],
  subcontractors: ["subcontractors", "subcontractor_documents"]
}
export const tablesRead = (resource: Resource): ReadonlyArray<string> =>
  READS[resource] ?? [RESOURCE_INFO[resource].table]

// ---- capture's state for one run -----------------------------------------------------------

/** A record held in this batch: why, and what it owes. */
export interface Held {
  readonly ref: RecordRef
  readonly table: string
  readonly error: string
  readonly companyId: string | null
  /** Its row as of its last good view (null: it had none). */
  readonly before: Row | null
  readonly blockedBy: string | null
  readonly lsn: Lsn
}

/** What a batch changes in the quarantine, written in its transaction. */
export interface QuarantineDelta {
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
}

export const EMPTY_DELTA: QuarantineDelta = { held: [], released: [], contract: [] }

/**
 * The held records and broken tables capture knows, for one run: loaded at its start, changed
 * as batches are prepared (in stream order), written with each batch. A run that fails drops
 * it; the next loads what was committed. Only keys are held in memory; what a record owes
 * (its row when it was held) is read when it shapes again.
 */
export class CaptureQuarantine {
  /** table -> key -> the table whose contract break holds it (null: its own change). */
  private readonly held = new TableMap<string | null>()
  private count = 0
  readonly broken = new Map<string, ReadonlyArray<string>>()
  /** What records held by batches not yet committed owe: the database does not have it yet. */
  private readonly owed = new TableMap<Row | null>()

  get size(): number {
    return this.count
  }

  get empty(): boolean {
    return this.count === 0 && this.broken.size === 0
  }

  static async load(sql: PgSql): Promise<CaptureQuarantine> {
    const q = new CaptureQuarantine()
    const held = await sql<{ tbl: string; key: string; blocked_by: string | null }[]>`
      select tbl, key, blocked_by from service.capture_quarantine`
    for (const h of held) q.hold(h.tbl, h.key, h.blocked_by)
    const broken = await sql<{ tbl: string; problems: string[] }[]>`select tbl, problems from service.capture_contract`
    for (const b of broken) q.broken.set(b.tbl, b.problems)
    return q
  }

  isHeld(table: string, key: string): boolean {
    return this.count > 0 && this.held.has(table, key)
  }

  blockedBy(table: string, key: string): string | null | undefined {
    return this.held.get(table, key)
  }

  hold(table: string, key: string, blockedBy: string | null): void {
    if (!this.held.has(table, key)) this.count++
    this.held.set(table, key, blockedBy)
  }

  release(table: string, key: string): boolean {
    if (!this.held.delete(table, key)) return false
    this.count--
    return true
  }

  /** The held records a retry names (all: those whose blocking table fits again, or none blocks). */
  retryable(records: ReadonlyArray<readonly [string, string]> | "all", blockedBy?: string): RecordRef[] {
    const out: RecordRef[] = []
    const add = (table: string, key: string) => {
      const resource = resourceOfTable(table)
      if (resource !== undefined) out.push({ resource, id: key })
    }
    if (records === "all" || blockedBy !== undefined) {
      this.held.forEachKey((table, key) => {
        const by = this.held.get(table, key) ?? null
        if (blockedBy !== undefined ? by === blockedBy : by === null || !this.broken.has(by)) add(table, key)
      })
    } else {
      for (const [table, key] of records) if (this.held.has(table, key)) add(table, key)
    }
    return out
  }

  /** Remembers what records held by a batch being written owe, until it commits. */
  owe(held: ReadonlyArray<Held>): void {
    for (const h of held) if (!this.owed.has(h.table, h.ref.id)) this.owed.set(h.table, h.ref.id, h.before)
  }

  /** The batch that held them committed: the database has what they owe. */
  settled(held: ReadonlyArray<Held>): void {
    for (const h of held) this.owed.delete(h.table, h.ref.id)
  }

  /** What the given held records owe: their row when they were held (null: none). */
  async owedBy(sql: PgSql, refs: ReadonlyArray<RecordRef>): Promise<TableMap<Row | null>> {
    const out = new TableMap<Row | null>()
    const ask: Array<[string, string]> = []
    // Batches in flight first: should one commit meanwhile, the database has it by the read.
    for (const r of refs) {
      const table = RESOURCE_INFO[r.resource].table
      if (this.owed.has(table, r.id)) out.set(table, r.id, this.owed.get(table, r.id) ?? null)
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
}

// ---- a batch's statements --------------------------------------------------------------------

/** The quarantine's statements for a batch, in its transaction (after the checkpoint's). */
export const quarantineWrites = (delta: QuarantineDelta) => {
  if (delta.held.length === 0 && delta.released.length === 0 && delta.contract.length === 0) return null
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
            error: h.error,
            before: h.before === null ? null : JSON.stringify(h.before),
            blocked_by: h.blockedBy
          }))
        )
      : null
  const contract = delta.contract
  return async (tx: TransactionSql<Record<string, unknown>>) => {
    // Released first: a record discarded and held again in one batch starts a new entry.
    if (released !== null) {
      await tx`
        delete from service.capture_quarantine q
        using unnest(${released.tbl}::text[], ${released.key}::text[]) as r(tbl, key)
        where q.tbl = r.tbl and q.key = r.key`
    }
    if (held !== null) {
      await tx`
        insert into service.capture_quarantine (lsn, tbl, key, company_id, error, before, blocked_by)
        select lsn, tbl, key, company_id, error, before, blocked_by
        from json_to_recordset(${held}::text::json)
          as x(lsn pg_lsn, tbl text, key text, company_id uuid, error text, before text, blocked_by text)
        on conflict (tbl, key) do update set error = excluded.error, last_seen = now(),
          attempts = service.capture_quarantine.attempts + 1, blocked_by = excluded.blocked_by,
          company_id = coalesce(excluded.company_id, service.capture_quarantine.company_id)`
    }
    for (const c of contract) {
      if (c.problems === null) await tx`delete from service.capture_contract where tbl = ${c.table}`
      else
        await tx`
          insert into service.capture_contract (tbl, problems, lsn) values (${c.table}, ${c.problems as string[]}, ${formatLsn(c.lsn)}::pg_lsn)
          on conflict (tbl) do update set problems = excluded.problems`
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

export const quarantineEntry = Effect.fn("quarantineEntry")(function* (id: string) {
  if (!/^\d{1,18}$/.test(id)) return null
  const [row] = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine where id = ${id}::bigint`
  )
  return row ? toEntry(row) : null
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
}

export const quarantineSummary = Effect.fn("quarantineSummary")(function* () {
  const [row] = yield* query(
    (sql) => sql<
      {
        count: number
        first: { id: string; tbl: string; key: string; error: string } | null
        broken: Array<{ tbl: string; problems: string[]; since: string }> | null
      }[]
    >`
      select (select count(*)::int from service.capture_quarantine) as count,
        (select json_build_object('id', id::text, 'tbl', tbl, 'key', key, 'error', error)
           from service.capture_quarantine order by id limit 1) as first,
        (select json_agg(json_build_object('tbl', tbl, 'problems', problems, 'since', since) order by tbl)
           from service.capture_contract) as broken`
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
    }))
  }
  return summary
})

/**
 * Sends a retry or discard to capture through the WAL (a transactional logical message), with
 * `also` (the activity entries) in the same transaction. Returns the message's LSN: capture
 * has applied it once its checkpoint is past it.
 */
export const sendRequest = (request: QuarantineRequest) =>
  query(
    (sql) => sql<{ lsn: string }[]>`
      select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify(request)})::text as lsn`
  ).pipe(Effect.map(([r]) => r!.lsn))

/** Whether capture's checkpoint is at or past `lsn` (the request was applied). */
export const appliedPast = (lsn: string) =>
  query(
    (sql) => sql<{ ok: boolean }[]>`
      select coalesce(bool_or(checkpoint_lsn >= ${lsn}::pg_lsn), false) as ok from service.capture_state`
  ).pipe(Effect.map(([r]) => r?.ok ?? false))

/** The entries of the held records whose table fits again, or none blocks (what `retry --all` asks). */
export const retryableEntries = Effect.fn("retryableEntries")(function* () {
  const rows = yield* query(
    (sql) => sql<EntryRow[]>`
      select id::text, lsn::text, tbl, key, company_id::text, error, first_seen, last_seen, attempts, blocked_by
      from service.capture_quarantine q
      where q.blocked_by is null or not exists (select 1 from service.capture_contract c where c.tbl = q.blocked_by)
      order by id`
  )
  return rows.map(toEntry)
})
