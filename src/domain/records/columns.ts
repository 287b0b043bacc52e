// Which app columns may leave PostgreSQL. Capture publishes exactly PUBLISHED_COLUMNS, so
// NEVER data (files, photos, signatures, voice notes, workers' phones and e-mails, QR codes,
// anything medical: spec 1) is never replicated at all. Both lists are checked against
// sql/001_app.sql by test/domain/columns.test.ts: every column is in exactly one of them.
// company_id is published (capture needs it for tenancy); records show it as companyId,
// except corrective actions and inspections (exactly spec 2.2 and 2.3).

/** The NEVER columns of app-database.md, per app table (every app table has an entry). */
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

/** Every other column of every app table, in sql/001_app.sql order: the publication's column lists. */
export const PUBLISHED_COLUMNS: Readonly<Record<string, ReadonlyArray<string>>> = {
  companies: ["id", "name", "host", "tier", "api_enabled", "created_at"],
  company_modules: ["company_id", "module", "enabled"],
  users: ["id", "company_id", "name", "email", "role", "created_at"],
  job_sites: ["id", "company_id", "name", "address", "city", "region", "country", "active", "created_at", "updated_at"],
  subcontractors: ["id", "company_id", "name", "trade", "status", "contact_name", "created_at", "updated_at"],
  subcontractor_documents: ["id", "subcontractor_id", "kind", "status", "expires_at", "created_at"],
  workers: [
    "id", "company_id", "name", "job_title", "employer", "subcontractor_id", "job_site_id", "status",
    "created_at", "updated_at"
  ],
  incidents: [
    "id", "company_id", "reference", "type", "title", "description", "occurred_at", "job_site_id", "location",
    "person_name", "worker_id", "body_part", "injury_type", "severity", "privacy_case", "osha_recordable",
    "status", "reported_by", "reported_via", "created_at", "updated_at"
  ],
  observations: [
    "id", "company_id", "type", "title", "description", "job_site_id", "location", "observed_at", "observed_by",
    "reported_via", "status", "created_at", "updated_at"
  ],
  audits: [
    "id", "company_id", "title", "template", "job_site_id", "performed_by", "performed_at", "score", "notes",
    "via", "created_at", "updated_at"
  ],
  audit_items: ["id", "audit_id", "position", "item", "result", "note", "created_at"],
  equipment: ["id", "company_id", "name", "identifier", "category", "job_site_id", "created_at", "updated_at"],
  inspections: [
    "id", "company_id", "equipment_id", "checklist", "performed_by", "performed_at", "outcome", "notes", "via",
    "created_at", "updated_at"
  ],
  inspection_items: ["id", "inspection_id", "position", "item", "result", "note", "created_at"],
  changes: [
    "id", "company_id", "title", "description", "category", "status", "requested_by", "approved_by",
    "approved_at", "implemented_at", "job_site_id", "created_at", "updated_at"
  ],
  corrective_actions: [
    "id", "company_id", "title", "description", "source", "status", "priority", "due_date", "completed_at",
    "close_out_notes", "owner", "incident_id", "observation_id", "audit_item_id", "inspection_id", "change_id",
    "created_at", "updated_at"
  ],
  training_records: [
    "id", "company_id", "worker_id", "course", "provider", "completed_at", "expires_at", "via", "created_at",
    "updated_at"
  ],
  permits: [
    "id", "company_id", "type", "title", "description", "job_site_id", "location", "status", "requested_by",
    "approved_by", "approved_at", "valid_from", "valid_to", "closed_at", "created_at", "updated_at"
  ],
  policies: ["id", "company_id", "title", "version", "status", "effective_at", "created_at", "updated_at"],
  policy_acknowledgements: ["id", "policy_id", "worker_id", "acknowledged_at", "created_at"],
  sds: [
    "id", "company_id", "product_name", "manufacturer", "revision_at", "hazard_classes", "signal_word",
    "job_site_id", "created_at", "updated_at"
  ],
  risk_assessments: [
    "id", "company_id", "title", "activity", "job_site_id", "assessed_by", "assessed_at", "review_at",
    "risk_level", "hazards", "status", "created_at", "updated_at"
  ]
}
