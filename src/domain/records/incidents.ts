// Incidents. NEVER: photos, voice_note_url, signature, work_restrictions.
import { pickFields, readField, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["reference", "text"],
  ["type", "text"],
  ["title", "text"],
  ["description", "text"],
  ["occurred_at", "timestamp"],
  ["job_site_id", "text"],
  ["location", "text"],
  ["person_name", "text"],
  ["worker_id", "text"],
  ["body_part", "text"],
  ["injury_type", "text"],
  ["severity", "text"],
  ["privacy_case", "boolean"],
  ["osha_recordable", "boolean"],
  ["status", "text"],
  ["reported_by", "text"],
  ["reported_via", "text"]
]

/** Withheld on a privacy case, as on an exported OSHA log (spec 1). */
export const PRIVACY_CASE_FIELDS = ["personName", "workerId", "location", "description", "bodyPart", "injuryType"] as const

export const shapeIncident = ({ row }: ShapeInput): ApiRecord => {
  const record = { ...pickFields(row, FIELDS), ...pickFields(row, STAMPS) }
  if (readField(row, "privacy_case", "boolean") === true) {
    for (const field of PRIVACY_CASE_FIELDS) record[field] = null
  }
  return record
}
