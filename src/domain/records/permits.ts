// Permits to work. NEVER: signature.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["type", "text"],
  ["title", "text"],
  ["description", "text"],
  ["job_site_id", "text"],
  ["location", "text"],
  ["status", "text"],
  ["requested_by", "text"],
  ["approved_by", "text"],
  ["approved_at", "timestamp"],
  ["valid_from", "timestamp"],
  ["valid_to", "timestamp"],
  ["closed_at", "timestamp"]
]

export const shapePermit = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
