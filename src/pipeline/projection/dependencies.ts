// Which records' views a row change touches (pure). A child row re-projects its parent; an
// equipment or job site change reaches the inspections that show its name.
import type { Row } from "../../domain/records/types.ts"
import { resourceOfTable, type Resource } from "../../domain/resources.ts"

export interface RecordRef {
  readonly resource: Resource
  readonly id: string
}

export interface Dependents {
  /** Records whose view must be rewritten. */
  readonly records: ReadonlyArray<RecordRef>
  /** Equipment whose inspections must be rewritten. */
  readonly inspectionsOfEquipment: ReadonlyArray<string>
  /** Job sites whose equipment's inspections must be rewritten. */
  readonly inspectionsAtSite: ReadonlyArray<string>
}

const CHILD_PARENT: Readonly<Record<string, readonly [string, Resource]>> = {
  audit_items: ["audit_id", "audits"],
  inspection_items: ["inspection_id", "inspections"],
  policy_acknowledgements: ["policy_id", "policies"],
  subcontractor_documents: ["subcontractor_id", "subcontractors"]
}

const EQUIPMENT_SHOWN = ["name", "identifier", "category", "job_site_id"] as const

const changed = (before: Row | null, after: Row | null, cols: ReadonlyArray<string>) =>
  before === null || after === null || cols.some((c) => before[c] !== after[c])

// Answers built without spreads or sets: capture asks once per row change.
const NONE: Dependents = { records: [], inspectionsOfEquipment: [], inspectionsAtSite: [] }
const only = (records: ReadonlyArray<RecordRef>): Dependents => ({
  records,
  inspectionsOfEquipment: NONE.inspectionsOfEquipment,
  inspectionsAtSite: NONE.inspectionsAtSite
})

/** before/after: the row's state before and after the change (null when absent). */
export const dependentsOf = (table: string, id: string, before: Row | null, after: Row | null): Dependents => {
  const child = CHILD_PARENT[table]
  if (child) {
    const [col, resource] = child
    const a = before?.[col]
    const b = after?.[col]
    const records: RecordRef[] = []
    if (typeof a === "string") records.push({ resource, id: a })
    if (typeof b === "string" && b !== a) records.push({ resource, id: b })
    return only(records)
  }
  if (table === "equipment") {
    return changed(before, after, EQUIPMENT_SHOWN) ? { ...NONE, inspectionsOfEquipment: [id] } : NONE
  }
  if (table === "job_sites") {
    return {
      ...NONE,
      records: [{ resource: "job-sites", id }],
      inspectionsAtSite: changed(before, after, ["name"]) ? [id] : []
    }
  }
  const own = resourceOfTable(table)
  return own ? only([{ resource: own, id }]) : NONE
}
