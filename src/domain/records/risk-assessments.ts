// Risk assessments. No NEVER columns. hazards (jsonb) is an array of {hazard, likelihood,
// severity, controls}: each entry is picked by that allow-list like any row, so a key the app
// adds inside it (a photo's address, say) never leaves with the record.
import { fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id title activity job_site_id assessed_by assessed_at:timestamp
  review_at:timestamp risk_level status
`)

const HAZARD_KEYS = ["hazard", "likelihood", "severity", "controls"] as const

/** The hazards as the API gives them: each entry with exactly the four keys (absent: null). */
export const shapeHazards = (value: unknown): ReadonlyArray<Record<string, unknown>> | null => {
  if (!Array.isArray(value)) return null
  return value.flatMap((entry) => {
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return []
    const e = entry as Record<string, unknown>
    return [Object.fromEntries(HAZARD_KEYS.map((k) => [k, e[k] ?? null]))]
  })
}

export const shapeRiskAssessment = ({ row }: ShapeInput): ApiRecord => {
  const { status, ...rest } = pickFields(row, FIELDS)
  // hazards keeps its place in the record (after riskLevel, before status)
  return { ...rest, hazards: shapeHazards(row["hazards"]), status, ...pickFields(row, STAMPS) }
}
