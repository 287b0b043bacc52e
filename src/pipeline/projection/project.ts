// Loading what a record's view needs into a batch's Store, and shaping it from there.
import { shape, viewMeta } from "../../domain/records/index.ts"
import type { ApiRecord, Row } from "../../domain/records/types.ts"
import { RESOURCE_INFO, type Resource } from "../../domain/resources.ts"
import type { RecordRef } from "./dependencies.ts"
import { type Store, TableMap } from "./store.ts"
import { groupSets } from "../../platform/sets.ts"

const CHILD_TABLE: Partial<Record<Resource, string>> = {
  audits: "audit_items",
  inspections: "inspection_items",
  subcontractors: "subcontractor_documents"
}

/** The app tables a record's view reads: its own, its children's, an inspection's equipment and site. */
export const tablesRead = (resource: Resource): ReadonlyArray<string> => {
  const own = RESOURCE_INFO[resource].table
  if (resource === "inspections") return [own, "inspection_items", "equipment", "job_sites"]
  if (resource === "policies") return [own, "policy_acknowledgements"]
  const child = CHILD_TABLE[resource]
  return child === undefined ? [own] : [own, child]
}

export interface ProjectedView {
  readonly resource: Resource
  readonly id: string
  readonly companyId: string
  readonly record: ApiRecord
  readonly body: string
  readonly createdAt: string
  /** The record's updatedAt (null for inspections, which have none), for the views' change time. */
  readonly updatedAt: string | null
  readonly name: string | null
  readonly status: string | null
}

const byResource = (refs: Iterable<RecordRef>) =>
  groupSets(
    refs,
    (r) => r.resource,
    (r) => r.id
  )

/** Loads the rows that `ids`' rows of `tbl` (and the batch's new rows of it) name in `column`; returns their keys. */
const loadReferenced = async (
  store: Store,
  seen: ReadonlyArray<{ tbl: string; data: Row }>,
  tbl: string,
  ids: Iterable<string>,
  column: string,
  target: string
): Promise<Set<string>> => {
  const keys = new Set<string>()
  for (const id of ids) {
    const k = store.getBase(tbl, id)?.data[column]
    if (typeof k === "string") keys.add(k)
  }
  for (const s of seen) if (s.tbl === tbl && typeof s.data[column] === "string") keys.add(s.data[column])
  await store.loadKeys([...keys].map((id) => [target, id] as const))
  return keys
}

/**
 * Loads rows, children, counts and referenced rows for the given records.
 * `seen` holds row versions the batch will write (new rows of its changes), so that
 * references they introduce (an inspection's new equipment, that equipment's new site)
 * are loaded too.
 */
export const prepare = async (
  store: Store,
  refs: Iterable<RecordRef>,
  seen: ReadonlyArray<{ tbl: string; data: Row }> = []
) => {
  const groups = byResource(refs)
  for (const [resource, ids] of groups) {
    const tbl = RESOURCE_INFO[resource].table
    await store.loadKeys([...ids].map((id) => [tbl, id] as const))
    const child = CHILD_TABLE[resource]
    if (child) await store.loadChildren(child, ids)
    if (resource === "policies") await store.loadChildCounts("policy_acknowledgements", ids)
  }
  const inspections = groups.get("inspections")
  if (inspections) {
    // An inspection shows its equipment, and the equipment its job site's name.
    const equipment = await loadReferenced(store, seen, "inspections", inspections, "equipment_id", "equipment")
    await loadReferenced(store, seen, "equipment", equipment, "job_site_id", "job_sites")
  }
}

// Years 0000 to 9999 only: PostgreSQL does not read ISO 8601's expanded years ("+012026-..."),
// and such a record then keeps the change time of its commit instead.
const PLAIN_TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

const updatedAtOf = (record: ApiRecord): string | null => {
  const u = record["updatedAt"]
  return typeof u === "string" && PLAIN_TIMESTAMP.test(u) ? u : null
}

/** The record as the API returns it now, or null when the row is gone. */
export const project = (store: Store, ref: RecordRef): ProjectedView | null => {
  const tbl = RESOURCE_INFO[ref.resource].table
  const row = store.get(tbl, ref.id)
  if (!row?.companyId) return null
  const child = CHILD_TABLE[ref.resource]
  let equipment: Row | null = null
  let equipmentJobSite: Row | null = null
  if (ref.resource === "inspections") {
    const e = row.data.equipment_id
    equipment = typeof e === "string" ? (store.get("equipment", e)?.data ?? null) : null
    const j = equipment?.job_site_id
    equipmentJobSite = typeof j === "string" ? (store.get("job_sites", j)?.data ?? null) : null
  }
  const record = shape(ref.resource, {
    row: row.data,
    children: child ? store.childrenOf(child, ref.id).map((r) => r.data) : [],
    acknowledgementCount: ref.resource === "policies" ? store.childCount("policy_acknowledgements", ref.id) : 0,
    equipment,
    equipmentJobSite
  })
  const meta = viewMeta(ref.resource, record)
  // The view's created_at column takes it: a time PostgreSQL cannot store fails here, naming the
  // record, not in the batch's write (capture holds such a record: quarantine/).
  if (!PLAIN_TIMESTAMP.test(meta.createdAt))
    throw new TypeError(`column created_at: expected a timestamp from year 0000 to 9999, got ${meta.createdAt}`)
  return {
    resource: ref.resource,
    id: ref.id,
    companyId: row.companyId,
    record,
    body: JSON.stringify(record),
    updatedAt: updatedAtOf(record),
    ...meta
  }
}

/**
 * A batch's projections, each kept while nothing it reads changed since it was made: the view
 * an event carries is most often the record's final view too, shaped once. What a view reads:
 * its row, its child rows (or their count), and for an inspection its equipment and that
 * equipment's site.
 */
export class Projections {
  private readonly store: Store
  /** By resource, then id. */
  private readonly made = new TableMap<{ readonly at: number; readonly view: ProjectedView | null }>()

  constructor(store: Store) {
    this.store = store
  }

  get(ref: RecordRef): ProjectedView | null {
    const hit = this.made.get(ref.resource, ref.id)
    if (hit !== undefined && this.unchangedSince(ref, hit.at)) return hit.view
    const view = project(this.store, ref)
    this.made.set(ref.resource, ref.id, { at: this.store.version, view })
    return view
  }

  private unchangedSince(ref: RecordRef, at: number): boolean {
    const s = this.store
    const tbl = RESOURCE_INFO[ref.resource].table
    if (s.changedSince(tbl, ref.id, at)) return false
    const child = CHILD_TABLE[ref.resource]
    if (child !== undefined && s.childrenChangedSince(child, ref.id, at)) return false
    if (ref.resource === "policies" && s.childrenChangedSince("policy_acknowledgements", ref.id, at)) return false
    if (ref.resource === "inspections") {
      const e = s.get(tbl, ref.id)?.data.equipment_id
      if (typeof e === "string") {
        if (s.changedSince("equipment", e, at)) return false
        const j = s.get("equipment", e)?.data.job_site_id
        if (typeof j === "string" && s.changedSince("job_sites", j, at)) return false
      }
    }
    return true
  }
}
