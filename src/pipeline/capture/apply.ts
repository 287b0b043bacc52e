// Prepares a batch of decoded transactions for one database transaction: the mirror, the
// views, the outbox and the checkpoint move together, so a crash replays the whole batch
// or none of it. Transactions are simulated in commit order over an in-memory Store so
// each event carries its record as it stood at its own commit.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import type { PendingQuery, Row as SqlRow, Sql } from "postgres"
import { EVENT_RESOURCE, type EventKind } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, resourceOfTable, type Resource } from "../../domain/resources.ts"
import { eventWrites, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { mayHaveEvents, scrubDeletedRecords } from "../outbox/deleted.ts"
import { scrubToIdentifiers } from "../../domain/records/deleted.ts"
import { dependentsOf, type RecordRef } from "../projection/dependencies.ts"
import { prepare, Projections, type ProjectedView } from "../projection/project.ts"
import { type MirrorRow, Store, TableMap } from "../projection/store.ts"
import { standsFor, viewBackedTable } from "../projection/by-view.ts"
import { rowCompany } from "../projection/tables.ts"
import {
  type ChangeTime,
  companyRows,
  keepsMirror,
  mirrorWrites,
  type MirrorChanges,
  userRows,
  viewWrites,
  writeCompanyRows,
  writeUserRows,
  writeViews
} from "../projection/write.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"
import { errorText, isPoison } from "./quarantine/poison.ts"
import {
  type CaptureQuarantine,
  emptyDelta,
  type Held,
  type HeldInfo,
  type HeldLookup,
  type QuarantineDelta
} from "./quarantine/state.ts"
import { quarantineWrites } from "./quarantine/writes.ts"
import type { RowChange, Txn } from "./txn.ts"
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

/** A record's view could not be shaped: why (null: it still waits, as its entry says), and what holds it. */
interface Poisoned {
  readonly poison: string | null
  readonly info: HeldInfo
}

const OWN: HeldInfo = { blockedBy: null, source: null }

/** No value left out (an unchanged TOAST value is undefined): a whole copy of the app row. */
const whole = (data: Row | null): boolean => {
  if (data === null) return true
  for (const c in data) if (data[c] === undefined) return false
  return true
}

/**
 * One batch's dealings with the quarantine (quarantine/): which records it holds and why,
 * what each owes (its row at its last event), and which held records it shapes again. Made
 * only when a batch meets the quarantine: a batch that does not pays nothing for it. A large
 * transaction (large.ts) uses one too.
 */
export class BatchHolds {
  readonly q: CaptureQuarantine
  readonly batch: number
  /** Held before this batch (committed, or by a batch prepared before it). */
  private was: HeldLookup = () => undefined
  private readonly known = new TableMap<HeldInfo>()
  /** Records held in this batch, by table and key. */
  readonly held = new TableMap<Held>()
  /** Records this batch holds whatever they shape to (a value not decoded, a broken table), and why. */
  private readonly forced = new TableMap<{ readonly error: string; readonly info: HeldInfo }>()
  /** App rows this batch has a whole copy of (a change with every value decoded). */
  private readonly wholeRows = new TableMap<true>()
  /** A record's row when its last event in this batch fired. */
  private readonly fired = new TableMap<Row | null>()
  /** Held records discarded in this batch. */
  private readonly dropped = new TableMap<true>()
  /** Records to shape again (retried, or checked by rebuild-views). */
  retried: RecordRef[] = []
  readonly released: RecordRef[] = []
  readonly contract: Array<{ table: string; problems: ReadonlyArray<string> | null; lsn: Lsn }> = []
  readonly resync: Array<{ table: string; after: string | null; rows: number }> = []

  constructor(q: CaptureQuarantine) {
    this.q = q
    this.batch = q.nextBatch()
  }

  /** Before loading: the records the batch's retries and checks shape again (a chunk of queued ones at most). */
  async scan(sql: Db, txns: ReadonlyArray<Txn>): Promise<void> {
    const named: Array<readonly [string, string]> = []
    const checked: RecordRef[] = []
    for (const t of txns) {
      for (const m of t.markers ?? []) {
        if (m.kind === "retry") named.push(...m.records)
        else if (m.kind === "retry-all") this.q.retryAll(m.upTo)
        else if (m.kind === "check") {
          for (const [table, key] of m.records) {
            const resource = resourceOfTable(table)
            if (resource !== undefined) checked.push({ resource, id: key })
          }
        }
      }
    }
    this.retried = [...(await this.q.takeRetries(sql, named)), ...checked]
  }

  /** Which of the batch's records were held before it (spilled: read from the table). */
  async lookup(sql: Db, keys: ReadonlyArray<readonly [string, string]>): Promise<void> {
    this.was = await this.q.lookup(sql, keys, this.known)
  }

  /** Whether (and why) a record was held before this batch and is not discarded in it. */
  heldBefore(table: string, id: string): HeldInfo | undefined {
    return this.dropped.has(table, id) ? undefined : this.was(table, id)
  }

  /** A transaction's markers, at its start. */
  begin(txn: Txn): void {
    for (const m of txn.markers ?? []) this.mark(m, txn.endLsn)
  }

  mark(m: QuarantineMarker, lsn: Lsn): void {
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
        if (resource === undefined) continue
        const inBatch = this.held.get(table, key)
        if (inBatch !== undefined) this.held.delete(table, key)
        if (this.heldBefore(table, key) === undefined && inBatch === undefined) continue
        this.dropped.set(table, key, true)
        this.released.push({ resource, id: key })
      }
    } else if (m.kind === "resynced") {
      this.resync.push({ table: m.table, after: m.after, rows: m.rows })
      if (m.after === null) {
        q.resyncing.delete(m.table)
        q.retryBlocked(m.table)
      }
    }
  }

  /** Every change of the batch, before it is applied: what a value not decoded or a broken table holds. */
  force(change: RowChange, before: Row | null): void {
    if (change.poison === undefined) {
      if (whole(change.data)) this.wholeRows.set(change.table, change.key, true)
    } else this.wholeRows.delete(change.table, change.key)
    const problems = this.q.broken.get(change.table)
    if (change.poison === undefined && problems === undefined) return
    const error =
      problems !== undefined
        ? `app.${change.table} no longer fits what the service reads: ${problems.join("; ")}`
        : change.poison!
    const info: HeldInfo =
      problems !== undefined
        ? { blockedBy: change.table, source: null }
        : { blockedBy: null, source: [change.table, change.key] }
    const deps = dependentsOf(change.table, change.key, before, change.data)
    for (const r of deps.records) this.forced.set(tableOf(r), r.id, { error, info })
    if (resourceOfTable(change.table) !== undefined) this.forced.set(change.table, change.key, { error, info })
  }

  isHeld(table: string, id: string): boolean {
    return this.held.has(table, id) || this.heldBefore(table, id) !== undefined
  }

  /** Why a record cannot shape yet whatever its row says, or undefined. */
  private blocked(table: string, id: string): Poisoned | undefined {
    const forced = this.forced.get(table, id)
    if (forced !== undefined) return { poison: forced.error, info: forced.info }
    const info = this.heldBefore(table, id)
    if (info === undefined) return undefined
    // Held by a table that does not fit yet (or is being re-read), or by a row whose value the
    // decoder rejected and of which no whole copy came since: it keeps its entry's error.
    if (this.q.blocks(info)) return { poison: null, info }
    if (info.source !== null && !this.wholeRows.has(info.source[0], info.source[1])) return { poison: null, info }
    return undefined
  }

  /** The record's view, null when its row is gone, or why it cannot be shaped. */
  shape(projections: { get(ref: RecordRef): ProjectedView | null }, ref: RecordRef): ProjectedView | null | Poisoned {
    const blocked = this.blocked(tableOf(ref), ref.id)
    if (blocked !== undefined) return blocked
    try {
      return projections.get(ref)
    } catch (e) {
      if (!isPoison(e)) throw e
      return { poison: `${ref.resource} ${ref.id}: ${errorText(e)}`, info: OWN }
    }
  }

  /** Holds a record in this batch; what it owes: its row as of its last good view (stored already if it was held). */
  hold(store: Store, ref: RecordRef, why: Poisoned, lsn: Lsn): void {
    const table = tableOf(ref)
    if (this.held.has(table, ref.id)) return
    const was = this.heldBefore(table, ref.id)
    const before =
      was !== undefined
        ? undefined
        : this.fired.has(table, ref.id)
          ? (this.fired.get(table, ref.id) ?? null)
          : (store.getBase(table, ref.id)?.data ?? null)
    const row = store.has(table, ref.id) ? store.get(table, ref.id) : null
    this.held.set(table, ref.id, {
      ref,
      table,
      error: why.poison,
      companyId: row?.companyId ?? store.getBase(table, ref.id)?.companyId ?? null,
      before,
      info: why.info,
      lsn
    })
  }

  firedAt(store: Store, ref: RecordRef): void {
    const table = tableOf(ref)
    this.fired.set(table, ref.id, store.get(table, ref.id)?.data ?? null)
  }

  /** The batch's quarantine changes (also applied to capture's state, for the batches after it). */
  finish(released: ReadonlyArray<RecordRef>, lsn: Lsn | null = null): QuarantineDelta {
    const held: Held[] = []
    this.held.forEachKey((table, key) => held.push(this.held.get(table, key)!))
    const delta: QuarantineDelta = {
      batch: this.batch,
      held,
      released: released.filter((r) => !this.held.has(tableOf(r), r.id)),
      contract: lsn === null ? this.contract : this.contract.map((c) => ({ ...c, lsn })),
      resync: this.resync
    }
    this.q.apply(delta, (t, k) => this.was(t, k))
    return delta
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
    if (holds !== null) holds.force(c, store.get(c.table, c.key)?.data ?? null)
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
          holds.hold(store, ref, v, txn.endLsn)
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
export const reprojectViews = async (
  tx: Tx,
  refs: ReadonlyArray<RecordRef>,
  time: ChangeTime
): Promise<ReadonlyArray<RecordRef>> => {
  const store = new Store(tx)
  await prepare(store, refs)
  const { views, gone } = finalViews(store, refs)
  await writeViews(tx, views, gone, time)
  return gone
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

/**
 * What a batch changes in the mirror, as statements take it, once its views are known
 * (`written`: every view it writes). A view-backed row whose view, as written, stands for it
 * (projection/by-view.ts) is not stored, and a stored copy of it goes; one whose view no longer
 * does is stored, changed or not (the view the mirror read it from is being rewritten).
 * The view and the mirror row are written in the same transaction, which keeps the mirror
 * itself (sql/032: no copy made by the views' trigger).
 */
export const mirrorChanges = (store: Store, written: ReadonlyArray<ProjectedView> = []): MirrorChanges => {
  const { inserts, updates, deletes } = store.changes()
  if (written.length === 0) return { inserts, upserts: updates, deletes }
  const stands = new TableMap<boolean>()
  for (let i = 0; i < written.length; i++) {
    const v = written[i]!
    const table = viewBackedTable(v.resource)
    if (table === undefined) continue
    const row = store.get(table, v.id)
    if (row !== null) stands.set(table, v.id, standsFor(table, v.record, v.companyId, row.data))
  }
  if (stands.isEmpty()) return { inserts, upserts: updates, deletes }
  const stored = (r: MirrorRow) => stands.get(r.tbl, r.key) !== true
  const upserts = updates.filter(stored)
  stands.forEachKey((tbl, key) => {
    if (stands.get(tbl, key)) {
      // Stored before this batch (or read from its view: then the delete finds nothing).
      if (store.getBase(tbl, key) !== null) deletes.push({ tbl, key })
    } else if (!store.changed(tbl, key)) upserts.push(store.get(tbl, key)!)
  })
  return { inserts: inserts.filter(stored), upserts, deletes }
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
  if (holds !== null) await holds.scan(sql, txns)
  const { refs: changed, tenancy, users, wide } = await loadFor(store, changes)
  let refs = changed
  if (holds !== null) {
    if (holds.retried.length > 0) {
      await prepare(store, holds.retried)
      const more = new RefList()
      for (const r of changed) more.add(r)
      for (const r of holds.retried) more.add(r)
      refs = more.list
      const companies = new Set<string>()
      for (const r of holds.retried) {
        const id = store.getBase(tableOf(r), r.id)?.companyId
        if (id) companies.add(id)
      }
      await store.loadChildren("company_modules", companies)
    }
    const keys: Array<readonly [string, string]> = changes.map((c) => [c.table, c.key] as const)
    for (const r of refs) keys.push([tableOf(r), r.id])
    for (const t of txns) for (const m of t.markers ?? []) if (m.kind === "discard") keys.push(...m.records)
    await holds.lookup(sql, keys)
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
      ? { ...finalViews(store, refs, projections), delta: emptyDelta(0) }
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
  // Deleted means gone: a record deleted by the batch keeps only its identifiers in its stored
  // events, those of this batch (scrubbed here) and earlier ones (by a statement, below).
  const scrubbed = mayHaveEvents(gone)
  if (scrubbed) {
    const isGone = new TableMap<true>()
    for (const r of gone) isGone.set(r.resource, r.id, true)
    for (let i = 0; i < events.length; i++) {
      const e = events[i]!
      if (isGone.has(e.resource, e.recordId)) events[i] = { ...e, payload: scrubToIdentifiers(e.resource, e.payload) }
    }
  }
  const writes = [
    (tx: Tx) => [keepsMirror(tx)],
    mirrorWrites(mirrorChanges(store, views)),
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
      if (scrubbed) out.push(scrubDeletedRecords(tx, gone))
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

/** The events a held record owes once it shapes: its row when held against its row now (only its own kinds). */
export const owedEvents = (
  store: Store,
  ref: RecordRef,
  view: ProjectedView,
  owed: Row | null,
  now: Row | null
): Array<{ kind: EventKind; resource: Resource }> => {
  const out: Array<{ kind: EventKind; resource: Resource }> = []
  for (const kind of eventsFor(tableOf(ref), owed, now)) {
    const resource = EVENT_RESOURCE[kind]
    if (resource === ref.resource && moduleOn(store, view.companyId, resource)) out.push({ kind, resource })
  }
  return out
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
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  const healed: Array<{ ref: RecordRef; view: ProjectedView }> = []
  const released: RecordRef[] = [...holds.released]
  // What the healed records owe: those first held in this batch know it, the others ask.
  const owed = new TableMap<Row | null>()
  const ask: RecordRef[] = []
  const seen = new TableMap<true>()
  const take = (r: RecordRef) => {
    const table = tableOf(r)
    if (seen.has(table, r.id)) return
    seen.set(table, r.id, true)
    const v = holds.shape(projections, r)
    if (v !== null && "poison" in v) return holds.hold(store, r, v, lsn)
    if (v === null) gone.push(r)
    else views.push(v)
    // Held before (or earlier in this batch) and shaped now: released, owing its events.
    const inBatch = holds.held.get(table, r.id)
    if (inBatch !== undefined) {
      holds.held.delete(table, r.id)
      if (inBatch.before === undefined) ask.push(r)
      else owed.set(table, r.id, inBatch.before)
    } else if (holds.heldBefore(table, r.id) === undefined) return
    else ask.push(r)
    released.push(r)
    // A record gone while held is released with a tombstone and no events.
    if (v !== null) healed.push({ ref: r, view: v })
  }
  for (const r of refs) take(r)
  for (const r of holds.retried) take(r)
  if (ask.length > 0) {
    const more = await holds.q.owedBy(sql, ask)
    for (const r of ask) owed.set(tableOf(r), r.id, more.get(tableOf(r), r.id) ?? null)
  }
  if (last !== undefined) {
    let seq = 0
    for (const e of events) if (e.commitLsn === last.endLsn) seq++
    for (const { ref, view } of healed) {
      const table = tableOf(ref)
      const now = store.get(table, ref.id)?.data ?? null
      for (const { kind, resource } of owedEvents(store, ref, view, owed.get(table, ref.id) ?? null, now)) {
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
  return { views, gone, delta: holds.finish(released) }
}
