import { describe, expect, it } from "vitest"
import { shape } from "../../../src/domain/records/index.ts"
import type { Row } from "../../../src/domain/records/types.ts"
import { CHILD_RECORDS, RESOURCE_INFO, RESOURCES } from "../../../src/domain/resources.ts"
import { decodeStoredRow, rowFromView, standsFor, VIEW_BACKED } from "../../../src/pipeline/projection/by-view.ts"

const COMPANY = "11111111-1111-4111-8111-111111111111"
const action: Row = {
  id: "22222222-2222-4222-8222-222222222222",
  company_id: COMPANY,
  title: "Fence the pit",
  description: "Loose fence",
  source: "manual",
  status: "open",
  priority: "high",
  due_date: "2026-12-01T00:00:00.000Z",
  completed_at: null,
  close_out_notes: null,
  owner: "Sam",
  incident_id: null,
  observation_id: null,
  audit_item_id: null,
  inspection_id: null,
  change_id: null,
  created_at: "2026-11-01T10:00:00.000Z",
  updated_at: "2026-11-02T10:00:00.000Z"
}
const worker: Row = {
  id: "33333333-3333-4333-8333-333333333333",
  company_id: COMPANY,
  name: "Ana Ruiz",
  job_title: "Rigger",
  employer: null,
  subcontractor_id: null,
  job_site_id: null,
  status: "active",
  created_at: "2026-11-01T10:00:00.000Z",
  updated_at: "2026-11-01T10:00:00.000Z"
}
const recordOf = (resource: "corrective-actions" | "workers" | "incidents", row: Row) =>
  shape(resource, { row, children: [], acknowledgementCount: 0, equipment: null, equipmentJobSite: null })

describe("standsFor and rowFromView", () => {
  it.each([
    ["a corrective action as the app writes it", "corrective_actions", action],
    ["a worker", "workers", worker]
  ] as const)("%s: its body reads back as the row", (_, table, row) => {
    const resource = VIEW_BACKED.get(table)!
    const record = recordOf(resource as "workers", row)
    expect(standsFor(table, record, COMPANY, row)).toBe(true)
    expect(rowFromView(table, String(row.id), COMPANY, JSON.stringify(record))).toEqual(row)
    expect(decodeStoredRow(table, String(row.id), `v${JSON.stringify(record)}`, COMPANY)).toEqual(row)
  })

  it.each([
    ["a number in a text column (the API sends it as text)", { owner: 42 }],
    ["a timestamp the API writes otherwise", { due_date: "2026-12-01 00:00:00+00" }],
    ["a column the row lacks", { owner: undefined }],
    ["a column more than the table's", { extra: "x" }]
  ])("not when %s", (_, change) => {
    const row: Record<string, unknown> = { ...action, ...change }
    for (const [k, v] of Object.entries(change)) if (v === undefined) delete row[k]
    expect(standsFor("corrective_actions", recordOf("corrective-actions", row), COMPANY, row)).toBe(false)
  })

  it("not for another company than the view's", () => {
    expect(standsFor("corrective_actions", recordOf("corrective-actions", action), "other", action)).toBe(false)
  })

  it("not for a privacy case, whose body withholds fields", () => {
    const incident: Row = {
      id: "44444444-4444-4444-8444-444444444444",
      company_id: COMPANY,
      reference: "INC-1",
      type: "injury",
      title: "Slipped",
      description: "Wet floor",
      occurred_at: "2026-11-01T10:00:00.000Z",
      job_site_id: null,
      location: "Bay 4",
      person_name: "Alex Doe",
      worker_id: null,
      body_part: null,
      injury_type: null,
      severity: "minor",
      privacy_case: false,
      osha_recordable: false,
      status: "open",
      reported_by: null,
      reported_via: null,
      created_at: "2026-11-01T10:00:00.000Z",
      updated_at: "2026-11-01T10:00:00.000Z"
    }
    expect(standsFor("incidents", recordOf("incidents", incident), COMPANY, incident)).toBe(true)
    const secret = { ...incident, privacy_case: true }
    expect(standsFor("incidents", recordOf("incidents", secret), COMPANY, secret)).toBe(false)
  })

  it("never for a table with a parent row (inspections) or without a record", () => {
    expect(VIEW_BACKED.has("inspections")).toBe(false)
    expect(VIEW_BACKED.has("audit_items")).toBe(false)
    expect(VIEW_BACKED.has("companies")).toBe(false)
    expect(standsFor("inspections", {}, COMPANY, {})).toBe(false)
  })

  it("a body that is not its record's stands for no row; one lacking a column reads without it", () => {
    const id = String(action.id)
    expect(rowFromView("corrective_actions", id, COMPANY, '{"ghost":true}')).toBeNull()
    expect(rowFromView("corrective_actions", id, COMPANY, JSON.stringify({ id: "another" }))).toBeNull()
    // A view written before a column was published: the row without it, nothing made up.
    const { priority: _, ...older } = recordOf("corrective-actions", action)
    const { priority: __, ...without } = action
    expect(rowFromView("corrective_actions", id, COMPANY, JSON.stringify(older))).toEqual(without)
    // Kept by the trigger whatever it held: read with what it has.
    expect(decodeStoredRow("corrective_actions", id, 'v{"title":"t"}', COMPANY)).toEqual({
      company_id: COMPANY,
      title: "t"
    })
  })

  it("its resources are those whose record's row hangs under no other (the code's one list)", () => {
    for (const [table, resource] of VIEW_BACKED) {
      expect(RESOURCE_INFO[resource].table).toBe(table)
      expect(CHILD_RECORDS.has(resource)).toBe(false)
    }
    expect(VIEW_BACKED.size + CHILD_RECORDS.size).toBe(RESOURCES.length)
  })
})
