// Demo data that plays the safety app: two companies and about 18 months of their records,
// written with plain inserts into `app` in one transaction. The service never writes these
// tables; this is the app's stand-in for demos, tests and benches. A seeded PRNG gives the
// same shape on every run (ids and the exact times, relative to now, differ).
// It takes a postgres.js handle, not the service's `Sql`: it plays the app, an outside
// program with connections of its own (the demo CLIs, benches and tests call it with a pool).
import type { Sql } from "postgres"
import { RESOURCES, type Resource } from "../domain/resources.ts"
import * as C from "./catalog.ts"
import { seededRandom, type Random } from "./random.ts"
import {
  acknowledgementRow,
  after,
  auditWithItems,
  CA_SOURCES,
  CA_STATUSES,
  CHANGE_STATUSES,
  changeRow,
  correctiveActionRow,
  DAY,
  equipmentRow,
  HOUR,
  incidentRow,
  inspectionWithItems,
  jobSiteRow,
  observationRow,
  PERMIT_STATUSES,
  permitRow,
  policyRow,
  riskAssessmentRow,
  sdsRow,
  subcontractorDocumentRow,
  subcontractorRow,
  trainingRow,
  workerRow,
  type CaLinks,
  type CaSource,
  type CaStatus,
  type ChangeStatus,
  type CompanyRefs,
  type EquipmentRef,
  type PermitStatus,
  type Ref
} from "./records.ts"
import { insertRows, type Row } from "./rows.ts"

export interface SeededCompany {
  readonly name: string
  readonly host: string
  readonly tier: string
  readonly companyId: string
  readonly adminEmail: string
  readonly counts: Record<string, number>
}

export interface SeedSummary {
  readonly company: string
  readonly companyId: string
  readonly host: string
  readonly adminEmail: string
  /** Rows inserted per app table, all companies together. */
  readonly counts: Record<string, number>
  readonly companies: ReadonlyArray<SeededCompany>
  readonly elapsedMs: number
}

export const DEMO_HOST = "acme.localhost"
export const DEMO_SEED = 20_240_917

/** Parents before children, so foreign keys hold at every insert. */
export const APP_TABLES: ReadonlyArray<string> = [
  "companies",
  "company_modules",
  "users",
  "job_sites",
  "subcontractors",
  "subcontractor_documents",
  "workers",
  "equipment",
  "incidents",
  "observations",
  "audits",
  "audit_items",
  "inspections",
  "inspection_items",
  "changes",
  "corrective_actions",
  "training_records",
  "permits",
  "policies",
  "policy_acknowledgements",
  "sds",
  "risk_assessments"
]

interface Scale {
  readonly jobSites: number
  readonly subcontractors: number
  readonly workers: number
  readonly equipment: number
  readonly incidents: number
  readonly observations: number
  readonly audits: number
  readonly inspections: number
  readonly training: number
  readonly changes: number
  readonly permits: number
  readonly policies: number
  readonly sds: number
  readonly riskAssessments: number
  /** Corrective actions raised on their own (not from another record), per such source. */
  readonly standaloneActions: number
}

interface CompanyPlan {
  readonly name: string
  readonly host: string
  readonly tier: "starter" | "team" | "company"
  readonly apiEnabled: boolean
  readonly slug: string
  readonly mailDomain: string
  /** true on, false an explicit off row, absent no row (also off). */
  readonly modules: Partial<Record<Resource, boolean>>
  readonly users: ReadonlyArray<{ name: string; email: string; role: "admin" | "member" }>
  readonly sites: ReadonlyArray<(typeof C.JOB_SITES)[number]>
  readonly scale: Scale
}

/**
 * How many of each the seed makes for Acme, the large company, and Globex, the small one:
 * one table, so the two read side by side.
 */
const SCALES: { readonly [K in keyof Scale]: readonly [acme: number, globex: number] } = {
  jobSites: [8, 2],
  subcontractors: [12, 3],
  workers: [120, 14],
  equipment: [30, 5],
  incidents: [300, 24],
  observations: [200, 16],
  audits: [40, 4],
  inspections: [150, 10],
  training: [300, 20],
  changes: [30, 6],
  permits: [45, 6],
  policies: [10, 2],
  sds: [20, 3],
  riskAssessments: [18, 2],
  standaloneActions: [8, 1]
}

/** One company's column of SCALES. */
const scaleOf = (company: "acme" | "globex"): Scale => {
  const column = company === "acme" ? 0 : 1
  const scale = {} as Record<keyof Scale, number>
  for (const k of Object.keys(SCALES) as Array<keyof Scale>) scale[k] = SCALES[k][column]
  return scale
}

const ACME: CompanyPlan = {
  name: "Acme Construction",
  host: DEMO_HOST,
  tier: "company",
  apiEnabled: true,
  slug: "acme",
  mailDomain: "acme.example",
  modules: Object.fromEntries(RESOURCES.map((m) => [m, true])),
  users: [
    { name: "Ada Admin", email: "admin@acme.example", role: "admin" },
    { name: "Sam Member", email: "member@acme.example", role: "member" },
    { name: "Rita Safety", email: "rita.safety@acme.example", role: "admin" }
  ],
  sites: C.JOB_SITES.slice(0, 8),
  scale: scaleOf("acme")
}

// A smaller company on the team tier with some modules off, so tenancy and tier rules show.
const GLOBEX: CompanyPlan = {
  name: "Globex Builders",
  host: "globex.localhost",
  tier: "team",
  apiEnabled: true,
  slug: "globex",
  mailDomain: "globex.example",
  modules: {
    incidents: true,
    observations: true,
    "corrective-actions": true,
    audits: true,
    inspections: true,
    "training-records": true,
    workers: true,
    "job-sites": true,
    policies: true,
    permits: false,
    sds: false,
    "risk-assessments": false
    // changes and subcontractors: no row, which also means off
  },
  users: [
    { name: "Gina Globex", email: "admin@globex.example", role: "admin" },
    { name: "Hank Member", email: "member@globex.example", role: "member" }
  ],
  sites: C.JOB_SITES.slice(8, 10),
  scale: scaleOf("globex")
}

const SPAN = 548 * DAY // about 18 months of history

type Tables = Map<string, Row[]>
const add = (tables: Tables, table: string, ...rows: Row[]) => {
  const list = tables.get(table) ?? []
  list.push(...rows)
  tables.set(table, list)
}
const ref = (row: Row): Ref => ({ id: row.id as string, name: (row.name as string) ?? "", at: row.created_at as Date })

/** A moment in the history, more of them recent than old (activity grew). */
const momentIn = (r: Random, now: Date, span = SPAN) => new Date(now.getTime() - span * (1 - Math.sqrt(r.next())))
const ageDays = (at: Date, now: Date) => (now.getTime() - at.getTime()) / DAY

/** Gives every status to at least one plan when there are enough plans, keeping the rest. */
const cover = <P extends { status: string }>(r: Random, plans: P[], statuses: ReadonlyArray<P["status"]>) => {
  const missing = statuses.filter((s) => !plans.some((p) => p.status === s))
  if (missing.length === 0) return
  const spare = r.sample(
    plans.map((_, i) => i),
    plans.length
  )
  for (const status of missing) {
    // take a plan whose status still has another representative
    const i = spare.find((k) => plans.filter((p) => p.status === plans[k]!.status).length > 1)
    if (i === undefined) return
    spare.splice(spare.indexOf(i), 1)
    plans[i]!.status = status
  }
}

const caStatusByAge = (r: Random, days: number): CaStatus =>
  days > 90
    ? r.weighted<CaStatus>({ verified: 45, completed: 35, in_progress: 10, open: 10 })
    : days > 30
      ? r.weighted<CaStatus>({ completed: 35, verified: 20, in_progress: 25, open: 20 })
      : r.weighted<CaStatus>({ open: 45, in_progress: 35, completed: 15, verified: 5 })

const changeStatusByAge = (r: Random, days: number): ChangeStatus =>
  days > 60
    ? r.weighted<ChangeStatus>({ closed: 45, implemented: 25, rejected: 20, approved: 5, draft: 5 })
    : r.weighted<ChangeStatus>({ draft: 20, submitted: 30, approved: 25, implemented: 15, rejected: 10 })

const permitStatusByAge = (r: Random, days: number): PermitStatus =>
  days > 14
    ? r.weighted<PermitStatus>({ closed: 75, cancelled: 12, rejected: 13 })
    : days > 2
      ? r.weighted<PermitStatus>({ active: 35, closed: 35, approved: 15, cancelled: 10, rejected: 5 })
      : r.weighted<PermitStatus>({ requested: 50, approved: 30, active: 20 })

const seedCompany = (r: Random, plan: CompanyPlan, now: Date, tables: Tables): SeededCompany => {
  const t0 = new Date(now.getTime() - SPAN - 30 * DAY)
  const company = {
    id: crypto.randomUUID(),
    name: plan.name,
    host: plan.host,
    tier: plan.tier,
    api_enabled: plan.apiEnabled,
    created_at: t0
  }
  const counts: Record<string, number> = {}
  const put = (table: string, ...rows: Row[]) => {
    add(tables, table, ...rows)
    counts[table] = (counts[table] ?? 0) + rows.length
  }
  put("companies", company)
  put(
    "company_modules",
    ...Object.entries(plan.modules).map(([module, enabled]) => ({ company_id: company.id, module, enabled }))
  )
  put(
    "users",
    ...plan.users.map((u, i) => ({
      id: crypto.randomUUID(),
      company_id: company.id,
      ...u,
      created_at: new Date(t0.getTime() + i * DAY)
    }))
  )

  const c: CompanyRefs = {
    companyId: company.id,
    slug: plan.slug,
    mailDomain: plan.mailDomain,
    jobSites: [],
    workers: [],
    equipment: [],
    subcontractors: [],
    staff: [...plan.users.map((u) => u.name), ...Array.from({ length: 8 }, () => C.personName(r))]
  }
  const s = plan.scale

  // Job sites: opened in the first weeks; the last one has since been closed.
  plan.sites.slice(0, s.jobSites).forEach((site, i) => {
    const row = jobSiteRow(r, c, site, new Date(t0.getTime() + (i * 3 + 1) * DAY), i < s.jobSites - 1 || s.jobSites < 3)
    put("job_sites", row)
    c.jobSites.push(ref(row))
  })

  // Subcontractors, one per documentStatus case first: missing, non_compliant (rejected,
  // expired), pending, then compliant.
  const cases = ["missing", "rejected", "expired", "pending", "compliant", "missing", "expired", "pending"] as const
  for (let i = 0; i < s.subcontractors; i++) {
    const at = new Date(t0.getTime() + r.int(2, 120) * DAY)
    const row = subcontractorRow(
      r,
      c,
      C.SUBCONTRACTOR_NAMES[i % C.SUBCONTRACTOR_NAMES.length]!,
      C.TRADES[i % C.TRADES.length]!,
      at,
      i !== 7
    )
    put("subcontractors", row)
    c.subcontractors.push(ref(row))
    const which = cases[i] ?? "compliant"
    if (which === "missing") continue
    const kinds = r.sample(["insurance", "license", "safety_program", "other"] as const, r.int(2, 4))
    kinds.forEach((kind, k) => {
      const status = k === 0 && which !== "compliant" ? which : "approved"
      put(
        "subcontractor_documents",
        subcontractorDocumentRow(r, c, row.id as string, kind, status, after(r, at, 30 * DAY, now), now)
      )
    })
  }

  // Workers: most hired at the start, the rest over time; a third from subcontractors.
  for (let i = 0; i < s.workers; i++) {
    const at = r.chance(0.6) ? new Date(t0.getTime() + r.int(1, 30) * DAY) : momentIn(r, now)
    const sub = c.subcontractors.length > 0 && r.chance(0.35) ? r.pick(c.subcontractors) : null
    const row = workerRow(r, c, at, sub?.name ?? plan.name, sub?.id ?? null, r.chance(0.9))
    put("workers", row)
    c.workers.push(ref(row))
  }

  for (let i = 0; i < s.equipment; i++) {
    const row = equipmentRow(r, c, new Date(t0.getTime() + r.int(2, 90) * DAY), 1001 + i)
    put("equipment", row)
    ;(c.equipment as EquipmentRef[]).push({ ...ref(row), category: row.category })
  }

  // Incidents, numbered in the order they were reported.
  const incidentTimes = Array.from({ length: s.incidents }, () => momentIn(r, now)).sort(
    (a, b) => a.getTime() - b.getTime()
  )
  const incidents = incidentTimes.map((at, i) => {
    const days = ageDays(at, now)
    const status =
      days < 7
        ? r.weighted({ open: 60, investigating: 40 })
        : days < 30
          ? r.weighted({ open: 20, investigating: 40, closed: 40 })
          : r.weighted({ closed: 90, investigating: 8, open: 2 })
    const updated = status === "open" ? at : after(r, at, Math.min(days, 30) * DAY, now)
    // Every type at least once, even in a small company.
    const types = ["injury", "illness", "near_miss", "property_damage", "environmental"] as const
    return incidentRow(
      r,
      c,
      at,
      `INC-${String(i + 1).padStart(4, "0")}`,
      status,
      updated,
      i < types.length ? types[i] : undefined
    )
  })
  put("incidents", ...incidents)

  const observations = Array.from({ length: s.observations }, () => {
    const at = momentIn(r, now)
    const closed = ageDays(at, now) > 14 ? r.chance(0.9) : r.chance(0.3)
    return observationRow(r, c, at, closed ? "closed" : "open", closed ? after(r, at, 14 * DAY, now) : at)
  })
  put("observations", ...observations)

  const audits = Array.from({ length: s.audits }, (_, i) => auditWithItems(r, c, momentIn(r, now), i % 12 !== 5))
  put("audits", ...audits.map((a) => a.row))
  put("audit_items", ...audits.flatMap((a) => a.items))

  const inspections = Array.from({ length: s.inspections }, () => inspectionWithItems(r, c, momentIn(r, now)))
  put("inspections", ...inspections.map((x) => x.row))
  put("inspection_items", ...inspections.flatMap((x) => x.items))

  const changePlans = Array.from({ length: s.changes }, () => {
    const at = momentIn(r, now)
    return { at, status: changeStatusByAge(r, ageDays(at, now)) }
  })
  cover(r, changePlans, CHANGE_STATUSES)
  const changes = changePlans.map((p) => changeRow(r, c, p.status, p.at, now))
  put("changes", ...changes)

  // Corrective actions: from the records that call for one, and raised on their own.
  const soon = (at: Date) => after(r, at, 2 * DAY, now)
  const caPlans: Array<{ source: CaSource; at: Date; links: CaLinks; status: CaStatus }> = []
  const raise = (source: CaSource, at: Date, links: CaLinks = {}) =>
    caPlans.push({ source, at, links, status: caStatusByAge(r, ageDays(at, now)) })
  for (const i of incidents) {
    const serious = i.severity === "serious" || i.severity === "critical"
    if (r.chance(serious ? 0.8 : 0.25)) raise("incident", soon(i.created_at as Date), { incident_id: i.id as string })
  }
  for (const o of observations) {
    if (o.type !== "safe_behavior" && r.chance(0.35))
      raise("observation", soon(o.created_at as Date), { observation_id: o.id as string })
  }
  for (const a of audits) {
    for (const item of a.items) {
      if (item.result === "fail" && r.chance(0.7))
        raise("audit", soon(a.row.created_at as Date), { audit_item_id: item.id as string })
    }
  }
  for (const x of inspections) {
    if (x.outcome !== "pass" && r.chance(0.8))
      raise("inspection", soon(x.row.created_at as Date), { inspection_id: x.row.id as string })
  }
  for (const ch of changes) {
    if ((ch.status === "approved" || ch.status === "implemented" || ch.status === "closed") && r.chance(0.6)) {
      raise("change", soon(ch.approved_at as Date), { change_id: ch.id as string })
    }
  }
  for (const source of ["maturity_gap", "gap_analysis_import", "manual", "assistant"] as const) {
    // An import lands as one batch at one moment.
    const importedAt = momentIn(r, now)
    for (let k = 0; k < s.standaloneActions * (source === "gap_analysis_import" ? 2 : 1); k++) {
      raise(source, source === "gap_analysis_import" ? importedAt : momentIn(r, now))
    }
  }
  for (const source of CA_SOURCES)
    cover(
      r,
      caPlans.filter((p) => p.source === source),
      CA_STATUSES
    )
  put("corrective_actions", ...caPlans.map((p) => correctiveActionRow(r, c, p.source, p.status, p.at, now, p.links)))

  put(
    "training_records",
    ...Array.from({ length: s.training }, () => {
      const at = momentIn(r, now)
      return trainingRow(r, c, at, r.pick(c.workers.filter((w) => w.at <= at).concat(c.workers.slice(0, 1))))
    })
  )

  const permitPlans = Array.from({ length: s.permits }, () => {
    const at = momentIn(r, now)
    return { at, status: permitStatusByAge(r, ageDays(at, now)) }
  })
  cover(r, permitPlans, PERMIT_STATUSES)
  put("permits", ...permitPlans.map((p) => permitRow(r, c, p.status, p.at, now)))

  const roster = c.workers
  C.POLICIES.slice(0, s.policies).forEach((title, i) => {
    const status = i === 3 ? "draft" : i === 6 ? "archived" : i === 9 ? "draft" : "published"
    const at = new Date(t0.getTime() + r.int(1, 400) * DAY)
    const policy = policyRow(r, c, title, status, at, now)
    put("policies", policy)
    if (status === "draft") return
    const from = policy.effective_at as Date
    const readers = r.sample(roster, Math.round(roster.length * r.pick([0.3, 0.5, 0.7, 0.9])))
    put(
      "policy_acknowledgements",
      ...readers.map((w) => {
        const start = new Date(Math.max(from.getTime(), w.at.getTime()))
        return acknowledgementRow(r, c, policy.id as string, w.id, after(r, start, 60 * DAY, now))
      })
    )
  })

  put("sds", ...r.sample(C.SDS_PRODUCTS, s.sds).map((p) => sdsRow(r, c, p, momentIn(r, now))))

  put(
    "risk_assessments",
    ...Array.from({ length: s.riskAssessments }, (_, i) =>
      riskAssessmentRow(r, c, momentIn(r, now), i % 6 === 0 ? "draft" : i % 6 === 5 ? "archived" : "approved")
    )
  )

  return {
    name: plan.name,
    host: plan.host,
    tier: plan.tier,
    companyId: company.id,
    adminEmail: plan.users.find((u) => u.role === "admin")!.email,
    counts
  }
}

const seedInto = async (tx: Sql, started: number): Promise<SeedSummary> => {
  const r = seededRandom(DEMO_SEED)
  // Whole seconds keep the demo's timestamps easy to read.
  const now = new Date(Math.floor(Date.now() / 1000) * 1000 - HOUR)
  const tables: Tables = new Map()
  const companies = [ACME, GLOBEX].map((plan) => seedCompany(r, plan, now, tables))
  const counts: Record<string, number> = {}
  for (const table of APP_TABLES) counts[table] = await insertRows(tx, table, tables.get(table) ?? [])
  const acme = companies[0]!
  return {
    company: acme.name,
    companyId: acme.companyId,
    host: acme.host,
    adminEmail: acme.adminEmail,
    counts,
    companies,
    elapsedMs: Date.now() - started
  }
}

/** Inserts the demo companies and their records in one transaction. */
export const seedDemo = async (sql: Sql): Promise<SeedSummary> => {
  const started = Date.now()
  return sql.begin((tx) => seedInto(tx as unknown as Sql, started)) as Promise<SeedSummary>
}

const SEED_LOCK = 7_351_009_003 // arbitrary, stable: "demo seeding"

export type SeedOnceResult =
  | { readonly seeded: true; readonly summary: SeedSummary }
  | { readonly seeded: false; readonly companyId: string; readonly host: string }

/** Seeds unless the demo company is already there; two at once seed once. */
export const seedDemoOnce = async (sql: Sql): Promise<SeedOnceResult> => {
  const started = Date.now()
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${SEED_LOCK})`
    const [found] = await tx<{ id: string }[]>`select id from app.companies where lower(host) = ${DEMO_HOST}`
    if (found) return { seeded: false as const, companyId: found.id, host: DEMO_HOST }
    return { seeded: true as const, summary: await seedInto(tx as unknown as Sql, started) }
  }) as Promise<SeedOnceResult>
}
