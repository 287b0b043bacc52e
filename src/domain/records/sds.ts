// Safety data sheets. NEVER: file_url, qr_code.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id product_name manufacturer revision_at:timestamp hazard_classes:textArray
  signal_word job_site_id
`)

export const shapeSds = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
