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

const distinct = (xs: ReadonlyArray<string | null | undefined>): string[] => [
  ...new Set(xs.filter((x): x is string => typeof x === "string"))
]

/** before/after: the row's state before and after the change (null when absent). */
export const dependentsOf = (table: string, id: string, before: Row | null, after: Row | null): Dependents => {
  const none: Dependents = { records: [], inspectionsOfEquipment: [], inspectionsAtSite: [] }
  const own = resourceOfTable(table)
  const child = CHILD_PARENT[table]
  if (child) {
    const [col, resource] = child
    return { ...none, records: distinct([before?.[col] as string, after?.[col] as string]).map((pid) => ({ resource, id: pid })) }
  }
  if (table === "equipment") {
    return changed(before, after, EQUIPMENT_SHOWN) ? { ...none, inspectionsOfEquipment: [id] } : none
  }
  if (table === "job_sites") {
    return {
      ...none,
      records: [{ resource: "job-sites", id }],
      inspectionsAtSite: changed(before, after, ["name"]) ? [id] : []
    }
  }
  return own ? { ...none, records: [{ resource: own, id }] } : none
}
