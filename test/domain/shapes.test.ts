// Every resource's record for a realistic input, written out by hand: values, key set and
// key order. Timestamps in the fixtures come in mixed forms; here they are all UTC ".sssZ".
import { describe, expect, it } from "vitest"
import { shape } from "../../src/domain/records/index.ts"
import type { Resource } from "../../src/domain/resources.ts"
import { COMPANY, FIXTURES, SITE, SUB, WORKER } from "./fixtures.ts"

const EXPECTED: Readonly<Record<Resource, Record<string, unknown>>> = {
  "job-sites": {
    id: SITE,
    companyId: COMPANY,
    name: "Riverside Tower",
    address: "12 Quay Street",
    city: "Bristol",
    region: "England",
    country: "GB",
    active: true,
    createdAt: "2026-01-05T08:00:00.000Z",
    updatedAt: "2026-02-01T09:30:15.500Z"
  },
  workers: {
    id: WORKER,
    companyId: COMPANY,
    name: "Dana Okafor",
    jobTitle: "Scaffolder",
    employer: "Northside Scaffolding Ltd",
    subcontractorId: SUB,
    jobSiteId: SITE,
    status: "active",
    createdAt: "2026-01-10T07:15:00.000Z",
    updatedAt: "2026-01-10T07:15:00.000Z"
  },
  incidents: {
    id: "1f2e3d4c-5b6a-4978-8877-665544332211",
    companyId: COMPANY,
    reference: "INC-0042",
    type: "injury",
    title: "Laceration while cutting rebar",
    description: "Left hand cut on rebar end during placement.",
    occurredAt: "2026-03-04T03:06:07.089Z",
    jobSiteId: SITE,
    location: "Level 3, east core",
    personName: "Dana Okafor",
    workerId: WORKER,
    bodyPart: "left hand",
    injuryType: "laceration",
    severity: "moderate",
    privacyCase: false,
    oshaRecordable: true,
    status: "investigating",
    reportedBy: "Sam Reyes",
    reportedVia: "app",
    createdAt: "2026-03-04T03:20:00.000Z",
    updatedAt: "2026-03-04T03:25:00.500Z"
  },
  observations: {
    id: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    companyId: COMPANY,
    type: "unsafe_condition",
    title: "Missing toe board on scaffold lift 4",
    description: null,
    jobSiteId: SITE,
    location: "North elevation",
    observedAt: "2026-03-02T19:00:00.000Z",
    observedBy: "Priya Nair",
    reportedVia: "qr",
    status: "open",
    createdAt: "2026-03-02T19:01:02.300Z",
    updatedAt: "2026-03-02T19:01:02.300Z"
  },
  "corrective-actions": {
    id: "c0a1b2c3-d4e5-4f60-8172-839405a6b7c8",
    title: "Fit toe boards to scaffold lift 4",
    description: "Install toe boards along the full north elevation.",
    source: "observation",
    status: "completed",
    priority: "high",
    dueDate: "2026-03-09T17:00:00.000Z",
    completedAt: "2026-03-06T09:45:30.123Z",
    closeOutNotes: "Toe boards fitted and checked.",
    owner: "Priya Nair",
    incidentId: null,
    observationId: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    auditItemId: null,
    inspectionId: null,
    changeId: null,
    createdAt: "2026-03-02T19:05:00.000Z",
    updatedAt: "2026-03-06T09:45:31.000Z"
  },
  audits: {
    id: "b7c6d5e4-f3a2-4b1c-9d0e-8f7a6b5c4d3e",
    companyId: COMPANY,
    title: "Weekly site audit",
    template: "Site audit v3",
    jobSiteId: SITE,
    performedBy: "Sam Reyes",
    performedAt: "2026-03-03T09:00:00.000Z",
    score: 87.5,
    notes: "Housekeeping good; one guardrail gap.",
    via: "offline_upload",
    items: [
      { id: "e1000000-0000-4000-8000-000000000001", item: "Housekeeping", result: "pass", note: "Walkways clear" },
      {
        id: "e2000000-0000-4000-8000-000000000002",
        item: "Guardrails complete",
        result: "fail",
        note: "Gap at stair 2"
      },
      { id: "e3000000-0000-4000-8000-000000000003", item: "First aid kit stocked", result: "na", note: null }
    ],
    createdAt: "2026-03-03T11:00:00.000Z",
    updatedAt: "2026-03-03T11:00:00.000Z"
  },
  inspections: {
    id: "d4c3b2a1-0f9e-4d8c-8b7a-6f5e4d3c2b1a",
    equipment: {
      id: "f0e1d2c3-b4a5-4968-8776-5a4b3c2d1e0f",
      name: "Mobile crane 60t",
      identifier: "CR-060-07",
      category: "lifting",
      jobSite: "Riverside Tower"
    },
    checklist: "Mobile crane pre-use",
    performedBy: "Luis Ortega",
    performedAt: "2026-03-05T06:30:00.000Z",
    outcome: "fail",
    notes: "Hydraulic leak at outrigger.",
    items: [
      { item: "Load chart present", result: "pass", note: "" },
      { item: "Outriggers", result: "fail", note: "Leak at rear left" }
    ],
    createdAt: "2026-03-05T06:45:12.000Z"
  },
  "training-records": {
    id: "7e6d5c4b-3a29-4180-8f7e-6d5c4b3a2918",
    companyId: COMPANY,
    workerId: WORKER,
    course: "Working at height",
    provider: "SafeSkills",
    completedAt: "2026-02-20T16:00:00.000Z",
    expiresAt: "2029-02-20T16:00:00.000Z",
    via: "qr_course",
    createdAt: "2026-02-20T16:05:00.000Z",
    updatedAt: "2026-02-20T16:05:00.000Z"
  },
  changes: {
    id: "2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901",
    companyId: COMPANY,
    title: "Switch to battery-powered hoists",
    description: "Replace diesel hoists on the east core.",
    category: "equipment",
    status: "approved",
    requestedBy: "Sam Reyes",
    approvedBy: "Morgan Lee",
    approvedAt: "2026-02-28T12:00:00.000Z",
    implementedAt: null,
    jobSiteId: SITE,
    createdAt: "2026-02-25T10:00:00.000Z",
    updatedAt: "2026-02-28T12:00:00.000Z"
  },
  permits: {
    id: "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d",
    companyId: COMPANY,
    type: "hot_work",
    title: "Welding on level 3 beams",
    description: "Stick welding of beam connectors.",
    jobSiteId: SITE,
    location: "Level 3, grid C4",
    status: "closed",
    requestedBy: "Luis Ortega",
    approvedBy: "Morgan Lee",
    approvedAt: "2026-03-01T07:00:00.000Z",
    validFrom: "2026-03-01T07:30:00.000Z",
    validTo: "2026-03-01T17:30:00.000Z",
    closedAt: "2026-03-01T16:55:00.000Z",
    createdAt: "2026-02-28T15:00:00.000Z",
    updatedAt: "2026-03-01T16:55:00.000Z"
  },
  policies: {
    id: "8f7e6d5c-4b3a-4291-8a0f-9e8d7c6b5a49",
    companyId: COMPANY,
    title: "Fall protection policy",
    version: "4.1",
    status: "published",
    effectiveAt: "2026-01-01T00:00:00.000Z",
    acknowledgementCount: 37,
    createdAt: "2025-12-15T09:00:00.000Z",
    updatedAt: "2025-12-20T09:00:00.000Z"
  },
  sds: {
    id: "4c5d6e7f-8091-4a2b-bc3d-4e5f60718293",
    companyId: COMPANY,
    productName: "Acetylene",
    manufacturer: "GasCo",
    revisionAt: "2025-06-30T00:00:00.000Z",
    hazardClasses: ["Flammable gas 1", "Gas under pressure"],
    signalWord: "danger",
    jobSiteId: null,
    createdAt: "2025-07-01T00:00:00.000Z",
    updatedAt: "2025-07-01T00:00:00.000Z"
  },
  "risk-assessments": {
    id: "9a8b7c6d-5e4f-4321-8fed-cba987654321",
    companyId: COMPANY,
    title: "Crane lift over public footpath",
    activity: "Lifting steel beams",
    jobSiteId: SITE,
    assessedBy: "Morgan Lee",
    assessedAt: "2026-02-27T10:00:00.000Z",
    reviewAt: null,
    riskLevel: "high",
    hazards: [
      { hazard: "Dropped load", likelihood: 2, severity: 5, controls: "Exclusion zone, banksman" },
      { hazard: "Wind", likelihood: 3, severity: 4, controls: "Stop above 38 km/h" }
    ],
    status: "approved",
    createdAt: "2026-02-27T10:30:00.000Z",
    updatedAt: "2026-02-27T10:30:00.000Z"
  },
  subcontractors: {
    id: SUB,
    companyId: COMPANY,
    name: "Northside Scaffolding Ltd",
    trade: "scaffolding",
    status: "active",
    contactName: "Jo Barnes",
    documents: [
      { id: "d1", kind: "insurance", status: "approved", expiresAt: "2026-12-31T23:59:59.000Z" },
      { id: "d2", kind: "license", status: "pending", expiresAt: null }
    ],
    documentStatus: "pending",
    createdAt: "2025-10-01T00:00:00.000Z",
    updatedAt: "2026-01-01T00:00:00.000Z"
  }
}

describe("shape", () => {
  it.each(Object.keys(EXPECTED) as Resource[])("%s: the record exactly, in readable key order", (resource) => {
    const record = shape(resource, FIXTURES[resource])
    expect(record).toStrictEqual(EXPECTED[resource])
    expect(Object.keys(record)).toEqual(Object.keys(EXPECTED[resource]))
    // what goes over the wire is the same JSON
    expect(JSON.parse(JSON.stringify(record))).toStrictEqual(EXPECTED[resource])
  })

  it("corrective-actions has exactly its documented fields, in their order", () => {
    expect(Object.keys(shape("corrective-actions", FIXTURES["corrective-actions"]))).toEqual([
      "id",
      "title",
      "description",
      "source",
      "status",
      "priority",
      "dueDate",
      "completedAt",
      "closeOutNotes",
      "owner",
      "incidentId",
      "observationId",
      "auditItemId",
      "inspectionId",
      "changeId",
      "createdAt",
      "updatedAt"
    ])
  })

  it("inspections has exactly its documented fields, equipment with exactly its five", () => {
    const record = shape("inspections", FIXTURES.inspections)
    expect(Object.keys(record)).toEqual([
      "id",
      "equipment",
      "checklist",
      "performedBy",
      "performedAt",
      "outcome",
      "notes",
      "items",
      "createdAt"
    ])
    expect(Object.keys(record["equipment"] as object)).toEqual(["id", "name", "identifier", "category", "jobSite"])
  })

  it("companyId on every record but corrective actions and inspections (exactly their documented fields)", () => {
    for (const resource of Object.keys(FIXTURES) as Resource[]) {
      const record = shape(resource, FIXTURES[resource])
      if (resource === "corrective-actions" || resource === "inspections")
        expect(record).not.toHaveProperty("companyId")
      else expect(record["companyId"]).toBe(COMPANY)
    }
  })

  it('a NULL element of a text array is left out, not sent as the text "null"', () => {
    const record = shape("sds", {
      ...FIXTURES.sds,
      row: { ...FIXTURES.sds.row, hazard_classes: ["Flammable gas 1", null] }
    })
    expect(record["hazardClasses"]).toEqual(["Flammable gas 1"])
  })

  it("absent columns become null, not missing keys", () => {
    const record = shape("permits", {
      ...FIXTURES.permits,
      row: { id: "p1", created_at: "2026-01-01", updated_at: "2026-01-01" }
    })
    expect(record).toStrictEqual({
      id: "p1",
      companyId: null,
      type: null,
      title: null,
      description: null,
      jobSiteId: null,
      location: null,
      status: null,
      requestedBy: null,
      approvedBy: null,
      approvedAt: null,
      validFrom: null,
      validTo: null,
      closedAt: null,
      createdAt: "2026-01-01T00:00:00.000Z",
      updatedAt: "2026-01-01T00:00:00.000Z"
    })
  })

  it("audit score: a number from numeric text or a number, null until scored", () => {
    const row = FIXTURES.audits.row
    expect(shape("audits", { ...FIXTURES.audits, row: { ...row, score: 92 } })["score"]).toBe(92)
    expect(shape("audits", { ...FIXTURES.audits, row: { ...row, score: "100" } })["score"]).toBe(100)
    expect(shape("audits", { ...FIXTURES.audits, row: { ...row, score: null } })["score"]).toBeNull()
    expect(() => shape("audits", { ...FIXTURES.audits, row: { ...row, score: "n/a" } })).toThrow(TypeError)
  })

  it("an audit without items has items []", () => {
    expect(shape("audits", { ...FIXTURES.audits, children: [] })["items"]).toEqual([])
  })
})
