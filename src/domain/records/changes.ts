// Management-of-change requests. NEVER: attachments.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id title description category status requested_by approved_by
  approved_at:timestamp implemented_at:timestamp job_site_id
`)

export const shapeChange = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
