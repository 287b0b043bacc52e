// Safety data sheets. NEVER: file_url, qr_code.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["product_name", "text"],
  ["manufacturer", "text"],
  ["revision_at", "timestamp"],
  ["hazard_classes", "textArray"],
  ["signal_word", "text"],
  ["job_site_id", "text"]
]

export const shapeSds = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
