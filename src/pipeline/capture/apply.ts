// Prepares a batch of decoded transactions for one database transaction: the mirror, the
// views, the outbox and the checkpoint move together, so a crash replays the whole batch
// or none of it. Transactions are simulated in commit order over an in-memory Store so
// each event carries its record as it stood at its own commit.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import type { PendingQuery, Row as SqlRow, Sql } from "postgres"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable, type Resource } from "../../domain/resources.ts"
import { eventWrites, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { dependentsOf, type RecordRef } from "../projection/dependencies.ts"
import { prepare, Projections, type ProjectedView } from "../projection/project.ts"
import { Store, TableMap } from "../projection/store.ts"
import { rowCompany } from "../projection/tables.ts"
import {
  type ChangeTime,
  companyRows,
  mirrorWrites,
  type MirrorChanges,
  userRows,
  viewWrites,
  writeCompanyRows,
  writeUserRows,
  writeViews
} from "../projection/write.ts"
import {
  type CaptureQuarantine,
  EMPTY_DELTA,
  errorText,
  type Held,
  isPoison,
  type QuarantineDelta,
  quarantineWrites
} from "./quarantine.ts"
import type { Txn } from "./txn.ts"
import type { Lsn } from "../../platform/db/lsn.ts"

type Db = Sql<Record<string, unknown>> | Tx

/** Records, each once, in the order first met; looked up by resource, then id (no "resource|id" string per change). */
class RefList {
  readonly list: RecordRef[] = []
  private readonly seen = new Map<string, Set<string>>()
  add(r: RecordRef): void {
    let ids = this.seen.get(r.resource)
    if (ids === undefined) this.seen.set(r.resource, (ids = new Set()))
    if (ids.has(r.id)) return
    ids.add(r.id)
    this.list.push(r)
  }
}

export const moduleOn = (store: Store, companyId: string, resource: Resource): boolean =>
  store.someChild("company_modules", companyId, (m) => m.data.module === resource && m.data.enabled === true)

/** Everything a set of row changes makes the views depend on, loaded into the store. */
export const loadFor = async (
  store: Store,
  changes: ReadonlyArray<{ table: string; key: string; data: Row | null; inserted?: true }>
) => {
  // A key whose first change here is an INSERT was not in the app table, so it is not in the
  // mirror either (the mirror is the app table as of the batch's start): nothing to read.
  // A key the store holds already was remembered so (or loaded before).
  const wanted = new Map<string, Set<string>>()
  const load: Array<readonly [string, string]> = []
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!
    if (store.has(c.table, c.key)) continue
    let keys = wanted.get(c.table)
    if (keys === undefined) wanted.set(c.table, (keys = new Set()))
    if (keys.has(c.key)) continue
    keys.add(c.key)
    if (c.inserted) store.absentKey(c.table, c.key)
    else load.push([c.table, c.key])
  }
  await store.loadKeys(load)
  const refs = new RefList()
  const equipment = new Set<string>()
  const sites = new Set<string>()
  const companies = new Set<string>()
  const tenancy = new Set<string>()
  const users = new Set<string>()
  const seen: Array<{ tbl: string; data: Row }> = []
  // Indexed loops: this runs once per change, and iterators would be made per change.
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i]!
    const before = store.getBase(c.table, c.key)?.data ?? null
    const deps = dependentsOf(c.table, c.key, before, c.data)
    for (let j = 0; j < deps.records.length; j++) refs.add(deps.records[j]!)
    for (let j = 0; j < deps.inspectionsOfEquipment.length; j++) equipment.add(deps.inspectionsOfEquipment[j]!)
    for (let j = 0; j < deps.inspectionsAtSite.length; j++) sites.add(deps.inspectionsAtSite[j]!)
    const was = before ? rowCompany(c.table, before) : null
    if (was) companies.add(was)
    const now = c.data ? rowCompany(c.table, c.data) : null
    if (now) companies.add(now)
    if (c.data) seen.push({ tbl: c.table, data: c.data })
    if (c.table === "companies") tenancy.add(c.key)
    if (c.table === "company_modules") tenancy.add(c.key.slice(0, c.key.indexOf(":")))
    if (c.table === "users") users.add(c.key)
  }
  await prepare(store, refs.list, seen)
  for (const r of refs.list) {
    const id = store.getBase(tableOf(r), r.id)?.companyId
    if (id) companies.add(id)
  }
  for (const c of tenancy) companies.add(c)
  await store.loadKeys([...tenancy].map((id) => ["companies", id] as const))
  await store.loadChildren("company_modules", companies)
  return { refs: refs.list, tenancy, users, wide: { equipment: [...equipment], sites: [...sites] } satisfies Wide }
}

/**
 * Equipment and job sites whose change shows in the views of all their inspections (a site's
 * rename, equipment moved). Those inspections are not loaded with the batch: a site holds
 * more of them the longer the app runs, and a batch that held them all would need memory in
 * proportion. They are re-shaped after the batch's writes, in its transaction, a chunk at a time.
 */
export interface Wide {
  readonly equipment: ReadonlyArray<string>
  readonly sites: ReadonlyArray<string>
}

/** Inspections re-shaped at a time: what one chunk holds (rows, items, views) stays small (bench:soak
 * held RSS flatter at 100 than at 500; a 20,000-inspection rename takes about as long). */
const WIDE_CHUNK = 100

type Fragment = PendingQuery<SqlRow[]>

/**
 * The keys (`key`) of the inspections a wide set reaches, as the mirror has them: those of
 * the equipment and of every piece of equipment at the sites, each given as a uuid[]
 * expression (a batch's arrays; a large transaction's txn_wide table).
 */
export const wideInspectionKeys = (tx: Tx, equipment: Fragment, sites: Fragment) => tx<{ key: string }[]>`
  select key from service.rows
  where tbl = 'inspections' and parent_id = any(
    array(select key::uuid from service.rows where tbl = 'equipment' and parent_id = any(${sites})) || ${equipment})`

/**
 * Rewrites the views of the wide set's inspections from the mirror as `tx` sees it (the batch's
 * mirror writes done), but those among `written` (the batch's own records, written with it).
 * Only their keys are held in full; rows, items and views a chunk at a time.
 */
export const reshapeWide = async (
  tx: Tx,
  wide: Wide,
  written: ReadonlyArray<RecordRef>,
  time: ChangeTime
): Promise<number> => {
  if (wide.equipment.length === 0 && wide.sites.length === 0) return 0
  const skip = new Set(written.filter((r) => r.resource === "inspections").map((r) => r.id))
  const rows = await wideInspectionKeys(
    tx,
    tx`${wide.equipment as string[]}::uuid[]`,
    tx`${wide.sites as string[]}::uuid[]`
  )
  const keys = rows.map((r) => r.key).filter((k) => !skip.has(k))
  for (let i = 0; i < keys.length; i += WIDE_CHUNK) {
    await reprojectViews(
      tx,
      keys.slice(i, i + WIDE_CHUNK).map((id) => ({ resource: "inspections", id })),
      time
    )
  }
  return keys.length
}

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** A record's view could not be shaped: why. */
interface Poisoned {
  readonly poison: string
}

const tableOf2 = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/**
 * One batch's dealings with the quarantine (quarantine.ts): which records it holds and why,
 * what each owes (its row at its last event), and which held records it shapes again. Made
 * only when a batch meets the quarantine: a batch that does not pays nothing for it.
 */
export class BatchHolds {
  readonly q: CaptureQuarantine
  /** Records held in this batch, by table and key. */
  readonly held = new TableMap<Held>()
  /** Records this batch holds whatever they shape to (a value not decoded, a broken table), and why. */
  private readonly forced = new TableMap<{ readonly error: string; readonly blockedBy: string | null }>()
  /** A record's row when its last event in this batch fired. */
  private readonly fired = new TableMap<Row | null>()
  /** Held records to shape again (retry, or their table fits again). */
  readonly retried: RecordRef[] = []
  readonly released: RecordRef[] = []
  readonly contract: Array<{ table: string; problems: ReadonlyArray<string> | null; lsn: Lsn }> = []

  constructor(q: CaptureQuarantine) {
    this.q = q
  }

  /** Before loading: the held records the batch's retries and contract repairs shape again. */
  scan(txns: ReadonlyArray<Txn>): void {
    for (const t of txns) {
      for (const m of t.markers ?? []) {
        if (m.kind === "retry") this.retried.push(...this.q.retryable(m.records))
        else if (m.kind === "contract" && m.problems === null && this.q.broken.has(m.table))
          this.retried.push(...this.q.retryable([], m.table))
      }
    }
  }

  /** A transaction's markers, at its start. */
  begin(txn: Txn): void {
    for (const m of txn.markers ?? []) {
      if (m.kind === "contract") {
        const was = this.q.broken.get(m.table)
        if (m.problems === null) {
          if (was === undefined) continue
          this.q.broken.delete(m.table)
        } else {
          if (was !== undefined && was.join("\n") === m.problems.join("\n")) continue
          this.q.broken.set(m.table, m.problems)
        }
        this.contract.push({ table: m.table, problems: m.problems, lsn: txn.endLsn })
      } else if (m.kind === "discard") {
        for (const [table, key] of m.records) {
          const resource = resourceOfTable(table)
          if (resource !== undefined && this.q.release(table, key)) this.released.push({ resource, id: key })
        }
      }
    }
  }

  /** A change the batch cannot take as it is (a value not decoded, its table broken): the records it feeds are held. */
  force(change: { table: string; key: string; poison?: string }, before: Row | null, after: Row | null): void {
    const problems = this.q.broken.get(change.table)
    const error =
      change.poison ??
      (problems ? `app.${change.table} no longer fits what the service reads: ${problems.join("; ")}` : null)
    if (error === null) return
    const blockedBy = change.poison === undefined ? change.table : null
    const deps = dependentsOf(change.table, change.key, before, after)
    for (const r of deps.records) this.forced.set(tableOf2(r), r.id, { error, blockedBy })
    const own = resourceOfTable(change.table)
    if (own !== undefined) this.forced.set(change.table, change.key, { error, blockedBy })
  }

  isHeld(table: string, id: string): boolean {
    return this.q.isHeld(table, id) || this.held.has(table, id)
  }

  /** The record's view, null when its row is gone, or why it cannot be shaped. */
  shape(projections: Projections, ref: RecordRef): ProjectedView | null | Poisoned {
    const forced = this.forced.get(tableOf2(ref), ref.id)
    if (forced !== undefined) return { poison: forced.error }
    try {
      return projections.get(ref)
    } catch (e) {
      if (!isPoison(e)) throw e
      return { poison: `${ref.resource} ${ref.id}: ${errorText(e)}` }
    }
  }

  /** Holds a record in this batch; `before`: its row as of its last good view. */
  hold(store: Store, ref: RecordRef, error: string, lsn: Lsn): void {
    const table = tableOf2(ref)
    if (this.held.has(table, ref.id)) return
    const before = this.fired.has(table, ref.id)
      ? (this.fired.get(table, ref.id) ?? null)
      : (store.getBase(table, ref.id)?.data ?? null)
    const row = store.has(table, ref.id) ? store.get(table, ref.id) : null
    this.held.set(table, ref.id, {
      ref,
      table,
      error,
      companyId: row?.companyId ?? store.getBase(table, ref.id)?.companyId ?? null,
      before,
      blockedBy: this.forced.get(table, ref.id)?.blockedBy ?? null,
      lsn
    })
  }

  firedAt(store: Store, ref: RecordRef): void {
    const table = tableOf2(ref)
    this.fired.set(table, ref.id, store.get(table, ref.id)?.data ?? null)
  }
}

/** Simulates one transaction over the store; returns its events (seq from 0). */
export const simulate = (
  store: Store,
  txn: Txn,
  projections: Projections = new Projections(store),
  holds: BatchHolds | null = null
): OutboxEvent[] => {
  holds?.begin(txn)
  // Each changed row's state before the transaction, taken at its first change in it (a row
  // not changed since the transaction began).
  const start = store.version
  const before: Array<{ table: string; key: string; data: Row | null }> = []
  for (let i = 0; i < txn.changes.length; i++) {
    const c = txn.changes[i]!
    if (!store.changedSince(c.table, c.key, start))
      before.push({ table: c.table, key: c.key, data: store.get(c.table, c.key)?.data ?? null })
    if (holds !== null) holds.force(c, store.get(c.table, c.key)?.data ?? null, c.data)
    store.apply(c.table, c.key, c.data)
  }
  const events: OutboxEvent[] = []
  for (let i = 0; i < before.length; i++) {
    const b = before[i]!
    const after = store.get(b.table, b.key)?.data ?? null
    const kinds = eventsFor(b.table, b.data, after)
    for (let k = 0; k < kinds.length; k++) {
      const kind = kinds[k]!
      const resource = EVENT_RESOURCE[kind]
      const ref = { resource, id: b.key }
      let view: ProjectedView | null
      if (holds === null) view = projections.get(ref)
      else {
        // A held record's events wait: it owes them until it shapes again.
        if (holds.isHeld(b.table, b.key)) continue
        const v = holds.shape(projections, ref)
        if (v !== null && "poison" in v) {
          holds.hold(store, ref, v.poison, txn.endLsn)
          continue
        }
        view = v
      }
      if (!view || !moduleOn(store, view.companyId, resource)) continue
      events.push({
        companyId: view.companyId,
        event: kind,
        resource,
        recordId: b.key,
        commitLsn: txn.endLsn,
        seq: events.length,
        payload: view.body,
        createdAt: txn.commitTime
      })
    }
    if (holds !== null && kinds.length > 0) {
      const own = resourceOfTable(b.table)
      if (own !== undefined && !holds.isHeld(b.table, b.key)) holds.firedAt(store, { resource: own, id: b.key })
    }
  }
  return events
}

/** Re-projects the given records from the mirror as `tx` sees it and writes their views (or
 *  deletes those whose row is gone): bootstrap, a large transaction's commit, wide re-shaping. */
export const reprojectViews = async (tx: Tx, refs: ReadonlyArray<RecordRef>, time: ChangeTime): Promise<void> => {
  const store = new Store(tx)
  await prepare(store, refs)
  const { views, gone } = finalViews(store, refs)
  await writeViews(tx, views, gone, time)
}

/** Final views of the given records: rewritten, or deleted when their row is gone. */
export const finalViews = (
  store: Store,
  refs: ReadonlyArray<RecordRef>,
  projections: Projections = new Projections(store)
) => {
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  for (const r of refs) {
    const v = projections.get(r)
    if (v) views.push(v)
    else gone.push(r)
  }
  return { views, gone }
}

/** The gone records with the commit time of the last transaction of the batch that changed their row. */
export const deletedAt = (
  txns: ReadonlyArray<Txn>,
  gone: ReadonlyArray<RecordRef>
): ReadonlyArray<RecordRef & { readonly at?: Date }> => {
  if (gone.length === 0) return gone
  const wanted = new Map(gone.map((r) => [`${tableOf(r)}|${r.id}`, r]))
  const at = new Map<RecordRef, Date>()
  for (const t of txns) {
    for (const c of t.changes) {
      const r = wanted.get(`${c.table}|${c.key}`)
      if (r !== undefined) at.set(r, t.commitTime)
    }
  }
  return gone.map((r) => {
    const when = at.get(r)
    return when === undefined ? r : { ...r, at: when }
  })
}

/**
 * Incidents that are privacy cases at the end of the batch and whose stored events may still
 * carry the withheld fields: they were not one before it, or they have events in it.
 */
export const newPrivacyCases = (
  store: Store,
  changes: ReadonlyArray<{ table: string; key: string }>,
  events: ReadonlyArray<OutboxEvent>
): string[] => {
  const ids = new Set<string>()
  const withEvents = new Set(events.filter((e) => e.resource === "incidents").map((e) => e.recordId))
  for (const c of changes) {
    if (c.table !== "incidents" || ids.has(c.key)) continue
    if (store.get("incidents", c.key)?.data.privacy_case !== true) continue
    if (store.getBase("incidents", c.key)?.data.privacy_case !== true || withEvents.has(c.key)) ids.add(c.key)
  }
  return [...ids]
}

/** What a batch changes in the mirror, as statements take it. */
export const mirrorChanges = (store: Store): MirrorChanges => {
  const { inserts, updates, deletes } = store.changes()
  return { inserts, upserts: updates, deletes }
}

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
  /** What it changes in the quarantine (written by `reshape`, last). */
  readonly quarantine: QuarantineDelta
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
 * Loads what a batch depends on, simulates its transactions in commit order and builds its
 * statements. Reads go through `sql` (the pool: a transaction is not needed, only capture
 * writes the mirror), with `prior`, the batch before that may still be being written,
 * laid over them (src/pipeline/projection/store.ts).
 *
 * With `q` (capture's quarantine), a record that cannot be shaped is held instead of failing
 * the batch: the batch is first shaped as always, and only when that throws on a record, or
 * when the batch meets the quarantine at all, is it shaped again record by record (BatchHolds).
 */
export const prepareBatch = async (
  sql: Db,
  txns: ReadonlyArray<Txn>,
  prior: Store | null = null,
  q: CaptureQuarantine | null = null
): Promise<PreparedBatch> => {
  if (!meetsQuarantine(q, txns)) {
    try {
      return await prepareWith(sql, txns, prior, null)
    } catch (e) {
      if (q === null || !isPoison(e)) throw e
    }
  }
  return prepareWith(sql, txns, prior, new BatchHolds(q!))
}

const prepareWith = async (
  sql: Db,
  txns: ReadonlyArray<Txn>,
  prior: Store | null,
  holds: BatchHolds | null
): Promise<PreparedBatch> => {
  const store = new Store(sql, prior)
  const changes = txns.flatMap((t) => t.changes)
  holds?.scan(txns)
  const { refs: changed, tenancy, users, wide } = await loadFor(store, changes)
  let refs = changed
  if (holds !== null && holds.retried.length > 0) {
    await prepare(store, holds.retried)
    const more = new RefList()
    for (const r of changed) more.add(r)
    for (const r of holds.retried) more.add(r)
    refs = more.list
    for (const r of holds.retried) {
      const id = store.getBase(tableOf(r), r.id)?.companyId
      if (id) await store.loadChildren("company_modules", [id])
    }
  }
  store.seal()
  const projections = new Projections(store)
  // Simulated in slices that let the event loop turn between them: meanwhile the batch before
  // is being written, and its statements' answers and its commit wait on this thread.
  const events: OutboxEvent[] = []
  let slice = 0
  for (const t of txns) {
    for (const e of simulate(store, t, projections, holds)) events.push(e)
    slice += t.changes.length
    if (slice >= SLICE_CHANGES) {
      slice = 0
      await turn()
    }
  }
  const { views, gone, delta } =
    holds === null
      ? { ...finalViews(store, refs, projections), delta: EMPTY_DELTA }
      : await settleHolds(sql, store, refs, projections, holds, txns, events)
  await turn()
  // No view of the batch changed after its last commit; a deleted record was deleted when the
  // last transaction that changed its row committed. A record whose row the mirror did not
  // have has no view yet.
  const fresh = views.filter((v) => store.getBase(RESOURCE_INFO[v.resource].table, v.id) === null)
  const known =
    fresh.length === 0 ? views : views.filter((v) => store.getBase(RESOURCE_INFO[v.resource].table, v.id) !== null)
  const time: ChangeTime = txns.length > 0 ? { commit: txns[txns.length - 1]!.commitTime } : { mirror: null }
  const finalBody = new TableMap<string>()
  for (const v of views) finalBody.set(v.resource, v.id, v.body)
  const writes = [
    mirrorWrites(mirrorChanges(store)),
    viewWrites(known, deletedAt(txns, gone), time, fresh),
    // An event that carries its record's final view (the most common case: nothing changed it
    // after) takes the body from the view written just before it, rather than shipping it twice.
    eventWrites(events, (e) => finalBody.get(e.resource, e.recordId) === e.payload)
  ]
  const companies = tenancy.size > 0 ? companyRows(store, tenancy) : null
  const people = users.size > 0 ? userRows(store, users) : null
  const privacy = newPrivacyCases(store, changes, events)
  const quarantined = quarantineWrites(delta)
  // Held records are not re-shaped with the wide set either: they keep their last good view.
  const written = holds === null ? refs : [...refs, ...delta.held.map((h) => h.ref)]
  return {
    changes: changes.length,
    events,
    store,
    write: (tx) => {
      const out = writes.flatMap((w) => w(tx))
      if (companies) out.push(writeCompanyRows(tx, companies))
      if (people) out.push(writeUserRows(tx, people))
      if (privacy.length > 0) out.push(scrubPrivacyCases(tx, privacy)) // after the events above
      return out
    },
    reshape: async (tx) => {
      const n = await reshapeWide(tx, wide, written, time)
      if (quarantined !== null) await quarantined(tx)
      return n
    },
    quarantine: delta
  }
}

/**
 * The final views of a batch that meets the quarantine: a record that cannot be shaped is held
 * (its view is not written); a held record that shapes again is released, its view written
 * and the events it owes appended to the batch's last transaction.
 */
const settleHolds = async (
  sql: Db,
  store: Store,
  refs: ReadonlyArray<RecordRef>,
  projections: Projections,
  holds: BatchHolds,
  txns: ReadonlyArray<Txn>,
  events: OutboxEvent[]
) => {
  const last = txns[txns.length - 1]
  const lsn = last?.endLsn ?? 0n
  const q = holds.q
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  const healed: Array<{ ref: RecordRef; view: ProjectedView }> = []
  const released: RecordRef[] = [...holds.released]
  const seen = new TableMap<true>()
  const take = (r: RecordRef) => {
    const table = tableOf(r)
    if (seen.has(table, r.id)) return
    seen.set(table, r.id, true)
    const v = holds.shape(projections, r)
    if (v !== null && "poison" in v) return holds.hold(store, r, v.poison, lsn)
    if (v === null) gone.push(r)
    else views.push(v)
    // Held before (or earlier in this batch) and shaped now: released, owing its events.
    const inBatch = holds.held.get(table, r.id)
    if (inBatch !== undefined) {
      holds.held.delete(table, r.id)
      owed.set(table, r.id, inBatch.before)
    } else if (!q.isHeld(table, r.id)) return
    else ask.push(r)
    released.push(r)
    if (v !== null) healed.push({ ref: r, view: v })
  }
  // What the healed records owe: those held in this batch know it, the others ask.
  const owed = new TableMap<Row | null>()
  const ask: RecordRef[] = []
  for (const r of refs) take(r)
  for (const r of holds.retried) take(r)
  if (ask.length > 0) {
    const more = await q.owedBy(sql as Sql, ask)
    for (const r of ask) owed.set(tableOf(r), r.id, more.get(tableOf(r), r.id) ?? null)
  }
  if (last !== undefined) {
    let seq = 0
    for (const e of events) if (e.commitLsn === last.endLsn) seq++
    for (const { ref, view } of healed) {
      const table = tableOf(ref)
      const kinds = eventsFor(table, owed.get(table, ref.id) ?? null, store.get(table, ref.id)?.data ?? null)
      for (const kind of kinds) {
        const resource = EVENT_RESOURCE[kind]
        if (resource !== ref.resource || !moduleOn(store, view.companyId, resource)) continue
        events.push({
          companyId: view.companyId,
          event: kind,
          resource,
          recordId: ref.id,
          commitLsn: last.endLsn,
          seq: seq++,
          payload: view.body,
          createdAt: last.commitTime
        })
      }
    }
  }
  // The quarantine as the batch leaves it.
  const heldList: Held[] = []
  holds.held.forEachKey((table, key) => heldList.push(holds.held.get(table, key)!))
  for (const r of released) q.release(tableOf(r), r.id)
  for (const h of heldList) q.hold(h.table, h.ref.id, h.blockedBy)
  q.owe(heldList)
  const stillHeld = new TableMap<true>()
  for (const h of heldList) stillHeld.set(h.table, h.ref.id, true)
  const delta: QuarantineDelta = {
    held: heldList,
    released: released.filter((r) => !stillHeld.has(tableOf(r), r.id)),
    contract: holds.contract
  }
  return { views, gone, delta }
}
