// Deleted means gone: the copies of a deleted record that stored events carry (the events feed,
// retries, Send Again, replays) keep only what identifies it, as a privacy case keeps only what
// is not the person's (docs/privacy.md, "Deleted records"). Keys stay in place, every other
// value null, so a receiver's parser meets the shape it knows and tells the record by its id.
import type { Resource } from "../resources.ts"

/** What identifies a record: its id, its company where it shows one, and an incident's reference (the app's INC-…). */
export const IDENTIFIER_FIELDS: Readonly<Record<Resource, ReadonlyArray<string>>> = {
  incidents: ["id", "companyId", "reference"],
  observations: ["id", "companyId"],
  // Exactly their listed fields (docs/api.md#records): no companyId.
  "corrective-actions": ["id"],
  inspections: ["id"],
  audits: ["id", "companyId"],
  "training-records": ["id", "companyId"],
  workers: ["id", "companyId"],
  "job-sites": ["id", "companyId"],
  changes: ["id", "companyId"],
  permits: ["id", "companyId"],
  policies: ["id", "companyId"],
  sds: ["id", "companyId"],
  "risk-assessments": ["id", "companyId"],
  subcontractors: ["id", "companyId"]
}

/**
 * A record's API JSON reduced to its identifiers: every other field null (nested lists and
 * objects too), keys in their place. Text that is not a record object, or is reduced already,
 * comes back unchanged (the same string), so a caller writes only what changed.
 */
export const scrubToIdentifiers = (resource: Resource, json: string): string => {
  const record = JSON.parse(json) as unknown
  if (typeof record !== "object" || record === null || Array.isArray(record)) return json
  const keep = IDENTIFIER_FIELDS[resource]
  const r = record as Record<string, unknown>
  let changed = false
  for (const field of Object.keys(r)) {
    if (keep.includes(field) || r[field] === null) continue
    r[field] = null
    changed = true
  }
  return changed ? JSON.stringify(r) : json
}
