// Job sites. NEVER: qr_code.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["name", "text"],
  ["address", "text"],
  ["city", "text"],
  ["region", "text"],
  ["country", "text"],
  ["active", "boolean"]
]

export const shapeJobSite = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
