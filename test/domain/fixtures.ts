// Realistic shaper inputs, one per resource, as capture would hand them over (published
// columns only, company_id included). Timestamps come in several of the forms capture
// might produce, so every shaper test also exercises normalisation.
import type { Resource } from "../../src/domain/resources.ts"
import type { Row, ShapeInput } from "../../src/domain/records/types.ts"

export const COMPANY = "0b6f7d1e-2c3a-4e5f-8a9b-1c2d3e4f5a6b"
export const SITE = "5a1e0c3b-7d2f-4b8a-9e6c-0f1d2a3b4c5d"
export const WORKER = "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
export const SUB = "3d2c1b0a-9f8e-4d7c-8b6a-5f4e3d2c1b0a"

const input = (row: Row, extra: Partial<ShapeInput> = {}): ShapeInput => ({
  row,
  children: [],
  acknowledgementCount: 0,
  equipment: null,
  equipmentJobSite: null,
  ...extra
})

export const JOB_SITE_ROW: Row = {
  id: SITE,
  company_id: COMPANY,
  name: "Riverside Tower",
  address: "12 Quay Street",
  city: "Bristol",
  region: "England",
  country: "GB",
  active: true,
  created_at: "2026-01-05 08:00:00+00",
  updated_at: "2026-02-01T09:30:15.5Z"
}

export const FIXTURES: Readonly<Record<Resource, ShapeInput>> = {
  "job-sites": input(JOB_SITE_ROW),
  workers: input({
    id: WORKER,
    company_id: COMPANY,
    name: "Dana Okafor",
    job_title: "Scaffolder",
    employer: "Northside Scaffolding Ltd",
    subcontractor_id: SUB,
    job_site_id: SITE,
    status: "active",
    created_at: "2026-01-10T07:15:00.000123+00:00",
    updated_at: new Date("2026-01-10T07:15:00.000Z")
  }),
  incidents: input({
    id: "1f2e3d4c-5b6a-4978-8877-665544332211",
    company_id: COMPANY,
    reference: "INC-0042",
    type: "injury",
    title: "Laceration while cutting rebar",
    description: "Left hand cut on rebar end during placement.",
    occurred_at: "2026-03-04 05:06:07.089123+02",
    job_site_id: SITE,
    location: "Level 3, east core",
    person_name: "Dana Okafor",
    worker_id: WORKER,
    body_part: "left hand",
    injury_type: "laceration",
    severity: "moderate",
    privacy_case: false,
    osha_recordable: true,
    status: "investigating",
    reported_by: "Sam Reyes",
    reported_via: "app",
    created_at: "2026-03-04T03:20:00Z",
    updated_at: "2026-03-04T03:25:00.5+00:00"
  }),
  observations: input({
    id: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    company_id: COMPANY,
    type: "unsafe_condition",
    title: "Missing toe board on scaffold lift 4",
    description: null,
    job_site_id: SITE,
    location: "North elevation",
    observed_at: "2026-03-02 14:00:00-05",
    observed_by: "Priya Nair",
    reported_via: "qr",
    status: "open",
    created_at: "2026-03-02 19:01:02.3+00",
    updated_at: "2026-03-02 19:01:02.3+00"
  }),
  "corrective-actions": input({
    id: "c0a1b2c3-d4e5-4f60-8172-839405a6b7c8",
    company_id: COMPANY,
    title: "Fit toe boards to scaffold lift 4",
    description: "Install toe boards along the full north elevation.",
    source: "observation",
    status: "completed",
    priority: "high",
    due_date: "2026-03-09T17:00:00+00:00",
    completed_at: "2026-03-06 10:45:30.123456+01",
    close_out_notes: "Toe boards fitted and checked.",
    owner: "Priya Nair",
    incident_id: null,
    observation_id: "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
    audit_item_id: null,
    inspection_id: null,
    change_id: null,
    created_at: "2026-03-02T19:05:00Z",
    updated_at: "2026-03-06T09:45:31Z"
  }),
  audits: input(
    {
      id: "b7c6d5e4-f3a2-4b1c-9d0e-8f7a6b5c4d3e",
      company_id: COMPANY,
      title: "Weekly site audit",
      template: "Site audit v3",
      job_site_id: SITE,
      performed_by: "Sam Reyes",
      performed_at: "2026-03-03 09:00:00+00",
      score: "87.50",
      notes: "Housekeeping good; one guardrail gap.",
      via: "offline_upload",
      created_at: "2026-03-03 11:00:00+00",
      updated_at: "2026-03-03 11:00:00+00"
    },
    {
      // deliberately out of position order
      children: [
        {
          id: "e3000000-0000-4000-8000-000000000003",
          audit_id: "b7c6d5e4-f3a2-4b1c-9d0e-8f7a6b5c4d3e",
          position: 3,
          item: "First aid kit stocked",
          result: "na",
          note: null,
          created_at: "2026-03-03 11:00:00+00"
        },
        {
          id: "e1000000-0000-4000-8000-000000000001",
          audit_id: "b7c6d5e4-f3a2-4b1c-9d0e-8f7a6b5c4d3e",
          position: 1,
          item: "Housekeeping",
          result: "pass",
          note: "Walkways clear",
          created_at: "2026-03-03 11:00:00+00"
        },
        {
          id: "e2000000-0000-4000-8000-000000000002",
          audit_id: "b7c6d5e4-f3a2-4b1c-9d0e-8f7a6b5c4d3e",
          position: 2,
          item: "Guardrails complete",
          result: "fail",
          note: "Gap at stair 2",
          created_at: "2026-03-03 11:00:00+00"
        }
      ]
    }
  ),
  inspections: input(
    {
      id: "d4c3b2a1-0f9e-4d8c-8b7a-6f5e4d3c2b1a",
      company_id: COMPANY,
      equipment_id: "f0e1d2c3-b4a5-4968-8776-5a4b3c2d1e0f",
      checklist: "Mobile crane pre-use",
      performed_by: "Luis Ortega",
      performed_at: "2026-03-05 06:30:00+00",
      outcome: "fail",
      notes: "Hydraulic leak at outrigger.",
      via: "app",
      created_at: "2026-03-05T06:45:12.000000+00:00",
      updated_at: "2026-03-05T06:45:12Z"
    },
    {
      children: [
        {
          id: "i2",
          inspection_id: "d4c3b2a1-0f9e-4d8c-8b7a-6f5e4d3c2b1a",
          position: 2,
          item: "Outriggers",
          result: "fail",
          note: "Leak at rear left",
          created_at: "2026-03-05 06:45:12+00"
        },
        {
          id: "i1",
          inspection_id: "d4c3b2a1-0f9e-4d8c-8b7a-6f5e4d3c2b1a",
          position: 1,
          item: "Load chart present",
          result: "pass",
          note: "",
          created_at: "2026-03-05 06:45:12+00"
        }
      ],
      equipment: {
        id: "f0e1d2c3-b4a5-4968-8776-5a4b3c2d1e0f",
        company_id: COMPANY,
        name: "Mobile crane 60t",
        identifier: "CR-060-07",
        category: "lifting",
        job_site_id: SITE,
        created_at: "2025-11-01 00:00:00+00",
        updated_at: "2025-11-01 00:00:00+00"
      },
      equipmentJobSite: JOB_SITE_ROW
    }
  ),
  "training-records": input({
    id: "7e6d5c4b-3a29-4180-8f7e-6d5c4b3a2918",
    company_id: COMPANY,
    worker_id: WORKER,
    course: "Working at height",
    provider: "SafeSkills",
    completed_at: "2026-02-20 16:00:00+00",
    expires_at: "2029-02-20 16:00:00+00",
    via: "qr_course",
    created_at: "2026-02-20 16:05:00+00",
    updated_at: "2026-02-20 16:05:00+00"
  }),
  changes: input({
    id: "2b3c4d5e-6f70-4182-93a4-b5c6d7e8f901",
    company_id: COMPANY,
    title: "Switch to battery-powered hoists",
    description: "Replace diesel hoists on the east core.",
    category: "equipment",
    status: "approved",
    requested_by: "Sam Reyes",
    approved_by: "Morgan Lee",
    approved_at: "2026-02-28 12:00:00+00",
    implemented_at: null,
    job_site_id: SITE,
    created_at: "2026-02-25 10:00:00+00",
    updated_at: "2026-02-28 12:00:00+00"
  }),
  permits: input({
    id: "6a5b4c3d-2e1f-4a0b-9c8d-7e6f5a4b3c2d",
    company_id: COMPANY,
    type: "hot_work",
    title: "Welding on level 3 beams",
    description: "Stick welding of beam connectors.",
    job_site_id: SITE,
    location: "Level 3, grid C4",
    status: "closed",
    requested_by: "Luis Ortega",
    approved_by: "Morgan Lee",
    approved_at: "2026-03-01 07:00:00+00",
    valid_from: "2026-03-01 07:30:00+00",
    valid_to: "2026-03-01 17:30:00+00",
    closed_at: "2026-03-01 16:55:00+00",
    created_at: "2026-02-28 15:00:00+00",
    updated_at: "2026-03-01 16:55:00+00"
  }),
  policies: input(
    {
      id: "8f7e6d5c-4b3a-4291-8a0f-9e8d7c6b5a49",
      company_id: COMPANY,
      title: "Fall protection policy",
      version: "4.1",
      status: "published",
      effective_at: "2026-01-01 00:00:00+00",
      created_at: "2025-12-15 09:00:00+00",
      updated_at: "2025-12-20 09:00:00+00"
    },
    { acknowledgementCount: 37 }
  ),
  sds: input({
    id: "4c5d6e7f-8091-4a2b-bc3d-4e5f60718293",
    company_id: COMPANY,
    product_name: "Acetylene",
    manufacturer: "GasCo",
    revision_at: "2025-06-30 00:00:00+00",
    hazard_classes: ["Flammable gas 1", "Gas under pressure"],
    signal_word: "danger",
    job_site_id: null,
    created_at: "2025-07-01 00:00:00+00",
    updated_at: "2025-07-01 00:00:00+00"
  }),
  "risk-assessments": input({
    id: "9a8b7c6d-5e4f-4321-8fed-cba987654321",
    company_id: COMPANY,
    title: "Crane lift over public footpath",
    activity: "Lifting steel beams",
    job_site_id: SITE,
    assessed_by: "Morgan Lee",
    assessed_at: "2026-02-27 10:00:00+00",
    review_at: null,
    risk_level: "high",
    hazards: [
      { hazard: "Dropped load", likelihood: 2, severity: 5, controls: "Exclusion zone, banksman" },
      { hazard: "Wind", likelihood: 3, severity: 4, controls: "Stop above 38 km/h" }
    ],
    status: "approved",
    created_at: "2026-02-27 10:30:00+00",
    updated_at: "2026-02-27 10:30:00+00"
  }),
  subcontractors: input(
    {
      id: SUB,
      company_id: COMPANY,
      name: "Northside Scaffolding Ltd",
      trade: "scaffolding",
      status: "active",
      contact_name: "Jo Barnes",
      created_at: "2025-10-01 00:00:00+00",
      updated_at: "2026-01-01 00:00:00+00"
    },
    {
      children: [
        {
          id: "d2",
          subcontractor_id: SUB,
          kind: "license",
          status: "pending",
          expires_at: null,
          created_at: "2025-10-02 00:00:00+00"
        },
        {
          id: "d1",
          subcontractor_id: SUB,
          kind: "insurance",
          status: "approved",
          expires_at: "2026-12-31 23:59:59+00",
          created_at: "2025-10-01 00:00:00+00"
        }
      ]
    }
  )
}
