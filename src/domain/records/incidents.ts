// Incidents. NEVER: photos, voice_note_url, signature, work_restrictions.
import { fields, pickFields, readField, STAMPS } from "./fields.ts"
import type { ApiRecord, Row, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id reference type title description occurred_at:timestamp job_site_id location
  person_name worker_id body_part injury_type severity privacy_case:boolean
  osha_recordable:boolean status reported_by reported_via
`)

/** Withheld on a privacy case, as on an exported OSHA log (docs/privacy.md#privacy-cases). */
export const PRIVACY_CASE_FIELDS = [
  "personName",
  "workerId",
  "location",
  "description",
  "bodyPart",
  "injuryType"
] as const

/** An incident's API JSON with the privacy-case fields withheld (null), keys in place;
 *  text that is not an incident object comes back unchanged. */
export const redactPrivacyCase = (json: string): string => {
  const record = JSON.parse(json) as unknown
  if (typeof record !== "object" || record === null || Array.isArray(record)) return json
  const r = record as Record<string, unknown>
  if (PRIVACY_CASE_FIELDS.every((f) => r[f] === null || r[f] === undefined)) return json
  for (const field of PRIVACY_CASE_FIELDS) if (field in r) r[field] = null
  return JSON.stringify(r)
}

/** The app columns behind PRIVACY_CASE_FIELDS. */
export const PRIVACY_CASE_COLUMNS = [
  "person_name",
  "worker_id",
  "location",
  "description",
  "body_part",
  "injury_type"
] as const

/**
 * Whether an incidents change ends a privacy case while leaving out a detail the service never
 * kept (PostgreSQL sends a value stored out of line as unchanged when an update leaves it): the
 * row must be read whole from the app before the record is shaped from it.
 */
export const leavesOutDetails = (before: Row | null, data: Row): boolean => {
  if (before?.privacy_case !== true || (data.privacy_case ?? before.privacy_case) === true) return false
  for (const c of PRIVACY_CASE_COLUMNS) if (data[c] === undefined && c in before) return true
  return false
}

/**
 * An incidents row as the service may keep it: a privacy case's person's details are not kept
 * (null), as nothing the service holds may carry them (docs/privacy.md#privacy-cases). A column
 * the row lacks stays absent. The same row, unchanged, when it is not a privacy case.
 */
export const redactPrivacyRow = (row: Row): Row => {
  if (row.privacy_case !== true) return row
  let out: Record<string, unknown> | null = null
  for (const c of PRIVACY_CASE_COLUMNS) {
    if (!(c in row) || row[c] === null) continue
    out ??= { ...row }
    out[c] = null
  }
  return out ?? row
}

/**
 * An incidents row without the person's details at all (their columns left out): what the
 * service keeps of a row it only compares by the event rules (a held record's row before it was
 * held), which never read them.
 */
export const withoutPersonalDetails = (row: Row): Row => {
  if (!PRIVACY_CASE_COLUMNS.some((c) => c in row)) return row
  const out: Record<string, unknown> = { ...row }
  for (const c of PRIVACY_CASE_COLUMNS) delete out[c]
  return out
}

export const shapeIncident = ({ row }: ShapeInput): ApiRecord => {
  const record = pickFields(row, STAMPS, pickFields(row, FIELDS))
  if (readField(row, "privacy_case", "boolean") === true) {
    for (const field of PRIVACY_CASE_FIELDS) record[field] = null
  }
  return record
}
