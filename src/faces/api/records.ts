// The 14 record shapes as the API returns them (docs/api.md#records), for the OpenAPI
// document. Handlers never encode records through these schemas: the stored views are
// already this JSON and are sent as they are. Tests check every record served against the
// document generated from here, so the schemas and the shapers cannot drift apart.
import { Schema } from "effect"
import { RESOURCES, type Resource } from "../../domain/resources.ts"
import { CA_SOURCES, CA_STATUSES } from "../../domain/records/corrective-actions.ts"
import { IDENTIFIER_FIELDS } from "../../domain/records/deleted.ts"
import {
  AUDIT_EXAMPLE,
  CHANGE_EXAMPLE,
  CORRECTIVE_ACTION_EXAMPLE,
  INCIDENT_EXAMPLE,
  INSPECTION_EXAMPLE,
  JOB_SITE_EXAMPLE,
  OBSERVATION_EXAMPLE,
  PERMIT_EXAMPLE,
  POLICY_EXAMPLE,
  RISK_ASSESSMENT_EXAMPLE,
  SDS_EXAMPLE,
  SUBCONTRACTOR_EXAMPLE,
  TRAINING_RECORD_EXAMPLE,
  WORKER_EXAMPLE
} from "./examples.ts"

const Id = Schema.String.annotate({ description: "Record identifier (a UUID, as a string)" })
const Text = Schema.String
const Nullable = <S extends Schema.Top>(s: S) => Schema.NullOr(s)

const TIMESTAMP_PATTERN = "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}Z$"
const Timestamp = Schema.String.check(
  Schema.makeFilter(
    (s: string) => new RegExp(TIMESTAMP_PATTERN).test(s) || "must be an ISO 8601 UTC timestamp with milliseconds",
    {
      toJsonSchema: () => ({ format: "date-time", pattern: TIMESTAMP_PATTERN })
    }
  )
).annotate({ description: "ISO 8601 timestamp in UTC with milliseconds" })

const Stamps = { createdAt: Timestamp, updatedAt: Timestamp }
const CompanyId = Schema.String.annotate({ description: "The company the record belongs to (a UUID, as a string)" })

/** A company's record: its id and company first, its own fields, the stamps last. */
const companyRecord = <const Fields extends Schema.Struct.Fields>(
  identifier: string,
  description: string,
  example: unknown,
  fields: Fields
) => {
  const record = Schema.Struct({ id: Id, companyId: CompanyId, ...fields, ...Stamps })
  // Every example is validated against its schema in the document (test/client/schema.test.ts).
  return record.annotate({ identifier, description, examples: [example as typeof record.Type] })
}
const Via = Schema.Literals(["app", "qr", "assistant"])
const ItemResult = Schema.Literals(["pass", "fail", "na"])

const INCIDENT_DESCRIPTION =
  "An incident, injury, illness or near miss. On a privacy case personName, workerId, location, description, bodyPart and injuryType are null."

export const Incident = companyRecord("Incident", INCIDENT_DESCRIPTION, INCIDENT_EXAMPLE, {
  reference: Text,
  type: Schema.Literals(["injury", "illness", "near_miss", "property_damage", "environmental"]),
  title: Text,
  description: Nullable(Text),
  occurredAt: Timestamp,
  jobSiteId: Nullable(Id),
  location: Nullable(Text),
  personName: Nullable(Text),
  workerId: Nullable(Id),
  bodyPart: Nullable(Text),
  injuryType: Nullable(Text),
  severity: Schema.Literals(["minor", "moderate", "serious", "critical"]),
  privacyCase: Schema.Boolean,
  oshaRecordable: Schema.Boolean,
  status: Schema.Literals(["open", "investigating", "closed"]),
  reportedBy: Nullable(Text),
  reportedVia: Via
})

export const Observation = companyRecord("Observation", "A safety observation", OBSERVATION_EXAMPLE, {
  type: Schema.Literals(["unsafe_act", "unsafe_condition", "safe_behavior", "near_miss"]),
  title: Text,
  description: Nullable(Text),
  jobSiteId: Nullable(Id),
  location: Nullable(Text),
  observedAt: Timestamp,
  observedBy: Nullable(Text),
  reportedVia: Via,
  status: Schema.Literals(["open", "closed"])
})

export const CorrectiveAction = Schema.Struct({
  id: Id,
  title: Text,
  description: Nullable(Text),
  source: Schema.Literals(CA_SOURCES),
  status: Schema.Literals(CA_STATUSES),
  priority: Schema.Literals(["low", "medium", "high", "critical"]),
  dueDate: Nullable(Timestamp),
  completedAt: Nullable(Timestamp).annotate({ description: "null until completed" }),
  closeOutNotes: Nullable(Text),
  owner: Nullable(Text),
  incidentId: Nullable(Id),
  observationId: Nullable(Id),
  auditItemId: Nullable(Id),
  inspectionId: Nullable(Id),
  changeId: Nullable(Id),
  ...Stamps
}).annotate({
  identifier: "CorrectiveAction",
  description: "A corrective action",
  examples: [CORRECTIVE_ACTION_EXAMPLE]
})

export const AuditItem = Schema.Struct({
  id: Id,
  item: Text,
  result: ItemResult,
  note: Nullable(Text)
}).annotate({ identifier: "AuditItem" })

export const Audit = companyRecord("Audit", "A site audit with its items and a score", AUDIT_EXAMPLE, {
  title: Text,
  template: Nullable(Text),
  jobSiteId: Nullable(Id),
  performedBy: Nullable(Text),
  performedAt: Timestamp,
  score: Nullable(Schema.Number.check(Schema.isBetween({ minimum: 0, maximum: 100 }))).annotate({
    description: "0 to 100; null until scored"
  }),
  notes: Nullable(Text),
  via: Schema.Literals(["app", "offline_upload"]),
  items: Schema.Array(AuditItem).annotate({ description: "In checklist order" })
})

export const InspectionEquipment = Schema.Struct({
  id: Id,
  name: Text,
  identifier: Nullable(Text),
  category: Nullable(Text),
  jobSite: Nullable(Text).annotate({ description: "The name of the equipment's job site" })
}).annotate({ identifier: "InspectionEquipment" })

export const InspectionItem = Schema.Struct({
  item: Text,
  result: ItemResult,
  note: Nullable(Text)
}).annotate({ identifier: "InspectionItem" })

export const Inspection = Schema.Struct({
  id: Id,
  equipment: Nullable(InspectionEquipment).annotate({ description: "null when the inspection has no equipment" }),
  checklist: Nullable(Text).annotate({ description: "Checklist name" }),
  performedBy: Nullable(Text),
  performedAt: Timestamp,
  outcome: Schema.Literals(["pass", "fail", "needs_attention"]),
  notes: Nullable(Text),
  items: Schema.Array(InspectionItem).annotate({ description: "In checklist order" }),
  createdAt: Timestamp
}).annotate({
  identifier: "Inspection",
  description: "An equipment inspection",
  examples: [INSPECTION_EXAMPLE]
})

export const TrainingRecord = companyRecord("TrainingRecord", "A training record", TRAINING_RECORD_EXAMPLE, {
  workerId: Nullable(Id),
  course: Text,
  provider: Nullable(Text),
  completedAt: Timestamp,
  expiresAt: Nullable(Timestamp),
  via: Schema.Literals(["training_page", "qr_course"])
})

export const Worker = companyRecord(
  "Worker",
  "A worker on the roster (no phone, e-mail, photo or medical data)",
  WORKER_EXAMPLE,
  {
    name: Text,
    jobTitle: Nullable(Text),
    employer: Nullable(Text),
    subcontractorId: Nullable(Id),
    jobSiteId: Nullable(Id),
    status: Schema.Literals(["active", "inactive"])
  }
)

export const JobSite = companyRecord("JobSite", "A job site", JOB_SITE_EXAMPLE, {
  name: Text,
  address: Nullable(Text),
  city: Nullable(Text),
  region: Nullable(Text),
  country: Nullable(Text),
  active: Schema.Boolean
})

export const Change = companyRecord("Change", "A management of change request", CHANGE_EXAMPLE, {
  title: Text,
  description: Nullable(Text),
  category: Nullable(Text),
  status: Schema.Literals(["draft", "submitted", "approved", "rejected", "implemented", "closed"]),
  requestedBy: Nullable(Text),
  approvedBy: Nullable(Text),
  approvedAt: Nullable(Timestamp),
  implementedAt: Nullable(Timestamp),
  jobSiteId: Nullable(Id)
})

export const Permit = companyRecord("Permit", "A permit to work", PERMIT_EXAMPLE, {
  type: Schema.Literals(["hot_work", "confined_space", "work_at_height", "electrical", "excavation", "general"]),
  title: Text,
  description: Nullable(Text),
  jobSiteId: Nullable(Id),
  location: Nullable(Text),
  status: Schema.Literals(["requested", "approved", "active", "closed", "cancelled", "rejected"]),
  requestedBy: Nullable(Text),
  approvedBy: Nullable(Text),
  approvedAt: Nullable(Timestamp),
  validFrom: Nullable(Timestamp),
  validTo: Nullable(Timestamp),
  closedAt: Nullable(Timestamp)
})

export const Policy = companyRecord("Policy", "A policy with its acknowledgement count", POLICY_EXAMPLE, {
  title: Text,
  version: Nullable(Text),
  status: Schema.Literals(["draft", "published", "archived"]),
  effectiveAt: Nullable(Timestamp),
  acknowledgementCount: Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)).annotate({
    description: "How many acknowledgements the policy has"
  })
})

export const Sds = companyRecord(
  "SafetyDataSheet",
  "A safety data sheet (the file itself is never sent)",
  SDS_EXAMPLE,
  {
    productName: Text,
    manufacturer: Nullable(Text),
    revisionAt: Nullable(Timestamp),
    hazardClasses: Schema.Array(Text),
    signalWord: Nullable(Schema.Literals(["danger", "warning"])),
    jobSiteId: Nullable(Id)
  }
)

const Score = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 5 }))

export const Hazard = Schema.Struct({
  hazard: Text,
  likelihood: Score,
  severity: Score,
  controls: Schema.Union([Schema.Array(Text), Text])
}).annotate({ identifier: "Hazard" })

export const RiskAssessment = companyRecord("RiskAssessment", "A risk assessment", RISK_ASSESSMENT_EXAMPLE, {
  title: Text,
  activity: Nullable(Text),
  jobSiteId: Nullable(Id),
  assessedBy: Nullable(Text),
  assessedAt: Timestamp,
  reviewAt: Nullable(Timestamp),
  riskLevel: Schema.Literals(["low", "medium", "high", "extreme"]),
  hazards: Schema.Array(Hazard),
  status: Schema.Literals(["draft", "approved", "archived"])
})

export const SubcontractorDocument = Schema.Struct({
  id: Id,
  kind: Schema.Literals(["insurance", "license", "safety_program", "other"]),
  status: Schema.Literals(["pending", "approved", "rejected", "expired"]),
  expiresAt: Nullable(Timestamp)
}).annotate({ identifier: "SubcontractorDocument" })

export const Subcontractor = companyRecord(
  "Subcontractor",
  "A subcontractor and its document status (no contact phone or e-mail)",
  SUBCONTRACTOR_EXAMPLE,
  {
    name: Text,
    trade: Nullable(Text),
    status: Schema.Literals(["active", "inactive"]),
    contactName: Nullable(Text),
    documents: Schema.Array(SubcontractorDocument),
    documentStatus: Schema.Literals(["missing", "non_compliant", "pending", "compliant"]).annotate({
      description:
        "missing without documents; else non_compliant when any is rejected or expired; else pending when any is pending; else compliant"
    })
  }
)

export const RECORD_SCHEMAS = {
  incidents: Incident,
  observations: Observation,
  "corrective-actions": CorrectiveAction,
  audits: Audit,
  inspections: Inspection,
  "training-records": TrainingRecord,
  workers: Worker,
  "job-sites": JobSite,
  changes: Change,
  permits: Permit,
  policies: Policy,
  sds: Sds,
  "risk-assessments": RiskAssessment,
  subcontractors: Subcontractor
} as const satisfies Record<Resource, Schema.Top>

/**
 * A record deleted since an event carried it: its stored copy keeps only its identifiers
 * (docs/privacy.md, "Deleted records"), every other field null with its key in place. What an
 * event's `data` is once its record is deleted (the events feed, retries, Send Again, replays).
 */
const deletedOf = (resource: Resource) => {
  const record = RECORD_SCHEMAS[resource] as unknown as Schema.Struct<Schema.Struct.Fields>
  const keep = IDENTIFIER_FIELDS[resource]
  const name = String(record.ast.annotations?.identifier ?? resource)
  return Schema.Struct(
    Object.fromEntries(Object.entries(record.fields).map(([k, f]) => [k, keep.includes(k) ? f : Schema.Null]))
  ).annotate({
    identifier: `Deleted${name}`,
    description: `A ${name} deleted since: its identifiers (${keep.join(", ")}) only, every other field null`
  })
}

export const DELETED_RECORD_SCHEMAS = Object.fromEntries(RESOURCES.map((r) => [r, deletedOf(r)])) as unknown as Record<
  Resource,
  // As typed: its fields' schemas read nothing from context (the identifiers' strings, nulls).
  Schema.Struct<Record<string, typeof Schema.Null | typeof Schema.String>>
>
