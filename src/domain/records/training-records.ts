// Training records. NEVER: certificate_file, signature.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["worker_id", "text"],
  ["course", "text"],
  ["provider", "text"],
  ["completed_at", "timestamp"],
  ["expires_at", "timestamp"],
  ["via", "text"]
]

export const shapeTrainingRecord = ({ row }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  ...pickFields(row, STAMPS)
})
