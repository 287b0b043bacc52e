// Permits to work. NEVER: signature.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id type title description job_site_id location status requested_by approved_by
  approved_at:timestamp valid_from:timestamp valid_to:timestamp closed_at:timestamp
`)

export const shapePermit = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
