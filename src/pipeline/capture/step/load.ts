// What a commit point's records need before they are shaped: every row a set of changes makes
// the views depend on, loaded into a Store; and the inspections an equipment or job site change
// reaches, which are not loaded with the point but re-shaped after its writes, a chunk at a time.
import type { PendingQuery, Row as SqlRow } from "postgres"
import type { Transaction as Tx } from "../../../platform/db/Database.ts"
import type { Row } from "../../../domain/records/types.ts"
import { RESOURCE_INFO, type Resource } from "../../../domain/resources.ts"
import { dependentsOf, type RecordRef } from "../../projection/dependencies.ts"
import { prepare, Projections, type ProjectedView } from "../../projection/project.ts"
import { Store } from "../../projection/store.ts"
import { hasEveryColumn, rowCompany } from "../../projection/tables.ts"
import { type ChangeTime, placeReached, writeViews } from "../../projection/write.ts"

/** Records, each once, in the order first met; looked up by resource, then id (no "resource|id" string per change). */
export class RefList {
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

/** Whether a batch's equipment and site changes reach no inspection's view. */
export const reachesNone = (wide: Wide): boolean => wide.equipment.length === 0 && wide.sites.length === 0

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
  select r.key from service.rows r
  where r.tbl = 'inspections' and r.parent_id = any(
    array(select key::uuid from service.rows where tbl = 'equipment' and parent_id = any(${sites})) || ${equipment})
    -- a held inspection keeps its view: it is shaped again when it shapes (quarantine/)
    and not exists (select 1 from service.capture_quarantine q where q.tbl = 'inspections' and q.key = r.key)`

/** The rows an inspection's view shows of others': while their table does not fit (or is read again), no wide re-shaping. */
export const WIDE_TABLES = ["equipment", "job_sites"] as const

/**
 * Rewrites the views of the wide set's inspections from the mirror as `tx` sees it (the batch's
 * mirror writes done), but those among `written` (the batch's own records, written with it).
 * Only their keys are held in full; rows, items and views a chunk at a time.
 */
export const reshapeWide = async (
  tx: Tx,
  wide: Wide,
  written: ReadonlyArray<RecordRef>,
  time: ChangeTime,
  partialWaits = false
): Promise<number> => {
  if (reachesNone(wide)) return 0
  const skip = new Set(written.filter((r) => r.resource === "inspections").map((r) => r.id))
  const rows = await wideInspectionKeys(
    tx,
    tx`${wide.equipment as string[]}::uuid[]`,
    tx`${wide.sites as string[]}::uuid[]`
  )
  const keys = rows.map((r) => r.key).filter((k) => !skip.has(k))
  // A reached inspection the batch also changed itself was placed at its own change: the
  // reach, at the batch's last commit (batch.ts, cutAfterWide), comes later.
  const both = rows.map((r) => r.key).filter((k) => skip.has(k))
  if (both.length > 0 && "commit" in time) await placeReached(tx, "inspections", both, time)
  for (let i = 0; i < keys.length; i += WIDE_CHUNK) {
    await reprojectViews(
      tx,
      keys.slice(i, i + WIDE_CHUNK).map((id) => ({ resource: "inspections", id })),
      time,
      // While inspections do not fit, one read without a column waits for it to be read again.
      partialWaits ? (row) => hasEveryColumn("inspections", row) : undefined
    )
  }
  return keys.length
}

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** Re-projects the given records from the mirror as `tx` sees it and writes their views (or
 *  deletes those whose row is gone): bootstrap, a large transaction's commit, wide re-shaping. */
export const reprojectViews = async (
  tx: Tx,
  refs: ReadonlyArray<RecordRef>,
  time: ChangeTime,
  shapes?: (row: Row) => boolean
): Promise<ReadonlyArray<RecordRef>> => {
  const store = new Store(tx)
  await prepare(store, refs)
  const taken =
    shapes === undefined
      ? refs
      : refs.filter((r) => {
          const row = store.get(tableOf(r), r.id)
          return row === null || shapes(row.data)
        })
  const { views, gone } = finalViews(store, taken)
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

/**
 * The gone records with the commit time of the last transaction of the batch that changed their
 * row, and, for one the batch made in an earlier transaction than the one that deleted it (the
 * mirror had no row: `hadRow`), its company: it has no view to delete, but it still leaves a
 * tombstone. Someone may have seen it: a batch the service's database lost in a crash, read by a
 * follower or a list before it was lost, is written again in other cuts, and the record's making
 * and its deletion may then fall in one batch. One made and deleted by the same transaction was
 * never seen by anyone.
 */
export const deletedAt = (
  txns: ReadonlyArray<{
    readonly commitTime: Date
    readonly changes: ReadonlyArray<{ readonly table: string; readonly key: string; readonly data: Row | null }>
  }>,
  gone: ReadonlyArray<RecordRef>,
  hadRow: (r: RecordRef) => boolean
): ReadonlyArray<RecordRef & { readonly at?: Date; readonly company?: string }> => {
  if (gone.length === 0) return gone
  const wanted = new Map(gone.map((r) => [`${tableOf(r)}|${r.id}`, r]))
  // Per record: its last transaction (and that one's time), and the first that left it a row, with its company.
  const seen = new Map<RecordRef, { at: Date; last: number; first?: { txn: number; company: string } }>()
  for (let i = 0; i < txns.length; i++) {
    const t = txns[i]!
    for (const c of t.changes) {
      const r = wanted.get(`${c.table}|${c.key}`)
      if (r === undefined) continue
      const s = seen.get(r) ?? { at: t.commitTime, last: i }
      s.at = t.commitTime
      s.last = i
      const company = c.data === null ? null : rowCompany(c.table, c.data)
      if (company !== null && s.first === undefined) s.first = { txn: i, company }
      seen.set(r, s)
    }
  }
  return gone.map((r) => {
    const s = seen.get(r)
    if (s === undefined) return r
    const made = s.first !== undefined && s.first.txn < s.last && !hadRow(r)
    return made ? { ...r, at: s.at, company: s.first!.company } : { ...r, at: s.at }
  })
}
