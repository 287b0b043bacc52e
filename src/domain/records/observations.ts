// Safety observations. NEVER: photos, voice_note_url.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id type title description job_site_id location observed_at:timestamp
  observed_by reported_via status
`)

export const shapeObservation = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
