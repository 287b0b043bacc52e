// Policies with the number of their acknowledgements. NEVER: document_file (and the
// acknowledgements' signature, which only the count summarises).
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id title version status effective_at:timestamp
`)

export const shapePolicy = ({ row, acknowledgementCount }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  acknowledgementCount,
  ...pickFields(row, STAMPS)
})
