// Records exactly as the API and webhooks carry them, from mirror rows of the app tables.
// Records are the plain camelCase of their row (companyId included: a receiver that serves
// several companies tells their events apart by it), except corrective actions and
// inspections, which are exactly the fields of docs/api.md#corrective-actions and docs/api.md#inspections.
import type { Resource } from "../resources.ts"
import { shapeAudit } from "./audits.ts"
import { shapeChange } from "./changes.ts"
import { shapeCorrectiveAction } from "./corrective-actions.ts"
import { shapeIncident } from "./incidents.ts"
import { shapeInspection } from "./inspections.ts"
import { shapeJobSite } from "./job-sites.ts"
import { shapeObservation } from "./observations.ts"
import { shapePermit } from "./permits.ts"
import { shapePolicy } from "./policies.ts"
import { shapeRiskAssessment } from "./risk-assessments.ts"
import { shapeSds } from "./sds.ts"
import { shapeSubcontractor } from "./subcontractors.ts"
import { shapeTrainingRecord } from "./training-records.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"
import { shapeWorker } from "./workers.ts"

export { NEVER_COLUMNS, PUBLISHED_COLUMNS } from "./columns.ts"
export { documentStatus, type DocumentStatus } from "./subcontractors.ts"
export type { ApiRecord, Row, ShapeInput } from "./types.ts"

const SHAPERS: Readonly<Record<Resource, (input: ShapeInput) => ApiRecord>> = {
  incidents: shapeIncident,
  observations: shapeObservation,
  "corrective-actions": shapeCorrectiveAction,
  audits: shapeAudit,
  inspections: shapeInspection,
  "training-records": shapeTrainingRecord,
  workers: shapeWorker,
  "job-sites": shapeJobSite,
  changes: shapeChange,
  permits: shapePermit,
  policies: shapePolicy,
  sds: shapeSds,
  "risk-assessments": shapeRiskAssessment,
  subcontractors: shapeSubcontractor
}

/**
 * The record as GET /api/v1/<resource>/<id> returns it under data. Throws a TypeError
 * when a value has the wrong type for its column (e.g. a timestamp that does not parse):
 * that is a capture bug, not something to paper over with null.
 */
export const shape = (resource: Resource, input: ShapeInput): ApiRecord => SHAPERS[resource](input)

export interface ViewMeta {
  readonly createdAt: string
  /** workers and job-sites, for the name filter; null otherwise. */
  readonly name: string | null
  /** corrective-actions, for the status filter; null otherwise. */
  readonly status: string | null
}

const stringOrNull = (v: unknown): string | null => (typeof v === "string" ? v : null)

/** What the view table indexes for paging and filters, taken from a shaped record. */
export const viewMeta = (resource: Resource, record: ApiRecord): ViewMeta => {
  const createdAt = record["createdAt"]
  if (typeof createdAt !== "string") throw new TypeError(`${resource} record without createdAt`)
  return {
    createdAt,
    name: resource === "workers" || resource === "job-sites" ? stringOrNull(record["name"]) : null,
    status: resource === "corrective-actions" ? stringOrNull(record["status"]) : null
  }
}
