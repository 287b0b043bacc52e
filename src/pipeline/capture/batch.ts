// A batch of the stream's transactions, prepared for one database transaction: the mirror,
// the views, the outbox, the quarantine and the checkpoint move together, so a crash replays
// the whole batch or none of it. Transactions are applied in commit order over an in-memory
// Store; at each one, every record it touched goes through the one step (step/step.ts), so
// each event carries its record as it stood at its own commit.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import type { Sql } from "postgres"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { RESOURCE_INFO, resourceOfTable } from "../../domain/resources.ts"
import { eventWrites, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { mayHaveEvents, scrubDeletedRecords } from "../outbox/deleted.ts"
import { dependentsOf, type RecordRef } from "../projection/dependencies.ts"
import { prepare, Projections, type ProjectedView } from "../projection/project.ts"
import { Store, TableMap } from "../projection/store.ts"
import {
  type ChangeTime,
  type RecordPlace,
  companyRows,
  keepsMirror,
  mirrorWrites,
  redactViews,
  userRows,
  viewWrites,
  writeCompanyRows,
  writeUserRows
} from "../projection/write.ts"
import { RECORD_CHANGES_CHANNEL } from "../../platform/db/channels.ts"
import { BatchHolds, poisonOf } from "./quarantine/holds.ts"
import { isPoison } from "./quarantine/poison.ts"
import type { CaptureQuarantine } from "./quarantine/state.ts"
import { askingRereads, emptyDelta, type QuarantineDelta } from "./quarantine/state.ts"
import { quarantineWrites } from "./quarantine/writes.ts"
import { deletedAt, loadFor, moduleOn, reachesNone, RefList, reshapeWide, WIDE_TABLES } from "./step/load.ts"
import { mirrorChanges } from "./step/mirror.ts"
import { Step } from "./step/step.ts"
import type { Txn } from "./txn.ts"

type Db = Sql<Record<string, unknown>> | Tx

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** Tables whose rows fire events: their records go through the step at each transaction, even on the fast path. */
const EVENT_TABLES: ReadonlySet<string> = new Set(Object.values(EVENT_RESOURCE).map((r) => RESOURCE_INFO[r].table))

/** Changes simulated between two turns of the event loop while a batch is prepared. */
const SLICE_CHANGES = 250

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** A batch shaped and its statements' parameters built, ready to write. */
export interface PreparedBatch {
  readonly changes: number
  readonly events: ReadonlyArray<OutboxEvent>
  /** Its final mirror state, which the next batch reads while this one is written. */
  readonly store: Store
  /** Issues the batch's statements in order on the transaction (pipelined, not awaited). */
  readonly write: (tx: Tx) => Array<Promise<unknown>>
  /** Then, on the same transaction: the views of the inspections its equipment and site changes reach (reshapeWide). */
  readonly reshape: (tx: Tx) => Promise<number>
  /**
   * Whether every statement of `write` goes out before it returns and `reshape` has nothing to
   * do: then the batch's COMMIT can go with its statements (pipelinedCommit). Not so when the
   * batch scrubs events (a privacy case, a deleted record), rewrites companies or users, or
   * redacts kept views: those read what is stored before they write.
   */
  readonly oneRound: boolean
  /** What it changes in the quarantine (written by `reshape`, last). */
  readonly quarantine: QuarantineDelta
}

/**
 * A batch that must be cut before it is prepared (cutAfterWide): the transactions before
 * `cutAt` go as a batch of their own, the rest after.
 */
export interface BatchCut {
  readonly cutAt: number
}

const WIDE: ReadonlySet<string> = new Set(WIDE_TABLES)

/**
 * A batch ends with the first transaction that changes equipment or a job site: the batch's
 * end re-shapes the inspections those changes reach (reshapeWide), and the transactions after
 * it go in a batch of their own. Two rules need it.
 * - The stream's places come from the WAL alone (projection/write.ts, CommitTime): a reached
 *   inspection is placed at the batch's last commit, which must be the one that reached it, or
 *   a batch written again in other cuts would place it elsewhere.
 * - A held record keeps the view it showed at the commit before its hold: an inspection held
 *   at a later transaction of the batch would be left out of the re-shaping, and keep the view
 *   from before an equipment or site change an earlier one committed.
 * Decided from the transactions alone, before anything is shaped: shaping a batch changes
 * capture's quarantine as it goes (a table found broken, a record held), so a batch shaped and
 * then cut would leave the part written first judged by what only the later part brought.
 * Null when there is nothing to cut (no such transaction, or it is the last).
 */
export const cutAfterWide = (txns: ReadonlyArray<Txn>): number | null => {
  for (let i = 0; i < txns.length - 1; i++) {
    const changes = txns[i]!.changes
    for (let j = 0; j < changes.length; j++) if (WIDE.has(changes[j]!.table)) return i + 1
  }
  return null
}

/** Whether a batch has to deal with the quarantine: held records or broken tables, a request, a value not decoded. */
const meetsQuarantine = (q: CaptureQuarantine | null, txns: ReadonlyArray<Txn>): boolean => {
  if (q === null) return false
  if (!q.empty) return true
  for (const t of txns) {
    if (t.markers !== undefined && t.markers.length > 0) return true
    for (let i = 0; i < t.changes.length; i++) if (t.changes[i]!.poison !== undefined) return true
  }
  return false
}

/**
 * Loads what a batch depends on, applies its transactions in commit order and builds its
 * statements. Reads go through `sql` (the pool: a transaction is not needed, only capture
 * writes the mirror), with `prior`, the batch before that may still be being written,
 * laid over them (src/pipeline/projection/store.ts).
 *
 * With `q` (capture's quarantine), a record that cannot be shaped is held instead of failing
 * the batch: the batch is first shaped as always, and only when that throws on a record, or
 * when the batch meets the quarantine at all, is it shaped again with holds (BatchHolds).
 */
export const prepareBatch = async (
  sql: Db,
  txns: ReadonlyArray<Txn>,
  prior: Store | null = null,
  q: CaptureQuarantine | null = null
): Promise<PreparedBatch | BatchCut> => {
  const cutAt = cutAfterWide(txns)
  if (cutAt !== null) return { cutAt }
  if (!meetsQuarantine(q, txns)) {
    try {
      return await prepareWith(sql, txns, prior, null)
    } catch (e) {
      if (q === null || !isPoison(e)) throw e
    }
  }
  return prepareWith(sql, txns, prior, new BatchHolds(q!))
}

/**
 * Applies one transaction to the store, then takes every record it touched through the step:
 * those whose own row changed (with their row before it), the parents of child rows it changed,
 * and those a request named. Without holds (the fast path), only records of tables that fire
 * events go through it here; the others' views are taken at the batch's end, where a record
 * that cannot be shaped sends the batch to the holding path.
 */
const simulate = (store: Store, txn: Txn, step: Step, holds: BatchHolds | null, places: Places): void => {
  holds?.begin(txn, (table, key) => (store.has(table, key) ? (store.get(table, key)?.data ?? null) : null))
  // Each changed row's state before the transaction, taken at its first change in it.
  const start = store.version
  const before: Array<{ table: string; key: string; data: ReturnType<Store["get"]> }> = []
  for (let i = 0; i < txn.changes.length; i++) {
    const c = txn.changes[i]!
    const prev = store.get(c.table, c.key)
    if (!store.changedSince(c.table, c.key, start)) before.push({ table: c.table, key: c.key, data: prev })
    if (holds !== null) holds.force(c, prev?.data ?? null)
    else {
      // Without holds, a change that holds its record sends the batch to the path that does.
      const poison = poisonOf(c, prev?.data ?? null)
      if (poison !== undefined) throw new Error(`${c.table} ${c.key}: ${poison}`)
    }
    store.apply(c.table, c.key, c.data)
  }
  const retried = holds?.retriedIn(txn) ?? []
  places.take(store, before, txn, retried)
  if (holds === null) {
    for (let i = 0; i < before.length; i++) {
      const b = before[i]!
      if (!EVENT_TABLES.has(b.table)) continue
      step.at(txn, { resource: resourceOfTable(b.table)!, id: b.key }, b.data?.data ?? null)
    }
    return
  }
  const seen = new TableMap<true>()
  const take = (ref: RecordRef, rowBefore: ReturnType<Store["get"]> | undefined) => {
    if (seen.has(ref.resource, ref.id)) return
    seen.set(ref.resource, ref.id, true)
    step.at(txn, ref, rowBefore === undefined ? undefined : (rowBefore?.data ?? null))
  }
  for (const b of before) {
    const own = resourceOfTable(b.table)
    if (own !== undefined) take({ resource: own, id: b.key }, b.data)
  }
  for (const b of before) {
    if (resourceOfTable(b.table) !== undefined) continue
    const after = store.get(b.table, b.key)?.data ?? null
    for (const r of dependentsOf(b.table, b.key, b.data?.data ?? null, after).records) take(r, undefined)
  }
  for (const r of retried) take(r, undefined)
}

const prepareWith = async (
  sql: Db,
  txns: ReadonlyArray<Txn>,
  prior: Store | null,
  holds: BatchHolds | null
): Promise<PreparedBatch> => {
  const store = new Store(sql, prior)
  const changes = txns.flatMap((t) => t.changes)
  const retried = holds !== null ? await holds.scan(sql, txns) : []
  const { refs: changed, tenancy, users, wide } = await loadFor(store, changes)
  let refs = changed
  if (holds !== null) {
    if (retried.length > 0) {
      await prepare(store, retried)
      const more = new RefList()
      for (const r of changed) more.add(r)
      for (const r of retried) more.add(r)
      refs = more.list
      const companies = new Set<string>()
      for (const r of retried) {
        const id = store.getBase(tableOf(r), r.id)?.companyId
        if (id) companies.add(id)
      }
      await store.loadChildren("company_modules", companies)
    }
    const keys: Array<readonly [string, string]> = changes.map((c) => [c.table, c.key] as const)
    for (const r of refs) keys.push([tableOf(r), r.id])
    const discarded = txns.flatMap((t) => (t.markers ?? []).flatMap((m) => (m.kind === "discard" ? m.records : [])))
    keys.push(...discarded)
    // A discarded record still waiting for its table is held afresh from its row then.
    await store.loadKeys(discarded)
    await holds.lookup(sql, keys)
  }
  store.seal()
  const projections = new Projections(store)
  const step = new Step(
    store,
    (r) => projections.get(r),
    holds,
    (c, r) => moduleOn(store, c, r)
  )
  // Applied in slices that let the event loop turn between them: meanwhile the batch before
  // is being written, and its statements' answers and its commit wait on this thread.
  const places = new Places()
  let slice = 0
  for (const t of txns) {
    simulate(store, t, step, holds, places)
    slice += t.changes.length
    if (slice >= SLICE_CHANGES) {
      slice = 0
      await turn()
    }
  }
  const last = txns[txns.length - 1]
  const { views, gone, kept } = finalViews(store, refs, projections, step, holds, last)
  await turn()
  // No view of the batch changed after its last commit; a deleted record was deleted when the
  // last transaction that changed its row committed. A record whose row the mirror did not
  // have has no view yet.
  const fresh = views.filter((v) => store.getBase(RESOURCE_INFO[v.resource].table, v.id) === null)
  const known =
    fresh.length === 0 ? views : views.filter((v) => store.getBase(RESOURCE_INFO[v.resource].table, v.id) !== null)
  const time: ChangeTime =
    last !== undefined
      ? {
          commit: last.commitTime,
          lsn: last.endLsn,
          place: (resource, id) => places.get(resource, id)
        }
      : { mirror: null }
  const finalBody = new TableMap<string>()
  for (const v of views) finalBody.set(v.resource, v.id, v.body)
  const events = step.scrubbedEvents()
  const goneRefs = step.goneRefs()
  // Rows whose values the mirror lacks are read again from the app: the ask is stored with the batch.
  const delta = askingRereads(holds === null ? emptyDelta(0) : holds.finish(), store.incomplete)
  const writes = [
    (tx: Tx) => [keepsMirror(tx)],
    mirrorWrites(mirrorChanges(store, views)),
    viewWrites(
      known,
      deletedAt(txns, gone, (r) => store.getBase(tableOf(r), r.id) !== null),
      time,
      fresh
    ),
    // A held privacy case keeps its last view, without the person's details.
    (tx: Tx) => (kept.length > 0 ? [redactViews(tx, "incidents", kept, "commit" in time ? time : null)] : []),
    // An event that carries its record's final view (the most common case: nothing changed it
    // after) takes the body from the view written just before it, rather than shipping it twice.
    eventWrites(events, (e) => finalBody.get(e.resource, e.recordId) === e.payload),
    // Followers of the record changes wake at the commit (docs/integrators.md); a batch that
    // touched no view (a company, a user, capture's own messages) wakes nobody.
    (tx: Tx) =>
      views.length + gone.length + kept.length > 0
        ? [tx`select pg_notify(${RECORD_CHANGES_CHANNEL}, '')`.execute()]
        : []
  ]
  const companies = tenancy.size > 0 ? companyRows(store, tenancy) : null
  const people = users.size > 0 ? userRows(store, users) : null
  const privacy = [...step.privacy]
  const quarantined = quarantineWrites(delta)
  // Writes that read what is stored before they write: their later statements wait on an answer.
  const readsFirst: Array<(tx: Tx) => Promise<unknown>> = []
  if (companies) readsFirst.push((tx) => writeCompanyRows(tx, companies))
  if (people) readsFirst.push((tx) => writeUserRows(tx, people))
  if (privacy.length > 0) readsFirst.push((tx) => scrubPrivacyCases(tx, privacy)) // after the events above
  if (mayHaveEvents(goneRefs)) readsFirst.push((tx) => scrubDeletedRecords(tx, goneRefs))
  // The inspections' views wait while a table they read does not fit: read again, it reaches them.
  const wideBlocked = holds !== null && WIDE_TABLES.some((t) => holds.q.blocksTable(t))
  const partialWaits = holds?.q.blocksTable("inspections") ?? false
  // Held records are not re-shaped with the wide set either: they keep their last good view.
  const written = holds === null ? refs : [...refs, ...delta.held.map((h) => h.ref)]
  return {
    changes: changes.length,
    events,
    store,
    write: (tx) => {
      const out = writes.flatMap((w) => w(tx))
      for (const w of readsFirst) out.push(w(tx))
      return out
    },
    reshape: async (tx) => {
      const n = wideBlocked ? 0 : await reshapeWide(tx, wide, written, time, partialWaits)
      if (quarantined !== null) await quarantined(tx)
      return n
    },
    // A held privacy case's kept view is redacted by reading it first too (in `writes`, before the events).
    oneRound:
      (wideBlocked || reachesNone(wide)) && quarantined === null && readsFirst.length === 0 && kept.length === 0,
    quarantine: delta
  }
}

/**
 * Each record's place (the record changes': sql/052): the transaction of its last change in the
 * batch, and the order that transaction touched it in; a child row's change places its parent,
 * and a request that shapes a record again (a retry, rebuild-views' check) places it at the
 * request's transaction, after what that transaction changed. From the WAL alone, so the same
 * however the transactions were cut into batches.
 */
class Places {
  private readonly at = new TableMap<RecordPlace>()
  /** The records `txn` changed (its rows before it, in the order first changed), then those it shapes again. */
  take(
    store: Store,
    changed: ReadonlyArray<{ table: string; key: string; data: ReturnType<Store["get"]> }>,
    txn: Txn,
    retried: ReadonlyArray<RecordRef>
  ) {
    let n = 0
    const place = (resource: string, id: string) =>
      this.at.set(resource, id, { lsn: txn.endLsn, ord: n++, commit: txn.commitTime })
    for (let i = 0; i < changed.length; i++) {
      const c = changed[i]!
      const own = resourceOfTable(c.table)
      if (own !== undefined) {
        place(own, c.key)
        continue
      }
      const after = store.get(c.table, c.key)?.data ?? null
      for (const r of dependentsOf(c.table, c.key, c.data?.data ?? null, after).records) place(r.resource, r.id)
    }
    for (const r of retried) if (this.at.get(r.resource, r.id)?.lsn !== txn.endLsn) place(r.resource, r.id)
  }
  get(resource: string, id: string): RecordPlace | undefined {
    return this.at.get(resource, id)
  }
}

/**
 * The batch's final views: every record it touched, as it stands after its last transaction.
 * A held one keeps its view (`kept`: held privacy cases, whose kept view loses the person's
 * details); one gone loses it; the others are written. With holds, a record that cannot be
 * shaped now (one the transactions did not take through the step) goes through it at the last.
 */
const finalViews = (
  store: Store,
  refs: ReadonlyArray<RecordRef>,
  projections: Projections,
  step: Step,
  holds: BatchHolds | null,
  last: Txn | undefined
) => {
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  const kept: string[] = []
  for (const r of refs) {
    const table = tableOf(r)
    if (holds?.isHeld(table, r.id)) {
      // It keeps its last good view: one an earlier transaction of this batch showed, or the stored one.
      const good = step.shown.get(r.resource, r.id)
      if (good !== undefined) views.push(good)
      if (r.resource === "incidents" && store.get(table, r.id)?.data.privacy_case === true) kept.push(r.id)
      continue
    }
    let v: ProjectedView | null
    if (holds === null || last === undefined) v = projections.get(r)
    else {
      try {
        v = projections.get(r)
      } catch (e) {
        if (!isPoison(e)) throw e
        step.at(last, r, undefined)
        const good = step.shown.get(r.resource, r.id)
        if (good !== undefined) views.push(good)
        if (r.resource === "incidents" && store.get(table, r.id)?.data.privacy_case === true) kept.push(r.id)
        continue
      }
    }
    if (v !== null) views.push(v)
    else gone.push(r)
  }
  return { views, gone, kept }
}
