// The mirror's row codec (src/pipeline/projection/mirror-codec.ts): every table's rows round
// trip by position, rows stored as objects (earlier versions) and shorter arrays (stored
// before a column was appended) still read, and rows that do not hold exactly their table's
// columns are kept by name rather than read back with values made up.
import { describe, expect, it } from "vitest"
import { APP_COLUMNS, type ColumnType } from "../../../src/domain/records/columns.ts"
import { PUBLISHED_COLUMNS } from "../../../src/domain/records/index.ts"
import { decodeMirrorData, encodeMirrorData, MirrorDataError } from "../../../src/pipeline/projection/mirror-codec.ts"

/**
 * Every table's columns in the order the mirror first stored them by position. Rows in
 * databases already hold values at these places: a list may only grow at its end.
 */
const STORED_ORDER: Readonly<Record<string, ReadonlyArray<string>>> = {
  companies: ["id", "name", "host", "tier", "api_enabled", "created_at"],
  company_modules: ["company_id", "module", "enabled"],
  users: ["id", "company_id", "name", "email", "role", "created_at"],
  job_sites: ["id", "company_id", "name", "address", "city", "region", "country", "active", "created_at", "updated_at"],
  subcontractors: ["id", "company_id", "name", "trade", "status", "contact_name", "created_at", "updated_at"],
  subcontractor_documents: ["id", "subcontractor_id", "kind", "status", "expires_at", "created_at"],
  workers: [
    "id",
    "company_id",
    "name",
    "job_title",
    "employer",
    "subcontractor_id",
    "job_site_id",
    "status",
    "created_at",
    "updated_at"
  ],
  incidents: [
    "id",
    "company_id",
    "reference",
    "type",
    "title",
    "description",
    "occurred_at",
    "job_site_id",
    "location",
    "person_name",
    "worker_id",
    "body_part",
    "injury_type",
    "severity",
    "privacy_case",
    "osha_recordable",
    "status",
    "reported_by",
    "reported_via",
    "created_at",
    "updated_at"
  ],
  observations: [
    "id",
    "company_id",
    "type",
    "title",
    "description",
    "job_site_id",
    "location",
    "observed_at",
    "observed_by",
    "reported_via",
    "status",
    "created_at",
    "updated_at"
  ],
  audits: [
    "id",
    "company_id",
    "title",
    "template",
    "job_site_id",
    "performed_by",
    "performed_at",
    "score",
    "notes",
    "via",
    "created_at",
    "updated_at"
  ],
  audit_items: ["id", "audit_id", "position", "item", "result", "note", "created_at"],
  equipment: ["id", "company_id", "name", "identifier", "category", "job_site_id", "created_at", "updated_at"],
  inspections: [
    "id",
    "company_id",
    "equipment_id",
    "checklist",
    "performed_by",
    "performed_at",
    "outcome",
    "notes",
    "via",
    "created_at",
    "updated_at"
  ],
  inspection_items: ["id", "inspection_id", "position", "item", "result", "note", "created_at"],
  changes: [
    "id",
    "company_id",
    "title",
    "description",
    "category",
    "status",
    "requested_by",
    "approved_by",
    "approved_at",
    "implemented_at",
    "job_site_id",
    "created_at",
    "updated_at"
  ],
  corrective_actions: [
    "id",
    "company_id",
    "title",
    "description",
    "source",
    "status",
    "priority",
    "due_date",
    "completed_at",
    "close_out_notes",
    "owner",
    "incident_id",
    "observation_id",
    "audit_item_id",
    "inspection_id",
    "change_id",
    "created_at",
    "updated_at"
  ],
  training_records: [
    "id",
    "company_id",
    "worker_id",
    "course",
    "provider",
    "completed_at",
    "expires_at",
    "via",
    "created_at",
    "updated_at"
  ],
  permits: [
    "id",
    "company_id",
    "type",
    "title",
    "description",
    "job_site_id",
    "location",
    "status",
    "requested_by",
    "approved_by",
    "approved_at",
    "valid_from",
    "valid_to",
    "closed_at",
    "created_at",
    "updated_at"
  ],
  policies: ["id", "company_id", "title", "version", "status", "effective_at", "created_at", "updated_at"],
  policy_acknowledgements: ["id", "policy_id", "worker_id", "acknowledged_at", "created_at"],
  sds: [
    "id",
    "company_id",
    "product_name",
    "manufacturer",
    "revision_at",
    "hazard_classes",
    "signal_word",
    "job_site_id",
    "created_at",
    "updated_at"
  ],
  risk_assessments: [
    "id",
    "company_id",
    "title",
    "activity",
    "job_site_id",
    "assessed_by",
    "assessed_at",
    "review_at",
    "risk_level",
    "hazards",
    "status",
    "created_at",
    "updated_at"
  ]
}

/** A value of each type as the service reads it (src/pipeline/capture/normalize.ts), by column index. */
const sample = (type: ColumnType, i: number): unknown => {
  switch (type) {
    case "uuid":
      return `0000000${i % 10}-1111-4222-8333-44444444444${i % 10}`
    case "text":
      // Quotes, a backslash, non-ASCII and the record separator the mirror's writes pack rows with.
      return `v${i} "quoted" \\ é ✓ \u001e end`
    case "timestamptz":
      return `2026-11-${String(10 + (i % 18)).padStart(2, "0")}T08:30:00.123Z`
    case "boolean":
      return i % 2 === 0
    case "integer":
      return i * 7
    case "numeric":
      return 87.25
    case "text[]":
      return ["flammable", "toxic, acute", ""]
    case "jsonb":
      return [{ hazard: "fall", controls: ["harness", null], score: 3.5, nested: { ok: true } }]
  }
}

const fullRow = (table: string): Record<string, unknown> =>
  Object.fromEntries(Object.entries(APP_COLUMNS[table]!).map(([column, type], i) => [column, sample(type, i)]))

/** Every other column null (the first kept: a row always has its key). */
const sparseRow = (table: string): Record<string, unknown> =>
  Object.fromEntries(Object.entries(fullRow(table)).map(([column, v], i) => [column, i % 2 === 1 ? null : v]))

describe("the mirror's stored order", () => {
  it("every table's columns keep the places rows were stored with: a column is only ever appended", () => {
    for (const [table, stored] of Object.entries(STORED_ORDER)) {
      expect(PUBLISHED_COLUMNS[table], table).toBeDefined()
      expect(PUBLISHED_COLUMNS[table]!.slice(0, stored.length), table).toEqual(stored)
    }
  })

  it("a corrective action stored by position reads back under today's column names", () => {
    const stored =
      '["6f1c1f0e-2b4a-4c1e-9a51-0d6b1f1a2b3c","a0c5d1f2-3e4b-4a6c-8d7e-9f0a1b2c3d4e","Guard rail","Rail loose on level 3",' +
      '"incident","open","high","2026-12-01T00:00:00.000Z",null,null,"Sam Lee","b1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",' +
      'null,null,null,null,"2026-11-20T09:00:00.000Z","2026-11-21T10:15:00.500Z"]'
    expect(decodeMirrorData("corrective_actions", stored)).toEqual({
      id: "6f1c1f0e-2b4a-4c1e-9a51-0d6b1f1a2b3c",
      company_id: "a0c5d1f2-3e4b-4a6c-8d7e-9f0a1b2c3d4e",
      title: "Guard rail",
      description: "Rail loose on level 3",
      source: "incident",
      status: "open",
      priority: "high",
      due_date: "2026-12-01T00:00:00.000Z",
      completed_at: null,
      close_out_notes: null,
      owner: "Sam Lee",
      incident_id: "b1d2e3f4-a5b6-4c7d-8e9f-0a1b2c3d4e5f",
      observation_id: null,
      audit_item_id: null,
      inspection_id: null,
      change_id: null,
      created_at: "2026-11-20T09:00:00.000Z",
      updated_at: "2026-11-21T10:15:00.500Z"
    })
  })
})

describe("the mirror's row codec", () => {
  it.each(Object.keys(APP_COLUMNS))(
    "%s: a whole row round trips by position, with its columns' names nowhere",
    (table) => {
      for (const row of [fullRow(table), sparseRow(table)]) {
        const text = encodeMirrorData(table, row)
        expect(text.startsWith("[")).toBe(true)
        expect(JSON.parse(text)).toHaveLength(PUBLISHED_COLUMNS[table]!.length)
        // Packed with chr(30) between rows (src/pipeline/projection/columns.ts): never raw inside one.
        expect(text.includes("\u001e")).toBe(false)
        for (const column of PUBLISHED_COLUMNS[table]!) expect(text.includes(`"${column}"`), column).toBe(false)
        expect(text.length).toBeLessThan(JSON.stringify(row).length)
        const back = decodeMirrorData(table, text)
        expect(back).toEqual(row)
        expect(Object.keys(back)).toEqual(PUBLISHED_COLUMNS[table])
      }
    }
  )

  it("numerics as the service reads them: numbers, and the text of a value with no number (NaN)", () => {
    const row = { ...fullRow("audits"), score: "NaN" }
    expect(decodeMirrorData("audits", encodeMirrorData("audits", row))).toEqual(row)
    const zero = { ...fullRow("audits"), score: 0 }
    expect(decodeMirrorData("audits", encodeMirrorData("audits", zero))).toEqual(zero)
  })

  it.each(Object.keys(APP_COLUMNS))("%s: a row stored as an object (an earlier version) reads as it was", (table) => {
    const row = sparseRow(table)
    expect(decodeMirrorData(table, JSON.stringify(row))).toEqual(row)
    // Missing columns stay missing, in whatever order it was written.
    const [first, ...rest] = PUBLISHED_COLUMNS[table]!
    const partial = Object.fromEntries(rest.reverse().map((c) => [c, row[c]]))
    const read = decodeMirrorData(table, JSON.stringify(partial))
    expect(read).toEqual(partial)
    expect(first! in read).toBe(false)
  })

  it("a shorter array (stored before columns were appended) reads without the columns it lacks", () => {
    const row = fullRow("incidents")
    const values = PUBLISHED_COLUMNS.incidents!.map((c) => row[c])
    const read = decodeMirrorData("incidents", JSON.stringify(values.slice(0, 5)))
    expect(read).toEqual({
      id: row.id,
      company_id: row.company_id,
      reference: row.reference,
      type: row.type,
      title: row.title
    })
    expect("description" in read).toBe(false)
    expect(decodeMirrorData("incidents", "[]")).toEqual({})
  })

  it("values past the end of the list (stored by a version that reads more columns) are not read", () => {
    const row = fullRow("policies")
    const values = [...PUBLISHED_COLUMNS.policies!.map((c) => row[c]), "a later column"]
    expect(decodeMirrorData("policies", JSON.stringify(values))).toEqual(row)
  })

  it("a row that does not hold exactly its table's columns is kept by name, nothing made up or lost", () => {
    const row = fullRow("observations")
    // A column missing (renamed in the app): read back without it, not as null.
    const { location: _, ...missing } = row
    const a = encodeMirrorData("observations", missing)
    expect(a.startsWith("{")).toBe(true)
    const readA = decodeMirrorData("observations", a)
    expect(readA).toEqual(missing)
    expect("location" in readA).toBe(false)
    // A value left out (undefined: one the decoder rejected): left out, as JSON leaves it.
    const b = decodeMirrorData("observations", encodeMirrorData("observations", { ...row, status: undefined }))
    expect("status" in b).toBe(false)
    expect(b).toEqual({ ...row, status: undefined })
    // A column not in the list: kept.
    const extra = { ...row, headline: "kept" }
    const c = encodeMirrorData("observations", extra)
    expect(c.startsWith("{")).toBe(true)
    expect(decodeMirrorData("observations", c)).toEqual(extra)
    // The same number of keys, one of them not in the list.
    const swapped = { ...missing, headline: "kept" }
    expect(decodeMirrorData("observations", encodeMirrorData("observations", swapped))).toEqual(swapped)
  })

  it("a table with no column list: rows kept by name; one stored by position cannot be read", () => {
    const row = { id: "x", name: "y" }
    expect(decodeMirrorData("not_a_table", encodeMirrorData("not_a_table", row))).toEqual(row)
    expect(() => decodeMirrorData("not_a_table", '["x","y"]')).toThrow(MirrorDataError)
  })

  it("encoding a row after one that fell back, or after another table's, carries nothing over", () => {
    const row = fullRow("equipment")
    encodeMirrorData("equipment", { ...row, category: undefined })
    encodeMirrorData("equipment", sparseRow("equipment"))
    expect(decodeMirrorData("equipment", encodeMirrorData("equipment", row))).toEqual(row)
  })
})
