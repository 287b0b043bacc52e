// What a shaper receives: mirror rows of the app tables, already normalised by capture.
// Keys are the app's column names (snake_case) of the published columns only: NEVER
// columns are not published, but shapers still pick fields explicitly (defence in depth).
// Values: uuid/text -> string, boolean, integer and numeric -> number, timestamptz -> ISO
// string (shapers re-normalise to UTC with milliseconds), text[] -> string[], jsonb -> JSON.
export type Row = Readonly<Record<string, unknown>>

export interface ShapeInput {
  /** The record's own row. */
  readonly row: Row
  /** audit_items (audits), inspection_items (inspections), subcontractor_documents
   *  (subcontractors), in any order; empty for other resources. */
  readonly children: ReadonlyArray<Row>
  /** policies: number of policy_acknowledgements rows; 0 for others. */
  readonly acknowledgementCount: number
  /** inspections: the equipment row (null when the inspection has none or it is gone). */
  readonly equipment: Row | null
  /** inspections: the job site row of that equipment (for equipment.jobSite, its name). */
  readonly equipmentJobSite: Row | null
}

/** An API record: exactly what GET /api/v1/<resource>/<id> returns under data. */
export type ApiRecord = Readonly<Record<string, unknown>>
