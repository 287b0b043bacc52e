// One plausible app row per call, for every record table. The seeder builds its history
// with these and the simulator its live traffic, so both write the same shapes, NEVER
// columns included (their absence from the API is the point of filling them).
import { randomUUID } from "node:crypto"
import { CA_SOURCES, CA_STATUSES, type CaSource, type CaStatus } from "../domain/records/corrective-actions.ts"
import * as C from "./catalog.ts"
import type { Random } from "./random.ts"
import type { Row } from "./rows.ts"

export const HOUR = 3_600_000
export const DAY = 24 * HOUR

export interface Ref {
  readonly id: string
  readonly name: string
  readonly at: Date
}

export interface EquipmentRef extends Ref {
  readonly category: string
}

/** What rows of one company point at. */
export interface CompanyRefs {
  readonly companyId: string
  /** Short name used in file and QR addresses, e.g. "acme". */
  readonly slug: string
  /** Domain of workers' e-mail addresses. */
  readonly mailDomain: string
  readonly jobSites: Ref[]
  readonly workers: Ref[]
  readonly equipment: EquipmentRef[]
  readonly subcontractors: Ref[]
  /** Supervisors and safety staff who report, audit, approve and own actions. */
  readonly staff: ReadonlyArray<string>
}

export { CA_SOURCES, CA_STATUSES, type CaSource, type CaStatus }
export const CHANGE_STATUSES = ["draft", "submitted", "approved", "rejected", "implemented", "closed"] as const
export type ChangeStatus = (typeof CHANGE_STATUSES)[number]
export const PERMIT_STATUSES = ["requested", "approved", "active", "closed", "cancelled", "rejected"] as const
export type PermitStatus = (typeof PERMIT_STATUSES)[number]
export const PERMIT_TYPES = [
  "hot_work",
  "confined_space",
  "work_at_height",
  "electrical",
  "excavation",
  "general"
] as const

const min = (a: Date, b: Date) => (a.getTime() <= b.getTime() ? a : b)
/** A moment between `from` and `from + span`, never after `now`. */
export const after = (r: Random, from: Date, span: number, now: Date) =>
  min(new Date(from.getTime() + Math.floor(r.next() * span)), now)
const plus = (at: Date, ms: number) => new Date(at.getTime() + ms)

const fileUrl = (c: CompanyRefs, kind: string, id: string, file: string) =>
  `https://files.safety.example/${c.slug}/${kind}/${id}/${file}`
export const qrCode = (c: CompanyRefs, kind: string, id: string) =>
  `https://${c.slug}.safety.example/qr/${kind}/${id.slice(0, 8)}`
const signature = (r: Random) =>
  `data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA${r.int(100000, 999999)}AAAASUVORK5CYII=`
const photos = (r: Random, c: CompanyRefs, kind: string, id: string, max = 3) =>
  Array.from({ length: r.int(1, max) }, (_, i) => fileUrl(c, kind, id, `photo-${i + 1}.jpg`))

/** Those made before `at` (the roster as it stood then); all of them if none were. */
const before = <T extends Ref>(refs: ReadonlyArray<T>, at: Date): ReadonlyArray<T> => {
  const earlier = refs.filter((x) => x.at.getTime() <= at.getTime())
  return earlier.length > 0 ? earlier : refs
}
const siteAt = (r: Random, c: CompanyRefs, at: Date) => (c.jobSites.length > 0 ? r.pick(before(c.jobSites, at)) : null)
const workerAt = (r: Random, c: CompanyRefs, at: Date) => (c.workers.length > 0 ? r.pick(before(c.workers, at)) : null)
export const staffName = (r: Random, c: CompanyRefs) => r.pick(c.staff)

const base = (c: CompanyRefs, at: Date, updatedAt: Date = at) => ({
  id: randomUUID(),
  company_id: c.companyId,
  created_at: at,
  updated_at: updatedAt
})

export const jobSiteRow = (
  r: Random,
  c: CompanyRefs,
  site: (typeof C.JOB_SITES)[number],
  at: Date,
  active = true
): Row => {
  const row = base(c, at)
  return {
    ...row,
    name: site.name,
    address: site.address,
    city: site.city,
    region: site.region,
    country: "US",
    active,
    qr_code: r.chance(0.9) ? qrCode(c, "job-site", row.id) : null
  }
}

export const subcontractorRow = (
  r: Random,
  c: CompanyRefs,
  name: string,
  trade: string,
  at: Date,
  active = true
): Row => {
  const contact = C.personName(r)
  return {
    ...base(c, at),
    name,
    trade,
    status: active ? "active" : "inactive",
    contact_name: contact,
    contact_phone: C.phone(r),
    contact_email: C.emailOf(contact, `${name.toLowerCase().replace(/[^a-z]/g, "")}.example`)
  }
}

export const subcontractorDocumentRow = (
  r: Random,
  c: CompanyRefs,
  subcontractorId: string,
  kind: "insurance" | "license" | "safety_program" | "other",
  status: "pending" | "approved" | "rejected" | "expired",
  at: Date,
  now: Date
): Row => {
  const id = randomUUID()
  // Insurance and licences lapse; an expired one lapsed before now, the rest after.
  const expires =
    status === "expired"
      ? new Date(now.getTime() - r.int(1, 60) * DAY)
      : kind === "insurance" || kind === "license"
        ? new Date(now.getTime() + r.int(20, 400) * DAY)
        : null
  return {
    id,
    subcontractor_id: subcontractorId,
    kind,
    status,
    expires_at: expires,
    created_at: at,
    file_url: r.chance(0.9) ? fileUrl(c, "subcontractor-documents", id, `${kind}.pdf`) : null
  }
}

export const workerRow = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  employer: string,
  subcontractorId: string | null,
  active = true
): Row => {
  const row = base(c, at)
  const name = C.personName(r)
  return {
    ...row,
    name,
    job_title: r.pick(C.JOB_TITLES),
    employer,
    subcontractor_id: subcontractorId,
    job_site_id: c.jobSites.length > 0 && r.chance(0.85) ? r.pick(before(c.jobSites, at)).id : null,
    status: active ? "active" : "inactive",
    phone: r.chance(0.9) ? C.phone(r) : null,
    email: r.chance(0.8) ? C.emailOf(name, subcontractorId === null ? c.mailDomain : "crew.example") : null,
    photo_url: r.chance(0.6) ? fileUrl(c, "workers", row.id, "portrait.jpg") : null,
    qr_code: r.chance(0.75) ? qrCode(c, "worker", row.id) : null,
    work_restrictions: r.chance(0.08) ? r.pick(C.WORK_RESTRICTIONS) : null,
    medical_notes: r.chance(0.1) ? r.pick(C.MEDICAL_NOTES) : null
  }
}

export const equipmentRow = (r: Random, c: CompanyRefs, at: Date, serial: number): Row & { category: string } => {
  const kind = r.pick(C.EQUIPMENT)
  const row = base(c, at)
  return {
    ...row,
    name: r.pick(kind.names),
    identifier: `EQ-${String(serial).padStart(4, "0")}`,
    category: kind.category,
    job_site_id: siteAt(r, c, at)?.id ?? null,
    qr_code: r.chance(0.85) ? qrCode(c, "equipment", row.id) : null
  }
}

export type IncidentType = "injury" | "illness" | "near_miss" | "property_damage" | "environmental"

export const incidentRow = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  reference: string,
  status: "open" | "investigating" | "closed",
  updatedAt: Date = at,
  type: IncidentType = r.weighted<IncidentType>({
    near_miss: 30,
    injury: 28,
    property_damage: 16,
    environmental: 10,
    illness: 8
  })
): Row => {
  const row = base(c, at, updatedAt)
  const person = type === "injury" || type === "illness"
  const severity =
    type === "near_miss"
      ? r.weighted({ minor: 6, moderate: 3, serious: 1 })
      : r.weighted({ minor: 45, moderate: 30, serious: 18, critical: 7 })
  const worker = person && r.chance(0.75) ? workerAt(r, c, at) : null
  const site = siteAt(r, c, at)
  const via = r.weighted({ app: 60, qr: 25, assistant: 15 })
  // A privacy case is one the OSHA log would also anonymise: recordable by definition.
  const privacy = person && r.chance(0.2)
  // Title, description, injury type and body part all tell the same story.
  const scenario = r.pick(C.INCIDENT_SCENARIOS[type]!)
  return {
    ...row,
    reference,
    type,
    title: scenario.title,
    description: `${scenario.what}, reported at ${r.pick(C.AREAS).toLowerCase()}. Area made safe and supervisor informed.`,
    occurred_at: new Date(at.getTime() - r.int(5, 48 * 60) * 60_000),
    job_site_id: site?.id ?? null,
    location: r.pick(C.AREAS),
    person_name: person ? (worker?.name ?? C.personName(r)) : null,
    worker_id: worker?.id ?? null,
    body_part: type === "injury" ? scenario.bodyPart! : null,
    injury_type: person ? scenario.injuryType! : null,
    severity,
    privacy_case: privacy,
    osha_recordable: privacy || (person && severity !== "minor" && r.chance(0.7)),
    status,
    reported_by: worker !== null && r.chance(0.3) ? worker.name : staffName(r, c),
    reported_via: via,
    photos: r.chance(0.6) ? photos(r, c, "incidents", row.id) : null,
    voice_note_url: via !== "app" && r.chance(0.5) ? fileUrl(c, "incidents", row.id, "voice-note.m4a") : null,
    signature: r.chance(0.5) ? signature(r) : null,
    work_restrictions: type === "injury" && severity !== "minor" && r.chance(0.6) ? r.pick(C.WORK_RESTRICTIONS) : null
  }
}

export type ObservationType = "unsafe_act" | "unsafe_condition" | "safe_behavior" | "near_miss"

export const observationRow = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  status: "open" | "closed",
  updatedAt: Date = at
): Row => {
  const row = base(c, at, updatedAt)
  const type = r.weighted<ObservationType>({ unsafe_condition: 40, unsafe_act: 25, safe_behavior: 25, near_miss: 10 })
  const via = r.weighted({ app: 55, qr: 30, assistant: 15 })
  return {
    ...row,
    type,
    title: r.pick(C.OBSERVATION_TITLES[type]!),
    description: `${r.pick(C.OBSERVATION_TITLES[type]!)}. Spoken to the crew on the spot.`,
    job_site_id: siteAt(r, c, at)?.id ?? null,
    location: r.pick(C.AREAS),
    observed_at: new Date(at.getTime() - r.int(1, 600) * 60_000),
    observed_by: r.chance(0.5) ? (workerAt(r, c, at)?.name ?? staffName(r, c)) : staffName(r, c),
    reported_via: via,
    status,
    photos: r.chance(0.55) ? photos(r, c, "observations", row.id, 2) : null,
    voice_note_url: via !== "app" && r.chance(0.45) ? fileUrl(c, "observations", row.id, "voice-note.m4a") : null
  }
}

export interface CaLinks {
  readonly incident_id?: string | null
  readonly observation_id?: string | null
  readonly audit_item_id?: string | null
  readonly inspection_id?: string | null
  readonly change_id?: string | null
}

export const correctiveActionRow = (
  r: Random,
  c: CompanyRefs,
  source: CaSource,
  status: CaStatus,
  at: Date,
  now: Date,
  links: CaLinks = {}
): Row => {
  const closed = status === "completed" || status === "verified"
  const completedAt = closed
    ? after(r, plus(at, HOUR), Math.min(45 * DAY, Math.max(0, now.getTime() - at.getTime())), now)
    : null
  const updatedAt =
    status === "verified"
      ? after(r, completedAt!, 10 * DAY, now)
      : status === "completed"
        ? completedAt!
        : status === "in_progress"
          ? after(r, at, Math.max(0, (now.getTime() - at.getTime()) / 2), now)
          : at
  const row = base(c, at, updatedAt)
  return {
    ...row,
    title: r.pick(C.CA_TITLES[source]!),
    description: `Raised from ${source.replaceAll("_", " ")}. ${r.pick(["Make safe and report back.", "Fix before next shift.", "Agree a permanent fix with the site manager.", "Check other sites for the same issue."])}`,
    source,
    status,
    priority: r.weighted({ low: 20, medium: 45, high: 25, critical: 10 }),
    due_date: plus(at, r.int(3, 60) * DAY),
    completed_at: completedAt,
    close_out_notes: closed ? r.pick(C.CLOSE_OUT_NOTES) : null,
    owner: staffName(r, c),
    incident_id: links.incident_id ?? null,
    observation_id: links.observation_id ?? null,
    audit_item_id: links.audit_item_id ?? null,
    inspection_id: links.inspection_id ?? null,
    change_id: links.change_id ?? null,
    evidence_photos: closed && r.chance(0.7) ? photos(r, c, "corrective-actions", row.id, 2) : null,
    signature: status === "verified" && r.chance(0.8) ? signature(r) : null
  }
}

export interface WithItems {
  readonly row: Row
  readonly items: Row[]
}

const itemResult = (r: Random, failRate: number) => r.weighted({ pass: 1 - failRate - 0.08, fail: failRate, na: 0.08 })

/** A checklist's item rows, in order: each answered pass, fail or n/a, with what its kind adds (a note, photos). */
const checklistItems = <Extra extends Row>(
  r: Random,
  questions: ReadonlyArray<string>,
  failRate: number,
  parent: Row,
  at: Date,
  extra: (result: string, id: string) => Extra
) =>
  questions.map((item, i) => {
    const id = randomUUID()
    const result = itemResult(r, failRate)
    return { id, ...parent, position: i + 1, item, result, created_at: at, ...extra(result, id) }
  })

export const auditWithItems = (r: Random, c: CompanyRefs, at: Date, scored = true): WithItems => {
  const template = r.pick(Object.keys(C.AUDIT_TEMPLATES))
  const questions = C.AUDIT_TEMPLATES[template]!
  const count = r.int(Math.min(5, questions.length), Math.min(15, questions.length))
  const failRate = r.pick([0.03, 0.08, 0.15, 0.3])
  const row = base(c, at)
  const items = checklistItems(r, questions.slice(0, count), failRate, { audit_id: row.id }, at, (result, id) => ({
    note:
      result === "fail"
        ? r.pick(["Raised with foreman.", "Needs follow-up.", "Photo taken.", "Fixed during audit."])
        : result === "na"
          ? "Not applicable today."
          : "",
    photos: result === "fail" && r.chance(0.7) ? photos(r, c, "audit-items", id, 2) : null
  }))
  const pass = items.filter((i) => i.result === "pass").length
  const fail = items.filter((i) => i.result === "fail").length
  const site = siteAt(r, c, at)
  return {
    row: {
      ...row,
      title: `${template}${site ? ` – ${site.name}` : ""}`,
      template,
      job_site_id: site?.id ?? null,
      performed_by: staffName(r, c),
      performed_at: new Date(at.getTime() - r.int(10, 240) * 60_000),
      score: scored && pass + fail > 0 ? Math.round((pass / (pass + fail)) * 1000) / 10 : null,
      notes: fail > 0 ? `${fail} item(s) failed; actions raised.` : "No issues found.",
      via: r.weighted({ app: 75, offline_upload: 25 }),
      signature: r.chance(0.7) ? signature(r) : null
    },
    items
  }
}

export type Outcome = "pass" | "fail" | "needs_attention"

export const inspectionWithItems = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  failRate = 0.06
): WithItems & { outcome: Outcome } => {
  const eq = c.equipment.length > 0 ? r.pick(before(c.equipment, at)) : null
  const questions = C.CHECKLISTS[eq?.category ?? "Ladder"]!
  const row = base(c, at)
  const asked = questions.slice(0, r.int(Math.min(4, questions.length), questions.length))
  const items = checklistItems(r, asked, failRate, { inspection_id: row.id }, at, (result, id) => ({
    note:
      result === "fail"
        ? r.pick(["Tagged out of service.", "Reported to fleet.", "Worn beyond limit.", "Leak found."])
        : "",
    photo: result === "fail" ? fileUrl(c, "inspection-items", id, "defect.jpg") : null
  }))
  const fails = items.filter((i) => i.result === "fail").length
  // A failed item fails the inspection, unless the inspector judged it minor.
  const outcome: Outcome =
    fails === 0 ? (r.chance(0.05) ? "needs_attention" : "pass") : r.chance(0.75) ? "fail" : "needs_attention"
  return {
    outcome,
    row: {
      ...row,
      equipment_id: eq?.id ?? null,
      checklist: `${eq?.category ?? "General"} pre-use check`,
      performed_by: workerAt(r, c, at)?.name ?? staffName(r, c),
      performed_at: new Date(at.getTime() - r.int(1, 120) * 60_000),
      outcome,
      notes:
        outcome === "pass"
          ? "Fit for use."
          : outcome === "fail"
            ? "Removed from service pending repair."
            : "Usable; defect to monitor.",
      via: r.weighted({ app: 70, offline_upload: 30 }),
      signature: r.chance(0.6) ? signature(r) : null,
      photos: outcome !== "pass" && r.chance(0.6) ? photos(r, c, "inspections", row.id, 2) : null
    },
    items
  }
}

export const trainingRow = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  worker: Ref | null,
  via?: "training_page" | "qr_course"
): Row => {
  const course = r.pick(C.COURSES)
  const completed = new Date(at.getTime() - r.int(0, 3 * 24) * HOUR)
  const row = base(c, at)
  return {
    ...row,
    worker_id: worker?.id ?? null,
    course: course.course,
    provider: course.provider,
    completed_at: completed,
    expires_at: course.months === null ? null : plus(completed, course.months * 30 * DAY),
    via: via ?? r.weighted({ training_page: 65, qr_course: 35 }),
    certificate_file: r.chance(0.7) ? fileUrl(c, "training-records", row.id, "certificate.pdf") : null,
    signature: r.chance(0.4) ? signature(r) : null
  }
}

export const changeRow = (r: Random, c: CompanyRefs, status: ChangeStatus, at: Date, now: Date): Row => {
  const approved = status === "approved" || status === "implemented" || status === "closed"
  const approvedAt = approved ? after(r, plus(at, HOUR), 10 * DAY, now) : null
  const implementedAt = status === "implemented" || status === "closed" ? after(r, approvedAt!, 20 * DAY, now) : null
  const updatedAt = implementedAt ?? approvedAt ?? (status === "draft" ? at : after(r, at, 3 * DAY, now))
  const row = base(c, at, status === "closed" ? after(r, updatedAt, 5 * DAY, now) : updatedAt)
  return {
    ...row,
    title: r.pick(C.CHANGE_TITLES),
    description: "Assess the safety impact, update documents and brief the crews before the change goes live.",
    category: r.pick(C.CHANGE_CATEGORIES),
    status,
    requested_by: staffName(r, c),
    approved_by: approved ? staffName(r, c) : null,
    approved_at: approvedAt,
    implemented_at: implementedAt,
    job_site_id: r.chance(0.75) ? (siteAt(r, c, at)?.id ?? null) : null,
    attachments: r.chance(0.6)
      ? [fileUrl(c, "changes", row.id, "proposal.pdf"), fileUrl(c, "changes", row.id, "drawing.dwg")].slice(
          0,
          r.int(1, 2)
        )
      : null
  }
}

export const permitRow = (r: Random, c: CompanyRefs, status: PermitStatus, at: Date, now: Date): Row => {
  const type = r.pick(PERMIT_TYPES)
  const validFrom = plus(at, r.int(1, 48) * HOUR)
  const validTo = plus(validFrom, r.pick([8, 10, 12, 24, 72, 168]) * HOUR)
  const approved = status === "approved" || status === "active" || status === "closed"
  const approvedAt = approved ? after(r, plus(at, 10 * 60_000), 12 * HOUR, now) : null
  const closedAt = status === "closed" ? min(validTo, now) : null
  const row = base(c, at, closedAt ?? approvedAt ?? (status === "requested" ? at : after(r, at, DAY, now)))
  return {
    ...row,
    type,
    title: r.pick(C.PERMIT_TITLES[type]!),
    description: "Isolations, gas test and rescue plan as per the permit checklist.",
    job_site_id: siteAt(r, c, at)?.id ?? null,
    location: r.pick(C.AREAS),
    status,
    requested_by: staffName(r, c),
    approved_by: approved ? staffName(r, c) : null,
    approved_at: approvedAt,
    valid_from: validFrom,
    valid_to: validTo,
    closed_at: closedAt,
    signature: approved && r.chance(0.8) ? signature(r) : null
  }
}

export const policyRow = (
  r: Random,
  c: CompanyRefs,
  title: string,
  status: "draft" | "published" | "archived",
  at: Date,
  now: Date
): Row => {
  const row = base(c, at, after(r, at, 30 * DAY, now))
  return {
    ...row,
    title,
    version: `${r.int(1, 4)}.${r.int(0, 9)}`,
    status,
    effective_at: status === "draft" ? plus(now, r.int(7, 60) * DAY) : after(r, at, 14 * DAY, now),
    document_file: r.chance(0.9) ? fileUrl(c, "policies", row.id, "policy.pdf") : null
  }
}

export const acknowledgementRow = (r: Random, _c: CompanyRefs, policyId: string, workerId: string, at: Date): Row => {
  const id = randomUUID()
  return {
    id,
    policy_id: policyId,
    worker_id: workerId,
    acknowledged_at: at,
    created_at: at,
    signature: r.chance(0.6) ? signature(r) : null
  }
}

export const sdsRow = (r: Random, c: CompanyRefs, product: (typeof C.SDS_PRODUCTS)[number], at: Date): Row => {
  const row = base(c, at)
  return {
    ...row,
    product_name: product.product,
    manufacturer: product.manufacturer,
    revision_at: new Date(at.getTime() - r.int(30, 900) * DAY),
    hazard_classes: [...product.hazards],
    signal_word: product.signal,
    job_site_id: r.chance(0.7) ? (siteAt(r, c, at)?.id ?? null) : null,
    file_url: r.chance(0.9) ? fileUrl(c, "sds", row.id, "sds.pdf") : null,
    qr_code: r.chance(0.6) ? qrCode(c, "sds", row.id) : null
  }
}

const riskLevel = (score: number) => (score <= 4 ? "low" : score <= 9 ? "medium" : score <= 16 ? "high" : "extreme")

export const riskAssessmentRow = (
  r: Random,
  c: CompanyRefs,
  at: Date,
  status: "draft" | "approved" | "archived"
): Row => {
  const activity = r.pick(C.RISK_ACTIVITIES)
  const hazards = r.sample(activity.hazards, r.int(2, activity.hazards.length)).map((hazard) => ({
    hazard,
    likelihood: r.int(1, 5),
    severity: r.int(2, 5),
    controls: r.sample(C.CONTROLS, r.int(1, 3))
  }))
  const worst = Math.max(...hazards.map((h) => h.likelihood * h.severity))
  const site = siteAt(r, c, at)
  return {
    ...base(c, at),
    title: `${activity.title}${site ? ` at ${site.name}` : ""}`,
    activity: activity.title,
    job_site_id: site?.id ?? null,
    assessed_by: staffName(r, c),
    assessed_at: at,
    review_at: status === "draft" ? null : plus(at, 365 * DAY),
    risk_level: riskLevel(worst),
    hazards,
    status
  }
}
