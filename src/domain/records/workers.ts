// Workers on the roster. NEVER: phone, email, photo_url, qr_code, work_restrictions, medical_notes.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["name", "text"],
  ["job_title", "text"],
  ["employer", "text"],
  ["subcontractor_id", "text"],
  ["job_site_id", "text"],
  ["status", "text"]
]

export const shapeWorker = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
