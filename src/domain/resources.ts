// The 14 readable resources (docs/api.md#resources): path and module name, the app table behind each,
// and the filters their lists take besides paging and dates.

export const RESOURCES = [
  "incidents",
  "observations",
  "corrective-actions",
  "audits",
  "inspections",
  "training-records",
  "workers",
  "job-sites",
  "changes",
  "permits",
  "policies",
  "sds",
  "risk-assessments",
  "subcontractors"
] as const

export type Resource = (typeof RESOURCES)[number]

export interface ResourceInfo {
  readonly resource: Resource
  /** The app table whose rows are this resource's records. */
  readonly table: string
  /** List filters besides limit, cursor, createdAfter, createdBefore. */
  readonly filters: ReadonlyArray<"name" | "status">
  readonly description: string
}

export const RESOURCE_INFO: Readonly<Record<Resource, ResourceInfo>> = {
  incidents: {
    resource: "incidents",
    table: "incidents",
    filters: [],
    description: "Incidents, injuries, illnesses, near misses"
  },
  observations: { resource: "observations", table: "observations", filters: [], description: "Safety observations" },
  "corrective-actions": {
    resource: "corrective-actions",
    table: "corrective_actions",
    filters: ["status"],
    description: "Corrective actions"
  },
  audits: {
    resource: "audits",
    table: "audits",
    filters: [],
    description: "Site audits, each with its items and a score"
  },
  inspections: { resource: "inspections", table: "inspections", filters: [], description: "Equipment inspections" },
  "training-records": {
    resource: "training-records",
    table: "training_records",
    filters: [],
    description: "Training records"
  },
  workers: { resource: "workers", table: "workers", filters: ["name"], description: "Workers on the roster" },
  "job-sites": { resource: "job-sites", table: "job_sites", filters: ["name"], description: "Job sites" },
  changes: { resource: "changes", table: "changes", filters: [], description: "Management of change requests" },
  permits: { resource: "permits", table: "permits", filters: [], description: "Permits to work" },
  policies: {
    resource: "policies",
    table: "policies",
    filters: [],
    description: "Policies, with acknowledgement counts"
  },
  sds: { resource: "sds", table: "sds", filters: [], description: "Safety data sheets" },
  "risk-assessments": {
    resource: "risk-assessments",
    table: "risk_assessments",
    filters: [],
    description: "Risk assessments"
  },
  subcontractors: {
    resource: "subcontractors",
    table: "subcontractors",
    filters: [],
    description: "Subcontractors and their document status"
  }
}

/**
 * Each resource's number: what the views' page indexes key its records by (the database's
 * service.resource_no, made from this list: src/platform/db/declared.ts). Append-only: a new
 * resource takes the next number, and a number never changes (every index entry under it
 * would be misplaced).
 */
export const RESOURCE_NUMBER: Readonly<Record<Resource, number>> = {
  incidents: 1,
  observations: 2,
  "corrective-actions": 3,
  audits: 4,
  inspections: 5,
  "training-records": 6,
  workers: 7,
  "job-sites": 8,
  changes: 9,
  permits: 10,
  policies: 11,
  sds: 12,
  "risk-assessments": 13,
  subcontractors: 14
}

/**
 * Resources whose record's row hangs under another row of the app's (an inspection under its
 * equipment). A view of one never stands for its mirror row (projection/by-view.ts); every other
 * resource's may (the database's service.view_backed_table, made from this).
 */
export const CHILD_RECORDS: ReadonlySet<Resource> = new Set<Resource>(["inspections"])

export const isResource = (s: string): s is Resource => (RESOURCES as ReadonlyArray<string>).includes(s)

const BY_TABLE = new Map<string, Resource>()
for (const r of RESOURCES) if (!BY_TABLE.has(RESOURCE_INFO[r].table)) BY_TABLE.set(RESOURCE_INFO[r].table, r)

export const resourceOfTable = (table: string): Resource | undefined => BY_TABLE.get(table)

/** The corrective-action status filter (docs/api.md#corrective-actions): groups and exact values. */
export const STATUS_FILTER: Readonly<Record<string, ReadonlyArray<string>>> = {
  open: ["open", "in_progress"],
  closed: ["completed", "verified"],
  in_progress: ["in_progress"],
  completed: ["completed"],
  verified: ["verified"]
}
