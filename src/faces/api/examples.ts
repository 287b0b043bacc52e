// Examples for the OpenAPI document: one record of each resource, as the API returns it.
// They are annotations only (records.ts, events-api.ts, hooks.ts, deletions.ts, definition.ts);
// a test validates every example of the document against its own schema, so they cannot
// drift from the shapes.

const COMPANY = "5b1f0c3e-8d2a-4f6b-9c71-2e4a6d8f0a13"
const SITE = "9a3c5e7f-1b2d-4c6e-8f0a-3b5d7f9e1c24"
const WORKER = "2c4e6a8b-0d1f-4a3c-9e5b-7d9f1b3d5e68"

export const INCIDENT_EXAMPLE = {
  id: "0f8e2a4c-6b1d-4e3f-a5c7-9d1b3f5a7c90",
  companyId: COMPANY,
  reference: "INC-1042",
  type: "near_miss",
  title: "Ladder slipped on wet floor",
  description: "The ladder footing slid on the wet loading bay floor; nobody fell.",
  occurredAt: "2026-03-04T09:12:00.000Z",
  jobSiteId: SITE,
  location: "Loading bay 2",
  personName: "Sam Rivera",
  workerId: WORKER,
  bodyPart: null,
  injuryType: null,
  severity: "minor",
  privacyCase: false,
  oshaRecordable: false,
  status: "open",
  reportedBy: "Dana Lee",
  reportedVia: "app",
  createdAt: "2026-03-04T09:20:31.512Z",
  updatedAt: "2026-03-04T09:20:31.512Z"
} as const

export const OBSERVATION_EXAMPLE = {
  id: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
  companyId: COMPANY,
  type: "unsafe_condition",
  title: "Guard rail missing on mezzanine",
  description: null,
  jobSiteId: SITE,
  location: "Mezzanine, north side",
  observedAt: "2026-03-05T14:03:00.000Z",
  observedBy: "Priya Nair",
  reportedVia: "qr",
  status: "open",
  createdAt: "2026-03-05T14:05:12.004Z",
  updatedAt: "2026-03-05T14:05:12.004Z"
} as const

export const CORRECTIVE_ACTION_EXAMPLE = {
  id: "3e5a7c9e-1f2b-4d4f-8a6c-8e0a2c4e6f81",
  title: "Install a guard rail on the mezzanine",
  description: "Fit a 1.1 m rail with toe board along the open edge.",
  source: "observation",
  status: "completed",
  priority: "high",
  dueDate: "2026-03-12T00:00:00.000Z",
  completedAt: "2026-03-10T16:40:00.000Z",
  closeOutNotes: "Rail fitted and inspected.",
  owner: "Jordan Blake",
  incidentId: null,
  observationId: "1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d",
  auditItemId: null,
  inspectionId: null,
  changeId: null,
  createdAt: "2026-03-05T15:00:00.000Z",
  updatedAt: "2026-03-10T16:40:02.318Z"
} as const

export const AUDIT_EXAMPLE = {
  id: "4f6b8d0f-2a3c-4e5a-9b7d-9f1b3d5f7a92",
  companyId: COMPANY,
  title: "Monthly site walk",
  template: "Site walk (general)",
  jobSiteId: SITE,
  performedBy: "Dana Lee",
  performedAt: "2026-03-02T08:30:00.000Z",
  score: 87.5,
  notes: null,
  via: "app",
  items: [
    { id: "5a7c9e1a-3b4d-4f6b-8c8e-0a2c4e6a8b03", item: "Exits clear", result: "pass", note: null },
    {
      id: "6b8d0f2b-4c5e-4a7c-9d9f-1b3d5f7b9c14",
      item: "Guard rails in place",
      result: "fail",
      note: "Mezzanine rail missing"
    }
  ],
  createdAt: "2026-03-02T09:01:44.870Z",
  updatedAt: "2026-03-02T09:01:44.870Z"
} as const

export const INSPECTION_EXAMPLE = {
  id: "7c9e1a3c-5d6f-4b8d-8e0a-2c4e6a8c0d25",
  equipment: {
    id: "8d0f2b4d-6e7a-4c9e-9f1b-3d5f7b9d1e36",
    name: "Forklift 3",
    identifier: "FL-003",
    category: "Forklifts",
    jobSite: "North warehouse"
  },
  checklist: "Forklift pre-use",
  performedBy: "Sam Rivera",
  performedAt: "2026-03-06T06:45:00.000Z",
  outcome: "fail",
  notes: "Parking brake does not hold.",
  items: [
    { item: "Horn works", result: "pass", note: null },
    { item: "Parking brake holds", result: "fail", note: "Rolls on the ramp" }
  ],
  createdAt: "2026-03-06T06:51:09.233Z"
} as const

export const TRAINING_RECORD_EXAMPLE = {
  id: "9e1a3c5e-7f8b-4d0f-8a2c-4e6a8c0e2f47",
  companyId: COMPANY,
  workerId: WORKER,
  course: "Working at height",
  provider: "SafeStart Training",
  completedAt: "2026-02-20T15:00:00.000Z",
  expiresAt: "2028-02-20T00:00:00.000Z",
  via: "training_page",
  createdAt: "2026-02-20T15:10:27.650Z",
  updatedAt: "2026-02-20T15:10:27.650Z"
} as const

export const WORKER_EXAMPLE = {
  id: WORKER,
  companyId: COMPANY,
  name: "Sam Rivera",
  jobTitle: "Forklift operator",
  employer: null,
  subcontractorId: null,
  jobSiteId: SITE,
  status: "active",
  createdAt: "2025-11-03T10:00:00.000Z",
  updatedAt: "2026-01-15T12:30:00.000Z"
} as const

export const JOB_SITE_EXAMPLE = {
  id: SITE,
  companyId: COMPANY,
  name: "North warehouse",
  address: "12 Harbour Road",
  city: "Leeds",
  region: "West Yorkshire",
  country: "GB",
  active: true,
  createdAt: "2025-06-01T08:00:00.000Z",
  updatedAt: "2025-06-01T08:00:00.000Z"
} as const

export const CHANGE_EXAMPLE = {
  id: "a1b3c5d7-e9f0-4a2b-8c4d-6e8f0a2b4c58",
  companyId: COMPANY,
  title: "Replace racking in aisle 4",
  description: "Swap the damaged pallet racking for a new system rated 1,500 kg per level.",
  category: "Equipment",
  status: "approved",
  requestedBy: "Jordan Blake",
  approvedBy: "Dana Lee",
  approvedAt: "2026-03-03T11:00:00.000Z",
  implementedAt: null,
  jobSiteId: SITE,
  createdAt: "2026-02-27T09:15:00.000Z",
  updatedAt: "2026-03-03T11:00:04.121Z"
} as const

export const PERMIT_EXAMPLE = {
  id: "b2c4d6e8-f0a1-4b3c-9d5e-7f9a1b3c5d69",
  companyId: COMPANY,
  type: "hot_work",
  title: "Welding on the roof frame",
  description: null,
  jobSiteId: SITE,
  location: "Roof, bay 6",
  status: "closed",
  requestedBy: "Alex Moreau",
  approvedBy: "Dana Lee",
  approvedAt: "2026-03-07T07:30:00.000Z",
  validFrom: "2026-03-07T08:00:00.000Z",
  validTo: "2026-03-07T17:00:00.000Z",
  closedAt: "2026-03-07T16:20:00.000Z",
  createdAt: "2026-03-06T15:00:00.000Z",
  updatedAt: "2026-03-07T16:20:01.007Z"
} as const

export const POLICY_EXAMPLE = {
  id: "c3d5e7f9-a1b2-4c4d-8e6f-8a0b2c4d6e70",
  companyId: COMPANY,
  title: "Working at height policy",
  version: "3.1",
  status: "published",
  effectiveAt: "2026-01-01T00:00:00.000Z",
  acknowledgementCount: 42,
  createdAt: "2025-12-10T10:00:00.000Z",
  updatedAt: "2025-12-20T10:00:00.000Z"
} as const

export const SDS_EXAMPLE = {
  id: "d4e6f8a0-b2c3-4d5e-9f7a-9b1c3d5e7f81",
  companyId: COMPANY,
  productName: "Acetone, technical grade",
  manufacturer: "Northchem Ltd",
  revisionAt: "2025-09-01T00:00:00.000Z",
  hazardClasses: ["Flammable liquid 2", "Eye irritation 2"],
  signalWord: "danger",
  jobSiteId: SITE,
  createdAt: "2025-09-15T13:00:00.000Z",
  updatedAt: "2025-09-15T13:00:00.000Z"
} as const

export const RISK_ASSESSMENT_EXAMPLE = {
  id: "e5f7a9b1-c3d4-4e6f-8a8b-0c2d4e6f8a92",
  companyId: COMPANY,
  title: "Roof frame welding",
  activity: "Hot work at height",
  jobSiteId: SITE,
  assessedBy: "Dana Lee",
  assessedAt: "2026-03-05T10:00:00.000Z",
  reviewAt: "2026-09-05T00:00:00.000Z",
  riskLevel: "high",
  hazards: [
    {
      hazard: "Fall from the roof edge",
      likelihood: 2,
      severity: 5,
      controls: ["Edge protection", "Harness on a fixed anchor"]
    },
    { hazard: "Sparks igniting debris", likelihood: 3, severity: 3, controls: "Fire watch for 60 minutes after work" }
  ],
  status: "approved",
  createdAt: "2026-03-05T10:30:00.000Z",
  updatedAt: "2026-03-05T11:00:00.000Z"
} as const

export const SUBCONTRACTOR_EXAMPLE = {
  id: "f6a8b0c2-d4e5-4f7a-9b9c-1d3e5f7a9b03",
  companyId: COMPANY,
  name: "Moreau Steel Erectors",
  trade: "Structural steel",
  status: "active",
  contactName: "Alex Moreau",
  documents: [
    {
      id: "a7b9c1d3-e5f6-4a8b-8c0d-2e4f6a8b0c14",
      kind: "insurance",
      status: "approved",
      expiresAt: "2026-12-31T00:00:00.000Z"
    },
    { id: "b8c0d2e4-f6a7-4b9c-9d1e-3f5a7b9c1d25", kind: "safety_program", status: "pending", expiresAt: null }
  ],
  documentStatus: "pending",
  createdAt: "2025-10-01T09:00:00.000Z",
  updatedAt: "2026-02-11T14:00:00.000Z"
} as const

export const DELETION_EXAMPLE = {
  resource: "incidents",
  id: "0f8e2a4c-6b1d-4e3f-a5c7-9d1b3f5a7c90",
  deletedAt: "2026-03-08T10:15:42.317Z"
} as const

export const HOOK_EXAMPLE = {
  id: "c9d1e3f5-a7b8-4c0d-8e2f-4a6b8c0d2e36",
  name: "incident.created",
  url: "https://hooks.example.com/safety/incidents",
  event: "incident.created",
  active: true,
  createdAt: "2026-03-01T12:00:00.000Z"
} as const

export const CREATE_HOOK_EXAMPLE = {
  url: "https://hooks.example.com/safety/incidents",
  event: "incident.created"
} as const

export const API_INDEX_EXAMPLE = {
  company: { id: COMPANY, name: "Acme Construction" },
  key: { id: "d0e2f4a6-b8c9-4d1e-8f3a-5b7c9d1e3f47", name: "BI export", expiresAt: null, webhooks: true },
  resources: [
    { name: "incidents", path: "/api/v1/incidents" },
    { name: "corrective-actions", path: "/api/v1/corrective-actions" }
  ],
  events: ["incident.created", "corrective_action.created", "corrective_action.closed"]
} as const

const ATTEMPT_EXAMPLES = [
  {
    number: 1,
    startedAt: "2026-03-04T09:20:32.001Z",
    durationMs: 10000,
    status: null,
    errorKind: "timeout",
    error: "no answer within 10 s"
  },
  {
    number: 2,
    startedAt: "2026-03-04T09:35:32.114Z",
    durationMs: 87,
    status: 503,
    errorKind: "http",
    error: "http 503"
  }
] as const

export const HOOK_DELIVERY_EXAMPLE = {
  id: "6f1a3c5e-7b9d-4f2a-8c4e-6a8c0e2a4c68",
  subscriptionId: HOOK_EXAMPLE.id,
  eventId: "7b0c2f59-1a60-4a0e-9d6c-3b1f3c1f2b10",
  event: "incident.created",
  status: "pending",
  heldReason: null,
  createdAt: "2026-03-04T09:20:31.998Z",
  attemptCount: 2,
  lastAttemptAt: "2026-03-04T09:35:32.114Z",
  nextAttemptAt: "2026-03-04T10:35:32.201Z",
  finishedAt: null,
  attempts: ATTEMPT_EXAMPLES
} as const

export const HOOK_DELIVERY_DETAIL_EXAMPLE = {
  ...HOOK_DELIVERY_EXAMPLE,
  attempts: [
    { ...ATTEMPT_EXAMPLES[0], response: null },
    { ...ATTEMPT_EXAMPLES[1], response: "Service Unavailable" }
  ]
} as const

export const HOOK_RECOVERY_EXAMPLE = {
  id: "8d0f2b4d-6e8a-4c1e-9f3b-5d7f9b1d3f59",
  subscriptionId: HOOK_EXAMPLE.id,
  state: "running",
  since: "2026-03-04T00:00:00.000Z",
  until: "2026-03-05T08:00:00.000Z",
  createdAt: "2026-03-05T08:00:00.000Z",
  finishedAt: null,
  matched: 42,
  queued: 7,
  skippedDelivered: 35,
  skippedInFlight: 0,
  progress: { sent: 3, inEngine: 1, skipped: 0, remaining: 4 },
  waiting: null
} as const
