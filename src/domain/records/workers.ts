// Workers on the roster. NEVER: phone, email, photo_url, qr_code, work_restrictions, medical_notes.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id name job_title employer subcontractor_id job_site_id status
`)

export const shapeWorker = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
