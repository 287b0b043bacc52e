// One commit point's (a batch's, a large transaction's) dealings with the quarantine: which of
// its records were held before it and what each owes, what holds a record whatever its data
// (a table that does not fit, a value the decoder rejected), the operators' requests met in its
// transactions, and what it holds and releases. Made only when a batch meets the quarantine: a
// batch that does not pays nothing for it. The decisions themselves are the one rule's
// (step/rules.ts); this keeps their state.
import { leavesOutDetails } from "../../../domain/records/incidents.ts"
import type { Row } from "../../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable } from "../../../domain/resources.ts"
import type { Lsn } from "../../../platform/db/lsn.ts"
import { dependentsOf, type RecordRef } from "../../projection/dependencies.ts"
import { TableMap } from "../../projection/store.ts"
import { hasEveryColumn } from "../../projection/tables.ts"
import type { RowChange, Txn } from "../txn.ts"
import type { QuarantineMarker } from "./markers.ts"
import type { CaptureQuarantine, Held, HeldInfo, QuarantineDelta } from "./state.ts"
import type { Sql as PgSql, TransactionSql } from "postgres"

type Db = PgSql<Record<string, unknown>> | TransactionSql<Record<string, unknown>>

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** No value left out (an unchanged TOAST value is undefined): a whole copy of the app row. */
const whole = (data: Row | null): boolean => {
  if (data === null) return true
  for (const c in data) if (data[c] === undefined) return false
  return true
}

/** Why a record is held whatever it shapes to: the entry's error, and what it waits for. */
export interface Blocked {
  /** null: it waits as its entry says (a table, a whole copy of a row); the entry keeps its error. */
  readonly error: string | null
  readonly info: HeldInfo
}

/** Why an incident whose privacy case ended with details left out waits. */
const LEFT_OUT =
  "its privacy case ended while PostgreSQL sent the person's details as unchanged, which the service never kept; the row is read again from the app"

/**
 * Why a change holds its record whatever it shapes to, as its own data (undefined: it does not):
 * a value the decoder rejected, or a privacy case's end whose details came as unchanged (held
 * until the row is read whole, the ask the mirror's Store makes). The batch's fast path and the
 * holds both ask here.
 */
export const poisonOf = (change: RowChange, before: Row | null): string | undefined =>
  change.poison ??
  (change.table === "incidents" && change.data !== null && leavesOutDetails(before, change.data) ? LEFT_OUT : undefined)

/** Held for its own data (a value a shaper cannot read). */
export const OWN: HeldInfo = { blockedBy: null, source: null }

export class BatchHolds {
  readonly q: CaptureQuarantine
  readonly batch: number
  /** Held as of the point being applied: those held before the batch (with what they owe), changed as it goes. */
  private readonly now = new TableMap<{ readonly info: HeldInfo; readonly owed: Row | null }>()
  /** Held before the batch (what the delta compares with). */
  private readonly before = new TableMap<HeldInfo>()
  /** Records held in this batch, by table and key. */
  readonly held = new TableMap<Held>()
  /** Held records released in this batch (shaped again, gone, discarded). */
  private readonly released = new TableMap<RecordRef>()
  /** Records the current transaction's changes hold whatever they shape to, and why. */
  private forced = new TableMap<Blocked>()
  /** App rows whose latest change in the batch left a value out (the decoder rejected it). */
  private readonly partial = new TableMap<boolean>()
  /** Records to shape again at a transaction (retried, or checked by rebuild-views), by its end LSN. */
  private readonly retriedAt = new Map<Lsn, RecordRef[]>()
  readonly contract: Array<{ table: string; problems: ReadonlyArray<string> | null; lsn: Lsn }> = []
  readonly resync: Array<{ table: string; after: string | null; rows: number }> = []
  /** App rows read again (by key) whose changes this batch applies. */
  private readonly met: Array<readonly [string, string]> = []

  constructor(q: CaptureQuarantine) {
    this.q = q
    this.batch = q.nextBatch()
  }

  /**
   * Before loading: the records the batch's retries and checks shape again, each at the
   * transaction whose request asks it. Queued retries ride on a transaction with a retry or a
   * `continue` request, a chunk each, never on whichever transaction a batch happens to start
   * with: a record's place in the stream is its release's transaction (batch.ts, Places), which
   * must not depend on where capture cut its batches.
   */
  async scan(sql: Db, txns: ReadonlyArray<Txn>): Promise<ReadonlyArray<RecordRef>> {
    const all: RecordRef[] = []
    for (const t of txns) {
      const named: Array<readonly [string, string]> = []
      const refs: RecordRef[] = []
      let asks = false
      for (const m of t.markers ?? []) {
        if (m.kind === "retry") {
          named.push(...m.records)
          asks = true
        } else if (m.kind === "retry-all") {
          this.q.retryAll(m.upTo)
          asks = true
        } else if (m.kind === "continue") asks = true
        else if (m.kind === "check") {
          for (const [table, key] of m.records) {
            const resource = resourceOfTable(table)
            if (resource !== undefined) refs.push({ resource, id: key })
          }
        }
      }
      const queued = asks ? await this.q.takeRetries(sql, named) : []
      const at = [...queued, ...refs]
      if (at.length > 0) this.retriedAt.set(t.endLsn, at)
      all.push(...at)
    }
    return all
  }

  /** The records a transaction shapes again because a request named them. */
  retriedIn(txn: Txn): ReadonlyArray<RecordRef> {
    return this.retriedAt.get(txn.endLsn) ?? []
  }

  /** Which of the batch's records were held before it, with what each owes. */
  async lookup(sql: Db, keys: ReadonlyArray<readonly [string, string]>): Promise<void> {
    const was = await this.q.lookup(sql, keys)
    const refs: RecordRef[] = []
    const seen = new TableMap<true>()
    for (const [table, key] of keys) {
      if (seen.has(table, key)) continue
      seen.set(table, key, true)
      const info = was(table, key)
      if (info === undefined) continue
      this.before.set(table, key, info)
      const resource = resourceOfTable(table)
      if (resource !== undefined) refs.push({ resource, id: key })
    }
    if (refs.length === 0) return
    const owed = await this.q.owedBy(sql, refs)
    for (const r of refs) {
      const table = tableOf(r)
      this.now.set(table, r.id, { info: this.before.get(table, r.id)!, owed: owed.get(table, r.id) ?? null })
    }
  }

  /** Whether the record is held at the point being applied, and what it owes (undefined: not held). */
  owed(table: string, id: string): Row | null | undefined {
    return this.now.get(table, id)?.owed
  }

  isHeld(table: string, id: string): boolean {
    return this.now.has(table, id)
  }

  /** A transaction's markers, before its changes are applied (`rowNow`: a record's row then). */
  begin(txn: Txn, rowNow: (table: string, key: string) => Row | null): void {
    this.forced = new TableMap()
    for (const m of txn.markers ?? []) this.mark(m, txn.endLsn, rowNow)
  }

  /**
   * A marker met in the stream. A discarded record owes nothing any more: released, or, while
   * a table that does not fit holds it, held afresh owing nothing from its row now (`rowNow`;
   * without it, as in a large transaction, it is released).
   */
  mark(m: QuarantineMarker, lsn: Lsn, rowNow?: (table: string, key: string) => Row | null): void {
    const q = this.q
    if (m.kind === "contract") {
      const was = q.broken.get(m.table)
      if (m.problems === null) {
        if (was === undefined) return
        q.broken.delete(m.table)
        // Its changes while it was broken were held or never streamed: its rows are re-read
        // from the app (resync.ts); the records it blocks shape again when that is done.
        q.resyncing.add(m.table)
        this.resync.push({ table: m.table, after: "", rows: 0 })
      } else {
        if (was !== undefined && was.join("\n") === m.problems.join("\n")) return
        q.broken.set(m.table, m.problems)
      }
      this.contract.push({ table: m.table, problems: m.problems, lsn })
    } else if (m.kind === "discard") {
      for (const [table, key] of m.records) {
        const resource = resourceOfTable(table)
        const held = this.now.get(table, key)
        if (resource === undefined || held === undefined) continue
        const ref = { resource, id: key }
        this.release(ref)
        if (rowNow !== undefined && this.q.blocks(held.info)) {
          const error = `app.${held.info.blockedBy} no longer fits what the service reads (what it owed was discarded)`
          const row = rowNow(table, key)
          const companyId = typeof row?.company_id === "string" ? row.company_id : null
          this.hold(ref, { error, info: held.info }, row, companyId, lsn)
        }
      }
    } else if (m.kind === "reread") {
      for (const key of m.keys) this.met.push([m.table, key])
    } else if (m.kind === "resynced") {
      this.resync.push({ table: m.table, after: m.after, rows: m.rows })
      if (m.after === null) {
        q.resyncing.delete(m.table)
        q.retryBlocked(m.table)
      }
    }
  }

  /** Each change of a transaction, before it is applied: what a value not decoded or a table that does not fit holds. */
  force(change: RowChange, before: Row | null): void {
    const poison = poisonOf(change, before)
    if (poison === undefined) {
      if (whole(change.data)) this.partial.set(change.table, change.key, false)
    } else this.partial.set(change.table, change.key, true)
    const problems = this.q.broken.get(change.table)
    if (change.data === null || (poison === undefined && problems === undefined)) return
    const blocked: Blocked =
      problems !== undefined
        ? {
            error: `app.${change.table} no longer fits what the service reads: ${problems.join("; ")}`,
            info: { blockedBy: change.table, source: null }
          }
        : { error: poison!, info: { blockedBy: null, source: [change.table, change.key] } }
    const deps = dependentsOf(change.table, change.key, before, change.data)
    for (const r of deps.records) this.forced.set(tableOf(r), r.id, blocked)
    if (resourceOfTable(change.table) !== undefined) this.forced.set(change.table, change.key, blocked)
  }

  /** What holds the record whatever its data (`row`: its row now), or undefined. */
  blocked(table: string, id: string, row: Row | null): Blocked | undefined {
    const forced = this.forced.get(table, id)
    if (forced !== undefined) return forced
    // A row read while its table did not fit lacks what the service could not read: it waits
    // for a whole copy (the table's re-read, or its next change once the table fits).
    if (row !== null && this.q.blocksTable(table) && !hasEveryColumn(table, row))
      return {
        error: `app.${table} ${id} was read while app.${table} did not fit what the service reads; it waits for the table to be read again`,
        info: { blockedBy: table, source: null }
      }
    const held = this.now.get(table, id)
    if (held === undefined) return undefined
    // Held by a table that does not fit yet (or is being re-read), or by a row whose value the
    // decoder rejected and of which no whole copy came since: it keeps its entry's error.
    if (this.q.blocks(held.info)) return { error: null, info: held.info }
    const source = held.info.source
    if (source !== null && this.partial.get(source[0], source[1]) !== false) return { error: null, info: held.info }
    return undefined
  }

  /** Holds a record (or holds it again): `owes` its row before it was held (ignored when it is held already). */
  hold(ref: RecordRef, why: Blocked, owes: Row | null | undefined, companyId: string | null, lsn: Lsn): void {
    const table = tableOf(ref)
    const was = this.now.get(table, ref.id)
    const owed = was !== undefined ? was.owed : (owes ?? null)
    this.now.set(table, ref.id, { info: why.info, owed })
    const prior = this.held.get(table, ref.id)
    this.held.set(table, ref.id, {
      ref,
      table,
      error: why.error,
      companyId,
      // A new entry says what it owes (one released earlier in the batch goes first: writes.ts);
      // an entry held already keeps its own.
      before: was === undefined ? owed : prior?.before,
      info: why.info,
      lsn
    })
  }

  /** Releases a held record (shaped again, gone, or discarded): what it owed is settled. */
  release(ref: RecordRef): void {
    const table = tableOf(ref)
    if (!this.now.has(table, ref.id)) return
    this.now.delete(table, ref.id)
    this.held.delete(table, ref.id)
    // An entry stored before this batch goes; one made in it was never stored.
    if (this.before.has(table, ref.id)) this.released.set(table, ref.id, ref)
  }

  /** The batch's quarantine changes (also applied to capture's state, for the batches after it). */
  finish(lsn: Lsn | null = null): QuarantineDelta {
    const held: Held[] = []
    this.held.forEachKey((table, key) => {
      const h = this.held.get(table, key)!
      held.push(lsn === null ? h : { ...h, lsn })
    })
    const released: RecordRef[] = []
    this.released.forEachKey((table, key) => released.push(this.released.get(table, key)!))
    const delta: QuarantineDelta = {
      batch: this.batch,
      held,
      released,
      contract: lsn === null ? this.contract : this.contract.map((c) => ({ ...c, lsn })),
      resync: this.resync,
      retries: this.q.queueChange(),
      rereadsAsked: this.q.takeAsked(),
      rereadsMet: this.met
    }
    this.q.apply(delta, (t, k) => this.before.get(t, k))
    return delta
  }
}
