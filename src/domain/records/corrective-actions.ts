// Corrective actions: exactly the fields of spec 2.2, in its order. NEVER: evidence_photos, signature.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["title", "text"],
  ["description", "text"],
  ["source", "text"],
  ["status", "text"],
  ["priority", "text"],
  ["due_date", "timestamp"],
  ["completed_at", "timestamp"],
  ["close_out_notes", "text"],
  ["owner", "text"],
  ["incident_id", "text"],
  ["observation_id", "text"],
  ["audit_item_id", "text"],
  ["inspection_id", "text"],
  ["change_id", "text"]
]

export const shapeCorrectiveAction = ({ row }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  ...pickFields(row, STAMPS)
})
