// Prepares a batch of decoded transactions for one database transaction: the mirror, the
// views, the outbox and the checkpoint move together, so a crash replays the whole batch
// or none of it. Transactions are simulated in commit order over an in-memory Store so
// each event carries its record as it stood at its own commit.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import type { PendingQuery, Row as SqlRow, Sql } from "postgres"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, type Resource } from "../../domain/resources.ts"
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
import type { Txn } from "./txn.ts"

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

/** Simulates one transaction over the store; returns its events (seq from 0). */
export const simulate = (store: Store, txn: Txn, projections: Projections = new Projections(store)): OutboxEvent[] => {
  // Each changed row's state before the transaction, taken at its first change in it (a row
  // not changed since the transaction began).
  const start = store.version
  const before: Array<{ table: string; key: string; data: Row | null }> = []
  for (let i = 0; i < txn.changes.length; i++) {
    const c = txn.changes[i]!
    if (!store.changedSince(c.table, c.key, start))
      before.push({ table: c.table, key: c.key, data: store.get(c.table, c.key)?.data ?? null })
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
      const view = projections.get({ resource, id: b.key })
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
}

/**
 * Loads what a batch depends on, simulates its transactions in commit order and builds its
 * statements. Reads go through `sql` (the pool: a transaction is not needed, only capture
 * writes the mirror), with `prior`, the batch before that may still be being written,
 * laid over them (src/pipeline/projection/store.ts).
 */
export const prepareBatch = async (
  sql: Db,
  txns: ReadonlyArray<Txn>,
  prior: Store | null = null
): Promise<PreparedBatch> => {
  const store = new Store(sql, prior)
  const changes = txns.flatMap((t) => t.changes)
  const { refs, tenancy, users, wide } = await loadFor(store, changes)
  store.seal()
  const projections = new Projections(store)
  // Simulated in slices that let the event loop turn between them: meanwhile the batch before
  // is being written, and its statements' answers and its commit wait on this thread.
  const events: OutboxEvent[] = []
  let slice = 0
  for (const t of txns) {
    for (const e of simulate(store, t, projections)) events.push(e)
    slice += t.changes.length
    if (slice >= SLICE_CHANGES) {
      slice = 0
      await turn()
    }
  }
  const { views, gone } = finalViews(store, refs, projections)
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
    reshape: (tx) => reshapeWide(tx, wide, refs, time)
  }
}
