// Corrective actions: exactly the fields of docs/api.md#corrective-actions, in its order.
// NEVER: evidence_photos, signature.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id title description source status priority due_date:timestamp completed_at:timestamp
  close_out_notes owner incident_id observation_id audit_item_id inspection_id change_id
`)

export const shapeCorrectiveAction = ({ row }: ShapeInput): ApiRecord =>
  pickFields(row, STAMPS, pickFields(row, FIELDS))
