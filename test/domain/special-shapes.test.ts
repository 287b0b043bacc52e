// The shapes that are not the plain camelCase of one row (docs/api.md#records).
import { describe, expect, it } from "vitest"
import { documentStatus, shape, viewMeta } from "../../src/domain/records/index.ts"
import type { Row } from "../../src/domain/records/types.ts"
import { FIXTURES, JOB_SITE_ROW } from "./fixtures.ts"
import { WITHHELD_IN_A_PRIVACY_CASE } from "../support/views.ts"

describe("incident privacy case", () => {
  it("nulls the person, location, description, body part and injury type, and nothing else", () => {
    const input = { ...FIXTURES.incidents, row: { ...FIXTURES.incidents.row, privacy_case: true } }
    // The record as it is outside a privacy case (shapes.test.ts pins it field by field), with
    // exactly those fields withheld.
    expect(shape("incidents", input)).toStrictEqual({
      ...shape("incidents", FIXTURES.incidents),
      ...WITHHELD_IN_A_PRIVACY_CASE,
      privacyCase: true
    })
  })

  it("the withheld values appear nowhere in the JSON", () => {
    const json = JSON.stringify(
      shape("incidents", { ...FIXTURES.incidents, row: { ...FIXTURES.incidents.row, privacy_case: true } })
    )
    for (const secret of [
      "Dana Okafor",
      "Level 3, east core",
      "Left hand cut",
      "left hand",
      "laceration",
      "9c8b7a6d"
    ]) {
      expect(json).not.toContain(secret)
    }
  })

  it("privacy_case in pgoutput text form ('t') counts too", () => {
    const record = shape("incidents", { ...FIXTURES.incidents, row: { ...FIXTURES.incidents.row, privacy_case: "t" } })
    expect(record["personName"]).toBeNull()
    expect(record["privacyCase"]).toBe(true)
  })
})

describe("subcontractor documentStatus", () => {
  const doc = (id: string, status: string): Row => ({
    id,
    kind: "insurance",
    status,
    expires_at: null,
    created_at: "2026-01-01"
  })
  it.each([
    { statuses: [], expected: "missing" },
    { statuses: ["approved"], expected: "compliant" },
    { statuses: ["approved", "approved"], expected: "compliant" },
    { statuses: ["pending"], expected: "pending" },
    { statuses: ["approved", "pending"], expected: "pending" },
    { statuses: ["rejected"], expected: "non_compliant" },
    { statuses: ["expired"], expected: "non_compliant" },
    { statuses: ["approved", "expired"], expected: "non_compliant" },
    { statuses: ["pending", "rejected", "approved"], expected: "non_compliant" }
  ])("$statuses -> $expected", ({ statuses, expected }) => {
    const docs = statuses.map((s, i) => doc(`d${i}`, s))
    expect(documentStatus(docs)).toBe(expected)
    expect(shape("subcontractors", { ...FIXTURES.subcontractors, children: docs })["documentStatus"]).toBe(expected)
  })

  it("documents are ordered by createdAt (any timestamp form), then id", () => {
    const children: Row[] = [
      { id: "b", kind: "other", status: "approved", expires_at: null, created_at: "2026-01-02 00:00:00+00" },
      { id: "c", kind: "other", status: "approved", expires_at: null, created_at: "2026-01-01T23:00:00-02:00" }, // 01:00Z on the 2nd
      { id: "a", kind: "other", status: "approved", expires_at: null, created_at: "2026-01-02T00:00:00Z" },
      { id: "z", kind: "other", status: "approved", expires_at: null, created_at: "2025-12-31 12:00:00+00" }
    ]
    const documents = shape("subcontractors", { ...FIXTURES.subcontractors, children })["documents"] as Array<{
      id: string
    }>
    expect(documents.map((d) => d.id)).toEqual(["z", "a", "b", "c"])
  })

  it("a subcontractor without documents: documents [] and missing", () => {
    const record = shape("subcontractors", { ...FIXTURES.subcontractors, children: [] })
    expect(record["documents"]).toEqual([])
    expect(record["documentStatus"]).toBe("missing")
  })
})

describe("items in position order", () => {
  it("audit items: by position, numerically (10 after 9), ties by createdAt then id", () => {
    const item = (id: string, position: number, created_at = "2026-03-03 11:00:00+00"): Row => ({
      id,
      audit_id: "a",
      position,
      item: `item ${id}`,
      result: "pass",
      note: null,
      created_at
    })
    const children = [
      item("p10", 10),
      item("p9", 9),
      item("tie-b", 2),
      item("tie-a", 2),
      item("tie-early", 2, "2026-03-03 10:00:00+00"),
      item("p1", 1)
    ]
    const items = shape("audits", { ...FIXTURES.audits, children })["items"] as Array<{ id: string }>
    expect(items.map((i) => i.id)).toEqual(["p1", "tie-early", "tie-a", "tie-b", "p9", "p10"])
  })

  it("inspection items: by position, each only {item, result, note}", () => {
    const children: Row[] = [
      { id: "x3", inspection_id: "i", position: 3, item: "Horn", result: "pass", note: null, created_at: "2026-03-05" },
      {
        id: "x1",
        inspection_id: "i",
        position: 1,
        item: "Brakes",
        result: "fail",
        note: "Soft pedal",
        created_at: "2026-03-05"
      },
      {
        id: "x2",
        inspection_id: "i",
        position: 2,
        item: "Lights",
        result: "na",
        note: "Daytime",
        created_at: "2026-03-05"
      }
    ]
    expect(shape("inspections", { ...FIXTURES.inspections, children })["items"]).toStrictEqual([
      { item: "Brakes", result: "fail", note: "Soft pedal" },
      { item: "Lights", result: "na", note: "Daytime" },
      { item: "Horn", result: "pass", note: null }
    ])
  })

  it("does not reorder the caller's array", () => {
    const children = [...FIXTURES.audits.children]
    shape("audits", { ...FIXTURES.audits, children })
    expect(children.map((c) => c["position"])).toEqual([3, 1, 2])
  })
})

describe("inspection equipment", () => {
  it("is null when the inspection has no equipment row", () => {
    const record = shape("inspections", {
      ...FIXTURES.inspections,
      row: { ...FIXTURES.inspections.row, equipment_id: null },
      equipment: null,
      equipmentJobSite: null
    })
    expect(record["equipment"]).toBeNull()
    expect(Object.keys(record)).toContain("equipment")
  })

  it("has jobSite null when the equipment has no job site; absent identifier/category are null", () => {
    const equipment = { id: "e1", name: "Ladder 3", identifier: null, category: null, job_site_id: null }
    expect(
      shape("inspections", { ...FIXTURES.inspections, equipment, equipmentJobSite: null })["equipment"]
    ).toStrictEqual({
      id: "e1",
      name: "Ladder 3",
      identifier: null,
      category: null,
      jobSite: null
    })
  })

  it("jobSite is the job site's name, not its id", () => {
    const site = { ...JOB_SITE_ROW, name: "Harbour Depot" }
    const equipment = shape("inspections", { ...FIXTURES.inspections, equipmentJobSite: site })["equipment"] as Record<
      string,
      unknown
    >
    expect(equipment["jobSite"]).toBe("Harbour Depot")
  })
})

describe("policies", () => {
  it("acknowledgementCount is the count given, 0 included", () => {
    expect(shape("policies", { ...FIXTURES.policies, acknowledgementCount: 0 })["acknowledgementCount"]).toBe(0)
    expect(shape("policies", FIXTURES.policies)["acknowledgementCount"]).toBe(37)
  })
})

describe("risk assessment hazards", () => {
  const withHazards = (hazards: unknown) =>
    shape("risk-assessments", {
      ...FIXTURES["risk-assessments"],
      row: { ...FIXTURES["risk-assessments"].row, hazards }
    })

  it("each entry carries exactly hazard, likelihood, severity and controls: anything else the app stores stays behind", () => {
    const hazards = [
      {
        hazard: "Noise",
        likelihood: 4,
        severity: 2,
        controls: "Ear defenders",
        photoUrl: "https://files.example/NEVER.jpg",
        extra: { nested: [1, 2] }
      },
      { hazard: "Falls", likelihood: 2, severity: 5, controls: ["Harness", "Edge protection"] }
    ]
    const record = withHazards(hazards)
    expect(record["hazards"]).toStrictEqual([
      { hazard: "Noise", likelihood: 4, severity: 2, controls: "Ear defenders" },
      { hazard: "Falls", likelihood: 2, severity: 5, controls: ["Harness", "Edge protection"] }
    ])
    expect(JSON.stringify(record)).not.toContain("NEVER")
  })

  it("missing keys are null; entries that are not objects are dropped; no array is null", () => {
    expect(withHazards([{ hazard: "Dust" }, "text", null, [1]])["hazards"]).toStrictEqual([
      { hazard: "Dust", likelihood: null, severity: null, controls: null }
    ])
    expect(withHazards(null)["hazards"]).toBeNull()
    expect(withHazards({ hazard: "not an array" })["hazards"]).toBeNull()
  })
})

describe("viewMeta", () => {
  it("name for workers and job-sites", () => {
    expect(viewMeta("workers", shape("workers", FIXTURES.workers))).toEqual({
      createdAt: "2026-01-10T07:15:00.000Z",
      name: "Dana Okafor",
      status: null
    })
    expect(viewMeta("job-sites", shape("job-sites", FIXTURES["job-sites"]))).toEqual({
      createdAt: "2026-01-05T08:00:00.000Z",
      name: "Riverside Tower",
      status: null
    })
  })

  it("status for corrective-actions", () => {
    expect(viewMeta("corrective-actions", shape("corrective-actions", FIXTURES["corrective-actions"]))).toEqual({
      createdAt: "2026-03-02T19:05:00.000Z",
      name: null,
      status: "completed"
    })
  })

  it("neither for other resources, even ones with a name or status field", () => {
    expect(viewMeta("subcontractors", shape("subcontractors", FIXTURES.subcontractors))).toEqual({
      createdAt: "2025-10-01T00:00:00.000Z",
      name: null,
      status: null
    })
    expect(viewMeta("permits", shape("permits", FIXTURES.permits))).toEqual({
      createdAt: "2026-02-28T15:00:00.000Z",
      name: null,
      status: null
    })
  })

  it("refuses a record without createdAt", () => {
    expect(() => viewMeta("workers", { id: "w", name: "x" })).toThrow(/createdAt/)
  })
})

describe("redactPrivacyCase (stored copies of an incident that became a privacy case)", () => {
  it("withholds exactly the privacy fields, keeping every key in its place", async () => {
    const { redactPrivacyCase, PRIVACY_CASE_FIELDS } = await import("../../src/domain/records/incidents.ts")
    const record = {
      id: "i1",
      title: "Cut",
      description: "Long text",
      personName: "Pat",
      workerId: "w1",
      location: "Bay",
      bodyPart: "hand",
      injuryType: "cut",
      severity: "minor",
      privacyCase: false
    }
    const out = JSON.parse(redactPrivacyCase(JSON.stringify(record))) as Record<string, unknown>
    expect(Object.keys(out)).toEqual(Object.keys(record))
    for (const f of PRIVACY_CASE_FIELDS) expect(out[f]).toBeNull()
    expect(out).toMatchObject({ id: "i1", title: "Cut", severity: "minor" })
  })

  it("leaves an already withheld record byte for byte, and non-objects alone", async () => {
    const { redactPrivacyCase } = await import("../../src/domain/records/incidents.ts")
    const done = JSON.stringify({ id: "i1", personName: null, location: null })
    expect(redactPrivacyCase(done)).toBe(done)
    expect(redactPrivacyCase("[1,2]")).toBe("[1,2]")
  })
})
