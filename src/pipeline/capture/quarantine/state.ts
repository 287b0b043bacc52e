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
// The quarantine's files: markers.ts (requests through the WAL), contract.ts (what a table must
// be), poison.ts (what counts as the data's fault), state.ts (this), holds.ts (one batch's
// dealings), writes.ts (a batch's statements), operators.ts (status, /metrics, the CLI).
//
// This file: capture's quarantine for one run, the held records and broken tables it knows.
import type { Sql as PgSql, TransactionSql } from "postgres"
import type { Row } from "../../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable } from "../../../domain/resources.ts"
import type { Lsn } from "../../../platform/db/lsn.ts"
import type { RecordRef } from "../../projection/dependencies.ts"
import { TableMap } from "../../projection/store.ts"

type Db = PgSql<Record<string, unknown>> | TransactionSql<Record<string, unknown>>

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
  /** The retries still queued after the batch, when it changed them (null: unchanged): stored with it. */
  readonly retries?: ReadonlyArray<RetryWork> | null
  /** App rows (table, key) the batch asks to read again (stored until a batch applies them). */
  readonly rereadsAsked?: ReadonlyArray<readonly [string, string]>
  /** App rows read again whose changes the batch applies: their asks are met. */
  readonly rereadsMet?: ReadonlyArray<readonly [string, string]>
}

export const emptyDelta = (batch: number): QuarantineDelta => ({
  batch,
  held: [],
  released: [],
  contract: [],
  resync: []
})

export const deltaIsEmpty = (d: QuarantineDelta) =>
  d.held.length === 0 &&
  d.released.length === 0 &&
  d.contract.length === 0 &&
  d.resync.length === 0 &&
  (d.retries ?? null) === null &&
  (d.rereadsAsked ?? []).length === 0 &&
  (d.rereadsMet ?? []).length === 0

/** The delta, with app rows the batch asks to read again besides those it has (a privacy case ended). */
export const askingRereads = (d: QuarantineDelta, rows: ReadonlyArray<readonly [string, string]>): QuarantineDelta =>
  rows.length === 0 ? d : { ...d, rereadsAsked: [...(d.rereadsAsked ?? []), ...rows] }

/** Whether a record is held before a batch, and why (undefined: not held). */
export type HeldLookup = (table: string, key: string) => HeldInfo | undefined

/** Retries still to shape, taken a chunk per request (`after`: the last entry id taken). */
export type RetryWork =
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
  /** Retries still to shape, as stored (service.capture_retries) at the run's start and then by each batch that changed them. */
  private readonly retries: RetryWork[] = []
  /** The queue as the last batch that changed it left it (JSON), to store only a change. */
  private queued = "[]"
  /**
   * App rows to read again (resync.ts): the source row of a retried record that lacks a value,
   * an incident's row whose details came back as unchanged. Each ask is stored with the batch
   * that makes it (service.capture_rereads) until the batch that applies the row read.
   */
  readonly rereads: Array<readonly [string, string]> = []
  /** Asks made while preparing the batch (takeRetries), not yet in a delta. */
  private asked: Array<readonly [string, string]> = []

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
    // What the last run queued and did not take: it goes on here, from where the last stored batch left it.
    const [queued] = await sql<{ work: string }[]>`select work::text from service.capture_retries`
    if (queued !== undefined) {
      q.retries.push(...(JSON.parse(queued.work) as RetryWork[]))
      q.queued = JSON.stringify(q.retries)
    }
    // Rows asked for and not yet applied (a read in flight when the last run ended, or not begun).
    const rereads = await sql<{ tbl: string; key: string }[]>`select tbl, key from service.capture_rereads`
    for (const r of rereads) q.rereads.push([r.tbl, r.key])
    return q
  }

  /** The asks made since the last call, for the batch's delta. */
  takeAsked(): ReadonlyArray<readonly [string, string]> {
    const out = this.asked
    this.asked = []
    return out
  }

  /** The queue after a batch's requests, if it changed since the last batch that stored it (else null). */
  queueChange(): ReadonlyArray<RetryWork> | null {
    const now = JSON.stringify(this.retries)
    if (now === this.queued) return null
    this.queued = now
    return JSON.parse(now) as RetryWork[]
  }

  nextBatch(): number {
    return ++this.batches
  }

  /** Whether an app table does not fit, or is being read again. */
  blocksTable(table: string): boolean {
    return this.broken.has(table) || this.resyncing.has(table)
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
      } else {
        // Held again: what it owes stays where it is (a batch before this one may not be committed yet).
        const prior = this.overlay.get(h.table, h.ref.id)?.before
        this.overlay.set(h.table, h.ref.id, {
          batch: delta.batch,
          info: h.info,
          ...(prior !== undefined ? { before: prior } : {})
        })
      }
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
    // Ordered by q.id, the number: a bare `id` is the text column selected (10 before 9), and a
    // chunk's `after` would then skip the entries between.
    while (this.retries.length > 0 && rows.length < max) {
      const w = this.retries[0]!
      const limit = max - rows.length
      const part =
        w.kind === "all"
          ? await sql<R[]>`
            select q.id::text, tbl, key, source_tbl, source_key from service.capture_quarantine q
            where q.id > ${w.after}::bigint and q.id <= ${w.upTo}::bigint
              and (blocked_by is null or blocked_by <> all(${blocking}::text[]))
            order by q.id limit ${limit}`
          : await sql<R[]>`
            select q.id::text, tbl, key, source_tbl, source_key from service.capture_quarantine q
            where q.id > ${w.after}::bigint and blocked_by = ${w.table} order by q.id limit ${limit}`
      rows.push(...part)
      if (part.length < limit) this.retries.shift()
      else w.after = part[part.length - 1]!.id
    }
    const out: RecordRef[] = []
    for (const r of rows) {
      if (r.source_tbl !== null && r.source_key !== null) {
        this.rereads.push([r.source_tbl, r.source_key])
        this.asked.push([r.source_tbl, r.source_key])
      } else {
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
