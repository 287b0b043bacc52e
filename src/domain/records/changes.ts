// Management-of-change requests. NEVER: attachments.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["title", "text"],
  ["description", "text"],
  ["category", "text"],
  ["status", "text"],
  ["requested_by", "text"],
  ["approved_by", "text"],
  ["approved_at", "timestamp"],
  ["implemented_at", "timestamp"],
  ["job_site_id", "text"]
]

export const shapeChange = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
