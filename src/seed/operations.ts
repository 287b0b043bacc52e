// What people do in the safety app, one transaction each, written as the app would write
// it. Each operation returns the events its transaction must fire according to
// docs/events.md#how-events-are-derived (the net change of each row per transaction),
// so a run's tally is exactly what the outbox should hold for it.
import type postgres from "postgres"
import type { EventKind } from "../domain/event-kinds.ts"
import * as C from "./catalog.ts"
import type { Random } from "./random.ts"
import {
  auditWithItems,
  type CaSource,
  changeRow,
  correctiveActionRow,
  incidentRow,
  inspectionWithItems,
  observationRow,
  permitRow,
  type CompanyRefs,
  staffName,
  trainingRow,
  workerRow,
  subcontractorDocumentRow
} from "./records.ts"
import { insertRows } from "./rows.ts"

export type Tx = postgres.TransactionSql

export interface SimulationContext {
  /** The company's host as stored. */
  readonly host: string
  readonly r: Random
  readonly refs: CompanyRefs
  /** Next incident number of the company (INC-0042); a failed report leaves a gap. */
  nextIncident: number
}

export interface Effects {
  readonly events: ReadonlyArray<EventKind>
  /** Runs only once the transaction has committed (keeps the in-memory roster true). */
  readonly committed?: () => void
}

/** null: nothing to act on right now (no row in the needed state); nothing was written. */
export type Operation = (tx: Tx, ctx: SimulationContext) => Promise<Effects | null>

const CLOSED = new Set(["completed", "verified"])

/** corrective_action.closed fires when the status enters the closed group from outside it. */
const caClosed = (before: string | null, after: string): EventKind[] =>
  CLOSED.has(after) && (before === null || !CLOSED.has(before)) ? ["corrective_action.closed"] : []

const insertActions = async (
  tx: Tx,
  ctx: SimulationContext,
  source: CaSource,
  count: number,
  links: Parameters<typeof correctiveActionRow>[6] = {},
  status: "open" | "completed" = "open"
): Promise<EventKind[]> => {
  const now = new Date()
  const rows = Array.from({ length: count }, () =>
    correctiveActionRow(ctx.r, ctx.refs, source, status, now, now, links)
  )
  await insertRows(tx, "corrective_actions", rows)
  return rows.flatMap(() => ["corrective_action.created" as const, ...caClosed(null, status)])
}

/** A random row of the company in one of `statuses`, locked for this transaction. */
const pickLocked = async <T extends object>(
  tx: Tx,
  table: string,
  column: string,
  values: ReadonlyArray<string>,
  companyId: string
) => {
  const [row] = await tx<(T & { id: string })[]>`
    select * from ${tx(`app.${table}`)}
    where company_id = ${companyId} and ${tx(column)} = any(${values as string[]})
    order by random() limit 1
    for update skip locked`
  return row
}

const reportIncident: Operation = async (tx, ctx) => {
  const now = new Date()
  // Reserved up front so operations in flight at once never share a number.
  const reference = `INC-${String(ctx.nextIncident++).padStart(4, "0")}`
  const row = incidentRow(ctx.r, ctx.refs, now, reference, "open")
  await insertRows(tx, "incidents", [row])
  // Reported together with its follow-up actions, as the incident form allows.
  const serious = row.severity === "serious" || row.severity === "critical"
  const actions = ctx.r.chance(serious ? 0.7 : 0.25) ? ctx.r.int(1, 2) : 0
  const events = await insertActions(tx, ctx, "incident", actions, { incident_id: row.id as string })
  return { events: ["incident.created", ...events] }
}

const progressIncident: Operation = async (tx, ctx) => {
  const row = await pickLocked<{ status: string }>(
    tx,
    "incidents",
    "status",
    ["open", "investigating"],
    ctx.refs.companyId
  )
  if (!row) return null
  const next = row.status === "open" ? "investigating" : "closed"
  await tx`update app.incidents set status = ${next}, updated_at = now() where id = ${row.id}`
  return { events: [] }
}

const reportObservation: Operation = async (tx, ctx) => {
  const row = observationRow(ctx.r, ctx.refs, new Date(), "open")
  await insertRows(tx, "observations", [row])
  const actions = row.type !== "safe_behavior" && ctx.r.chance(0.3) ? 1 : 0
  const events = await insertActions(tx, ctx, "observation", actions, { observation_id: row.id as string })
  return { events: ["observation.created", ...events] }
}

const closeObservation: Operation = async (tx, ctx) => {
  const row = await pickLocked(tx, "observations", "status", ["open"], ctx.refs.companyId)
  if (!row) return null
  await tx`update app.observations set status = 'closed', updated_at = now() where id = ${row.id}`
  return { events: [] }
}

/** A duplicate report removed; its actions lose the link (on delete set null). No event. */
const deleteObservation: Operation = async (tx, ctx) => {
  const row = await pickLocked(tx, "observations", "status", ["closed"], ctx.refs.companyId)
  if (!row) return null
  await tx`delete from app.observations where id = ${row.id}`
  return { events: [] }
}

const raiseAction: Operation = async (tx, ctx) => {
  const source = ctx.r.weighted<CaSource>({ manual: 50, assistant: 30, maturity_gap: 20 })
  // The assistant also logs fixes already done on the spot: created and closed at once.
  const status = source === "assistant" && ctx.r.chance(0.2) ? "completed" : "open"
  return { events: await insertActions(tx, ctx, source, 1, {}, status) }
}

const importGapAnalysis: Operation = async (tx, ctx) => ({
  events: await insertActions(tx, ctx, "gap_analysis_import", ctx.r.int(3, 6))
})

const progressAction: Operation = async (tx, ctx) => {
  const from = ctx.r.weighted({ open: 40, in_progress: 35, completed: 22, verified: 3 })
  const row = await pickLocked<{ status: string }>(tx, "corrective_actions", "status", [from], ctx.refs.companyId)
  if (!row) return null
  const r = ctx.r
  const next =
    from === "open"
      ? r.chance(0.7)
        ? "in_progress"
        : "completed"
      : from === "in_progress"
        ? "completed"
        : from === "completed"
          ? r.chance(0.75)
            ? "verified"
            : "in_progress" // verified, or reopened after a failed check
          : "in_progress" // a verified action reopened when the hazard came back
  if (next === "completed") {
    await tx`update app.corrective_actions set status = 'completed', completed_at = now(), updated_at = now(),
      close_out_notes = ${r.pick(C.CLOSE_OUT_NOTES)}, evidence_photos = ${[`https://files.safety.example/${ctx.refs.slug}/corrective-actions/${row.id}/evidence.jpg`]}
      where id = ${row.id}`
  } else if (next === "in_progress" && CLOSED.has(from)) {
    await tx`update app.corrective_actions set status = 'in_progress', completed_at = null, close_out_notes = null,
      updated_at = now() where id = ${row.id}`
  } else {
    await tx`update app.corrective_actions set status = ${next}, updated_at = now(),
      signature = ${next === "verified" ? "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==" : null}
      where id = ${row.id}`
  }
  return { events: caClosed(from, next) }
}

/**
 * Reopened and closed again in one save (notes corrected): the net change leaves it
 * completed, so nothing fires.
 */
const reworkAction: Operation = async (tx, ctx) => {
  const row = await pickLocked(tx, "corrective_actions", "status", ["completed"], ctx.refs.companyId)
  if (!row) return null
  await tx`update app.corrective_actions set status = 'in_progress', completed_at = null, updated_at = now() where id = ${row.id}`
  await tx`update app.corrective_actions set status = 'completed', completed_at = now(), updated_at = now(),
    close_out_notes = ${`${ctx.r.pick(C.CLOSE_OUT_NOTES)} (notes corrected)`} where id = ${row.id}`
  return { events: [] }
}

/** Raised and fixed in the same save: the insert lands completed (created and closed). */
const quickFix: Operation = async (tx, ctx) => {
  const now = new Date()
  const row = correctiveActionRow(ctx.r, ctx.refs, "manual", "open", now, now)
  await insertRows(tx, "corrective_actions", [row])
  await tx`update app.corrective_actions set status = 'completed', completed_at = now(), updated_at = now(),
    close_out_notes = 'Fixed on the spot.' where id = ${row.id as string}`
  return { events: ["corrective_action.created", "corrective_action.closed"] }
}

const performAudit: Operation = async (tx, ctx) => {
  // An offline upload may arrive unscored; it is scored later (audit.score).
  const scored = ctx.r.chance(0.85)
  const audit = auditWithItems(ctx.r, ctx.refs, new Date(), scored)
  await insertRows(tx, "audits", [audit.row])
  await insertRows(tx, "audit_items", audit.items)
  const events: EventKind[] = ["audit.created"]
  for (const item of audit.items) {
    if (item.result === "fail" && ctx.r.chance(0.6))
      events.push(...(await insertActions(tx, ctx, "audit", 1, { audit_item_id: item.id as string })))
  }
  return { events }
}

const scoreAudit: Operation = async (tx, ctx) => {
  const [row] = await tx<{ id: string }[]>`
    select id from app.audits where company_id = ${ctx.refs.companyId} and score is null
    order by random() limit 1 for update skip locked`
  if (!row) return null
  await tx`update app.audits a set updated_at = now(), score = coalesce((
      select round(100.0 * count(*) filter (where result = 'pass') / nullif(count(*) filter (where result <> 'na'), 0), 1)
      from app.audit_items where audit_id = a.id), 100)
    where id = ${row.id}`
  return { events: [] }
}

const performInspection: Operation = async (tx, ctx) => {
  const x = inspectionWithItems(ctx.r, ctx.refs, new Date(), 0.1)
  await insertRows(tx, "inspections", [x.row])
  await insertRows(tx, "inspection_items", x.items)
  const events: EventKind[] = x.outcome === "fail" ? ["inspection.failed"] : []
  if (x.outcome !== "pass" && ctx.r.chance(0.6)) {
    events.push(...(await insertActions(tx, ctx, "inspection", 1, { inspection_id: x.row.id as string })))
  }
  return { events }
}

/** A supervisor reviews an inspection: needs_attention becomes fail, or a fail is cleared. */
const regradeInspection: Operation = async (tx, ctx) => {
  const from = ctx.r.chance(0.7) ? "needs_attention" : "fail"
  const row = await pickLocked(tx, "inspections", "outcome", [from], ctx.refs.companyId)
  if (!row) return null
  const next = from === "needs_attention" ? "fail" : "pass"
  await tx`update app.inspections set outcome = ${next}, updated_at = now(),
    notes = ${next === "fail" ? "Regraded to fail on review." : "Repaired and re-checked."} where id = ${row.id}`
  return { events: next === "fail" ? ["inspection.failed"] : [] }
}

const recordTraining: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  if (refs.workers.length === 0) return null
  // A QR course signs in a whole crew at once.
  const qr = r.chance(0.3)
  const workers = qr ? r.sample(refs.workers, r.int(2, 6)) : [r.pick(refs.workers)]
  const now = new Date()
  const rows = workers.map((w) => trainingRow(r, refs, now, w, qr ? "qr_course" : "training_page"))
  await insertRows(tx, "training_records", rows)
  return { events: rows.map(() => "training_record.created" as const) }
}

const requestChange: Operation = async (tx, ctx) => {
  const now = new Date()
  // Emergency changes are approved as they are entered.
  const status = ctx.r.weighted({ draft: 55, submitted: 35, approved: 10 })
  await insertRows(tx, "changes", [changeRow(ctx.r, ctx.refs, status, now, now)])
  return { events: status === "approved" ? ["change.approved"] : [] }
}

const progressChange: Operation = async (tx, ctx) => {
  const r = ctx.r
  const from = r.weighted({ draft: 25, submitted: 35, approved: 25, implemented: 15 })
  const row = await pickLocked(tx, "changes", "status", [from], ctx.refs.companyId)
  if (!row) return null
  const approver = staffName(r, ctx.refs)
  switch (from) {
    case "draft":
      await tx`update app.changes set status = 'submitted', updated_at = now() where id = ${row.id}`
      return { events: [] }
    case "submitted":
      if (r.chance(0.2)) {
        await tx`update app.changes set status = 'rejected', updated_at = now() where id = ${row.id}`
        return { events: [] }
      }
      await tx`update app.changes set status = 'approved', approved_by = ${approver}, approved_at = now(), updated_at = now() where id = ${row.id}`
      return { events: ["change.approved"] }
    case "approved": {
      await tx`update app.changes set status = 'implemented', implemented_at = now(), updated_at = now() where id = ${row.id}`
      const actions = r.chance(0.5) ? await insertActions(tx, ctx, "change", 1, { change_id: row.id }) : []
      return { events: ["change.implemented", ...actions] }
    }
    default:
      await tx`update app.changes set status = 'closed', updated_at = now() where id = ${row.id}`
      return { events: [] }
  }
}

/**
 * Approved and implemented in one save: at commit the status is implemented, so only
 * change.implemented fires (the net change never shows approved).
 */
const fastTrackChange: Operation = async (tx, ctx) => {
  const row = await pickLocked(tx, "changes", "status", ["submitted"], ctx.refs.companyId)
  if (!row) return null
  await tx`update app.changes set status = 'approved', approved_by = ${staffName(ctx.r, ctx.refs)}, approved_at = now(), updated_at = now() where id = ${row.id}`
  await tx`update app.changes set status = 'implemented', implemented_at = now(), updated_at = now() where id = ${row.id}`
  return { events: ["change.implemented"] }
}

const requestPermit: Operation = async (tx, ctx) => {
  const now = new Date()
  const status = ctx.r.chance(0.1) ? "approved" : "requested"
  await insertRows(tx, "permits", [permitRow(ctx.r, ctx.refs, status, now, now)])
  return { events: status === "approved" ? ["permit.approved"] : [] }
}

const progressPermit: Operation = async (tx, ctx) => {
  const r = ctx.r
  const from = r.weighted({ requested: 40, approved: 30, active: 30 })
  const row = await pickLocked(tx, "permits", "status", [from], ctx.refs.companyId)
  if (!row) return null
  if (from === "requested") {
    const next = r.weighted({ approved: 75, rejected: 15, cancelled: 10 })
    if (next === "approved") {
      await tx`update app.permits set status = 'approved', approved_by = ${staffName(r, ctx.refs)}, approved_at = now(), updated_at = now() where id = ${row.id}`
      return { events: ["permit.approved"] }
    }
    await tx`update app.permits set status = ${next}, updated_at = now() where id = ${row.id}`
    return { events: [] }
  }
  if (from === "approved") {
    const next = r.chance(0.85) ? "active" : "cancelled"
    await tx`update app.permits set status = ${next}, valid_from = least(valid_from, now()), updated_at = now() where id = ${row.id}`
    return { events: [] }
  }
  await tx`update app.permits set status = 'closed', closed_at = now(), updated_at = now() where id = ${row.id}`
  return { events: ["permit.closed"] }
}

const editWorker: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  if (refs.workers.length === 0) return null
  const worker = r.pick(refs.workers)
  const site = refs.jobSites.length > 0 ? r.pick(refs.jobSites).id : null
  const [row] = await tx`
    update app.workers set job_title = ${r.pick(C.JOB_TITLES)}, job_site_id = ${site}, phone = ${C.phone(r)},
      status = ${r.chance(0.95) ? "active" : "inactive"}, updated_at = now()
    where id = ${worker.id} returning id`
  return row ? { events: [] } : null
}

const hireWorker: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  const sub = refs.subcontractors.length > 0 && r.chance(0.35) ? r.pick(refs.subcontractors) : null
  const [company] = await tx<{ name: string }[]>`select name from app.companies where id = ${refs.companyId}`
  const row = workerRow(r, refs, new Date(), sub?.name ?? company?.name ?? "In-house", sub?.id ?? null)
  await insertRows(tx, "workers", [row])
  return {
    events: [],
    committed: () =>
      void refs.workers.push({ id: row.id as string, name: row.name as string, at: row.created_at as Date })
  }
}

const PHASE = / \(phase \d\)$/
/** Renamed for its next phase: shows in every inspection of equipment on that site. */
const renameJobSite: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  if (refs.jobSites.length === 0) return null
  const site = r.pick(refs.jobSites)
  const [row] = await tx<{ name: string }[]>`select name from app.job_sites where id = ${site.id} for update`
  if (!row) return null
  const base = row.name.replace(PHASE, "")
  await tx`update app.job_sites set name = ${`${base} (phase ${r.int(2, 4)})`}, updated_at = now() where id = ${site.id}`
  return { events: [] }
}

const relocateEquipment: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  if (refs.equipment.length === 0 || refs.jobSites.length === 0) return null
  const [row] = await tx`update app.equipment set job_site_id = ${r.pick(refs.jobSites).id}, updated_at = now()
    where id = ${r.pick(refs.equipment).id} returning id`
  return row ? { events: [] } : null
}

const acknowledgePolicy: Operation = async (tx, ctx) => {
  const [pair] = await tx<{ policy_id: string; worker_id: string }[]>`
    select p.id as policy_id, w.id as worker_id
    from (select id from app.policies where company_id = ${ctx.refs.companyId} and status = 'published' order by random() limit 1) p
    cross join lateral (
      select w.id from app.workers w
      where w.company_id = ${ctx.refs.companyId} and w.status = 'active'
        and not exists (select 1 from app.policy_acknowledgements a where a.policy_id = p.id and a.worker_id = w.id)
      order by random() limit 1) w`
  if (!pair) return null
  const now = new Date()
  await insertRows(tx, "policy_acknowledgements", [
    {
      policy_id: pair.policy_id,
      worker_id: pair.worker_id,
      acknowledged_at: now,
      created_at: now,
      signature: "data:image/png;base64,iVBORw0KGgo="
    }
  ])
  return { events: [] }
}

/** Insurance lapses, or a subcontractor uploads a new document that is then reviewed. */
const subcontractorPaperwork: Operation = async (tx, ctx) => {
  const { r, refs } = ctx
  if (refs.subcontractors.length === 0) return null
  const action = r.weighted({ expire: 35, upload: 40, review: 25 })
  if (action === "upload") {
    const kind = r.pick(["insurance", "license", "safety_program", "other"] as const)
    await insertRows(tx, "subcontractor_documents", [
      subcontractorDocumentRow(r, refs, r.pick(refs.subcontractors).id, kind, "pending", new Date(), new Date())
    ])
    return { events: [] }
  }
  const [doc] = await tx<{ id: string }[]>`
    select d.id from app.subcontractor_documents d join app.subcontractors s on s.id = d.subcontractor_id
    where s.company_id = ${refs.companyId} and d.status = ${action === "expire" ? "approved" : "pending"}
      ${action === "expire" ? tx`and d.expires_at is not null` : tx``}
    order by random() limit 1 for update of d skip locked`
  if (!doc) return null
  if (action === "expire") {
    await tx`update app.subcontractor_documents set status = 'expired', expires_at = least(expires_at, now()) where id = ${doc.id}`
  } else {
    await tx`update app.subcontractor_documents set status = ${r.chance(0.8) ? "approved" : "rejected"} where id = ${doc.id}`
  }
  return { events: [] }
}

export const OPERATIONS = {
  "incident.report": reportIncident,
  "incident.progress": progressIncident,
  "observation.report": reportObservation,
  "observation.close": closeObservation,
  "observation.delete": deleteObservation,
  "correctiveAction.raise": raiseAction,
  "correctiveAction.import": importGapAnalysis,
  "correctiveAction.progress": progressAction,
  "correctiveAction.rework": reworkAction,
  "correctiveAction.quickFix": quickFix,
  "audit.perform": performAudit,
  "audit.score": scoreAudit,
  "inspection.perform": performInspection,
  "inspection.regrade": regradeInspection,
  "training.record": recordTraining,
  "change.request": requestChange,
  "change.progress": progressChange,
  "change.fastTrack": fastTrackChange,
  "permit.request": requestPermit,
  "permit.progress": progressPermit,
  "worker.edit": editWorker,
  "worker.hire": hireWorker,
  "jobSite.rename": renameJobSite,
  "equipment.relocate": relocateEquipment,
  "policy.acknowledge": acknowledgePolicy,
  "subcontractor.paperwork": subcontractorPaperwork
} as const satisfies Record<string, Operation>

export type OperationName = keyof typeof OPERATIONS
export const OPERATION_NAMES = Object.keys(OPERATIONS) as OperationName[]

/** How often each is done, relative to the others. */
export const DEFAULT_WEIGHTS: Readonly<Record<OperationName, number>> = {
  "incident.report": 12,
  "incident.progress": 4,
  "observation.report": 12,
  "observation.close": 3,
  "observation.delete": 1,
  "correctiveAction.raise": 5,
  "correctiveAction.import": 1,
  "correctiveAction.progress": 14,
  "correctiveAction.rework": 1,
  "correctiveAction.quickFix": 1,
  "audit.perform": 4,
  "audit.score": 1,
  "inspection.perform": 9,
  "inspection.regrade": 1,
  "training.record": 7,
  "change.request": 3,
  "change.progress": 5,
  "change.fastTrack": 1,
  "permit.request": 4,
  "permit.progress": 6,
  "worker.edit": 3,
  "worker.hire": 1,
  "jobSite.rename": 1,
  "equipment.relocate": 1,
  "policy.acknowledge": 4,
  "subcontractor.paperwork": 2
}
