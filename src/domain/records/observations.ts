// Safety observations. NEVER: photos, voice_note_url.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["type", "text"],
  ["title", "text"],
  ["description", "text"],
  ["job_site_id", "text"],
  ["location", "text"],
  ["observed_at", "timestamp"],
  ["observed_by", "text"],
  ["reported_via", "text"],
  ["status", "text"]
]

export const shapeObservation = ({ row }: ShapeInput): ApiRecord => ({ ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) })
