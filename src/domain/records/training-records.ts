// Training records. NEVER: certificate_file, signature.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id worker_id course provider completed_at:timestamp expires_at:timestamp via
`)

export const shapeTrainingRecord = ({ row }: ShapeInput): ApiRecord => pickFields(row, STAMPS, pickFields(row, FIELDS))
