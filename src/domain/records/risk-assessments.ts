// Risk assessments; hazards (jsonb, an array) is passed through as given. No NEVER columns.
import { pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["title", "text"],
  ["activity", "text"],
  ["job_site_id", "text"],
  ["assessed_by", "text"],
  ["assessed_at", "timestamp"],
  ["review_at", "timestamp"],
  ["risk_level", "text"],
  ["hazards", "json"],
  ["status", "text"]
]

export const shapeRiskAssessment = ({ row }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  ...pickFields(row, STAMPS)
})
