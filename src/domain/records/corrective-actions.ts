// Corrective actions: exactly the fields of docs/api.md#corrective-actions, in its order.
// NEVER: evidence_photos, signature.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

/** Where a corrective action came from, and its statuses: the app's values, which the API serves as they are. */
export const CA_SOURCES = [
  "incident",
  "observation",
  "audit",
  "inspection",
  "change",
  "maturity_gap",
  "gap_analysis_import",
  "manual",
  "assistant"
] as const
export type CaSource = (typeof CA_SOURCES)[number]
export const CA_STATUSES = ["open", "in_progress", "completed", "verified"] as const
export type CaStatus = (typeof CA_STATUSES)[number]

const FIELDS = fields(`
  id title description source status priority due_date:timestamp completed_at:timestamp
  close_out_notes owner incident_id observation_id audit_item_id inspection_id change_id
`)

export const shapeCorrectiveAction = ({ row }: ShapeInput): ApiRecord =>
  pickFields(row, STAMPS, pickFields(row, FIELDS))
