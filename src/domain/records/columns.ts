// Which app columns may leave PostgreSQL. Capture publishes exactly PUBLISHED_COLUMNS, so
// NEVER data (files, photos, signatures, voice notes, workers' phones and e-mails, QR codes,
// anything medical: docs/privacy.md#never-sent) is never replicated at all. Both lists are checked against
// sql/demo/app.sql by test/domain/columns.test.ts: every column is in exactly one of them.
// company_id is published (capture needs it for tenancy); records show it as companyId,
// except corrective actions and inspections (which carry exactly their listed fields: docs/api.md#records).

/** The NEVER columns (docs/privacy.md#never-columns), per app table (every app table has an entry). */
export const NEVER_COLUMNS: Readonly<Record<string, ReadonlyArray<string>>> = {
  companies: [],
  company_modules: [],
  users: [],
  job_sites: ["qr_code"],
  subcontractors: ["contact_phone", "contact_email"],
  subcontractor_documents: ["file_url"],
  workers: ["phone", "email", "photo_url", "qr_code", "work_restrictions", "medical_notes"],
  incidents: ["photos", "voice_note_url", "signature", "work_restrictions"],
  observations: ["photos", "voice_note_url"],
  audits: ["signature"],
  audit_items: ["photos"],
  equipment: ["qr_code"],
  inspections: ["signature", "photos"],
  inspection_items: ["photo"],
  changes: ["attachments"],
  corrective_actions: ["evidence_photos", "signature"],
  training_records: ["certificate_file", "signature"],
  permits: ["signature"],
  policies: ["document_file"],
  policy_acknowledgements: ["signature"],
  sds: ["file_url", "qr_code"],
  risk_assessments: []
}

/** The kinds of column type the service can read; `contract.ts` says which server types fit each. */
export type ColumnType = "uuid" | "text" | "timestamptz" | "boolean" | "integer" | "numeric" | "text[]" | "jsonb"

/**
 * Every other column of every app table with the type the service reads it as, in
 * sql/demo/app.sql order: the contract checked at start, and the publication's column lists.
 * The mirror stores a row's values in this order (src/pipeline/projection/mirror-codec.ts):
 * a new column goes at the end of its table; reordering or removing one misreads stored rows.
 */
export const APP_COLUMNS: Readonly<Record<string, Readonly<Record<string, ColumnType>>>> = {
  companies: {
    id: "uuid",
    name: "text",
    host: "text",
    tier: "text",
    api_enabled: "boolean",
    created_at: "timestamptz"
  },
  company_modules: { company_id: "uuid", module: "text", enabled: "boolean" },
  users: { id: "uuid", company_id: "uuid", name: "text", email: "text", role: "text", created_at: "timestamptz" },
  job_sites: {
    id: "uuid",
    company_id: "uuid",
    name: "text",
    address: "text",
    city: "text",
    region: "text",
    country: "text",
    active: "boolean",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  subcontractors: {
    id: "uuid",
    company_id: "uuid",
    name: "text",
    trade: "text",
    status: "text",
    contact_name: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  subcontractor_documents: {
    id: "uuid",
    subcontractor_id: "uuid",
    kind: "text",
    status: "text",
    expires_at: "timestamptz",
    created_at: "timestamptz"
  },
  workers: {
    id: "uuid",
    company_id: "uuid",
    name: "text",
    job_title: "text",
    employer: "text",
    subcontractor_id: "uuid",
    job_site_id: "uuid",
    status: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  incidents: {
    id: "uuid",
    company_id: "uuid",
    reference: "text",
    type: "text",
    title: "text",
    description: "text",
    occurred_at: "timestamptz",
    job_site_id: "uuid",
    location: "text",
    person_name: "text",
    worker_id: "uuid",
    body_part: "text",
    injury_type: "text",
    severity: "text",
    privacy_case: "boolean",
    osha_recordable: "boolean",
    status: "text",
    reported_by: "text",
    reported_via: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  observations: {
    id: "uuid",
    company_id: "uuid",
    type: "text",
    title: "text",
    description: "text",
    job_site_id: "uuid",
    location: "text",
    observed_at: "timestamptz",
    observed_by: "text",
    reported_via: "text",
    status: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  audits: {
    id: "uuid",
    company_id: "uuid",
    title: "text",
    template: "text",
    job_site_id: "uuid",
    performed_by: "text",
    performed_at: "timestamptz",
    score: "numeric",
    notes: "text",
    via: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  audit_items: {
    id: "uuid",
    audit_id: "uuid",
    position: "integer",
    item: "text",
    result: "text",
    note: "text",
    created_at: "timestamptz"
  },
  equipment: {
    id: "uuid",
    company_id: "uuid",
    name: "text",
    identifier: "text",
    category: "text",
    job_site_id: "uuid",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  inspections: {
    id: "uuid",
    company_id: "uuid",
    equipment_id: "uuid",
    checklist: "text",
    performed_by: "text",
    performed_at: "timestamptz",
    outcome: "text",
    notes: "text",
    via: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  inspection_items: {
    id: "uuid",
    inspection_id: "uuid",
    position: "integer",
    item: "text",
    result: "text",
    note: "text",
    created_at: "timestamptz"
  },
  changes: {
    id: "uuid",
    company_id: "uuid",
    title: "text",
    description: "text",
    category: "text",
    status: "text",
    requested_by: "text",
    approved_by: "text",
    approved_at: "timestamptz",
    implemented_at: "timestamptz",
    job_site_id: "uuid",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  corrective_actions: {
    id: "uuid",
    company_id: "uuid",
    title: "text",
    description: "text",
    source: "text",
    status: "text",
    priority: "text",
    due_date: "timestamptz",
    completed_at: "timestamptz",
    close_out_notes: "text",
    owner: "text",
    incident_id: "uuid",
    observation_id: "uuid",
    audit_item_id: "uuid",
    inspection_id: "uuid",
    change_id: "uuid",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  training_records: {
    id: "uuid",
    company_id: "uuid",
    worker_id: "uuid",
    course: "text",
    provider: "text",
    completed_at: "timestamptz",
    expires_at: "timestamptz",
    via: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  permits: {
    id: "uuid",
    company_id: "uuid",
    type: "text",
    title: "text",
    description: "text",
    job_site_id: "uuid",
    location: "text",
    status: "text",
    requested_by: "text",
    approved_by: "text",
    approved_at: "timestamptz",
    valid_from: "timestamptz",
    valid_to: "timestamptz",
    closed_at: "timestamptz",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  policies: {
    id: "uuid",
    company_id: "uuid",
    title: "text",
    version: "text",
    status: "text",
    effective_at: "timestamptz",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  policy_acknowledgements: {
    id: "uuid",
    policy_id: "uuid",
    worker_id: "uuid",
    acknowledged_at: "timestamptz",
    created_at: "timestamptz"
  },
  sds: {
    id: "uuid",
    company_id: "uuid",
    product_name: "text",
    manufacturer: "text",
    revision_at: "timestamptz",
    hazard_classes: "text[]",
    signal_word: "text",
    job_site_id: "uuid",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  },
  risk_assessments: {
    id: "uuid",
    company_id: "uuid",
    title: "text",
    activity: "text",
    job_site_id: "uuid",
    assessed_by: "text",
    assessed_at: "timestamptz",
    review_at: "timestamptz",
    risk_level: "text",
    hazards: "jsonb",
    status: "text",
    created_at: "timestamptz",
    updated_at: "timestamptz"
  }
}

/** The publication's column lists: every column the service reads, per app table. */
export const PUBLISHED_COLUMNS: Readonly<Record<string, ReadonlyArray<string>>> = Object.fromEntries(
  Object.entries(APP_COLUMNS).map(([table, columns]) => [table, Object.keys(columns)])
)
