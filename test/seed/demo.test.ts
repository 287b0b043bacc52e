// The demo seeder fills every app table the way the app would, NEVER columns included.
import { beforeAll, describe, expect, it } from "vitest"
import { RESOURCES } from "../../src/domain/resources.ts"
import { APP_TABLES, DEMO_HOST, seedDemoOnce, type SeedSummary } from "../../src/seed/demo.ts"
import { freshDatabase, type TestDatabase } from "../support/db.ts"
import { useDatabase } from "../support/fixtures.ts"

// Every NEVER column (docs/privacy.md#never-columns), per table.
const NEVER: Record<string, ReadonlyArray<string>> = {
  job_sites: ["qr_code"],
  workers: ["phone", "email", "photo_url", "qr_code", "work_restrictions", "medical_notes"],
  incidents: ["photos", "voice_note_url", "signature", "work_restrictions"],
  observations: ["photos", "voice_note_url"],
  corrective_actions: ["evidence_photos", "signature"],
  audits: ["signature"],
  audit_items: ["photos"],
  equipment: ["qr_code"],
  inspections: ["signature", "photos"],
  inspection_items: ["photo"],
  training_records: ["certificate_file", "signature"],
  changes: ["attachments"],
  permits: ["signature"],
  policies: ["document_file"],
  policy_acknowledgements: ["signature"],
  sds: ["file_url", "qr_code"],
  subcontractors: ["contact_phone", "contact_email"],
  subcontractor_documents: ["file_url"]
}

const seed = async (db: TestDatabase) => {
  const result = await seedDemoOnce(db.sql)
  if (!result.seeded) throw new Error("expected a first seed")
  return result.summary
}

const distinct = async (db: TestDatabase, table: string, column: string) =>
  (
    await db.sql<
      { v: string }[]
    >`select distinct ${db.sql(column)}::text as v from ${db.sql(`app.${table}`)} order by 1`
  ).map((r) => r.v)

describe("demo seed", () => {
  const db = useDatabase()
  let summary: SeedSummary
  beforeAll(async () => {
    summary = await seed(db)
  })

  // (How long it takes is not asserted here: a test's clock reads the machine's load.)
  it("seeds everything in one go", () => {
    expect(summary.host).toBe(DEMO_HOST)
    expect(summary.adminEmail).toBe("admin@acme.example")
  })

  it("fills every app table, and its counts are true", async () => {
    const tables = await db.sql<
      { table_name: string }[]
    >`select table_name from information_schema.tables where table_schema = 'app'`
    expect(tables.map((t) => t.table_name).sort()).toEqual([...APP_TABLES].sort())
    for (const table of APP_TABLES) {
      const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from ${db.sql(`app.${table}`)}`
      expect(row!.n, table).toBeGreaterThan(0)
      expect(summary.counts[table], table).toBe(row!.n)
    }
    const acme = summary.companies[0]!.counts
    expect(acme.job_sites).toBe(8)
    expect(acme.workers).toBe(120)
    expect(acme.equipment).toBe(30)
    expect(acme.incidents).toBe(300)
    expect(acme.observations).toBe(200)
    expect(acme.audits).toBe(40)
    expect(acme.inspections).toBe(150)
    expect(acme.training_records).toBe(300)
  })

  it("sets up the two companies' tenancy: tiers, modules, users", async () => {
    const companies = await db.sql`select name, host, tier, api_enabled from app.companies order by host`
    expect(companies).toEqual([
      { name: "Acme Construction", host: "acme.localhost", tier: "company", api_enabled: true },
      { name: "Globex Builders", host: "globex.localhost", tier: "team", api_enabled: true }
    ])
    const modules = await db.sql<{ host: string; module: string; enabled: boolean }[]>`
      select c.host, m.module, m.enabled from app.company_modules m join app.companies c on c.id = m.company_id`
    const acme = modules.filter((m) => m.host === DEMO_HOST)
    expect(acme.map((m) => m.module).sort()).toEqual([...RESOURCES].sort())
    expect(acme.every((m) => m.enabled)).toBe(true)
    const globex = modules.filter((m) => m.host === "globex.localhost")
    expect(globex.some((m) => !m.enabled)).toBe(true) // explicitly off
    expect(globex.length).toBeLessThan(RESOURCES.length) // a missing row is off too
    const users = await db.sql`select u.email, u.role from app.users u join app.companies c on c.id = u.company_id
      where c.host = ${DEMO_HOST} order by u.email`
    expect(users).toContainEqual({ email: "admin@acme.example", role: "admin" })
    expect(users.some((u) => u.role === "member")).toBe(true)
  })

  it("fills every NEVER column in some rows", async () => {
    for (const [table, columns] of Object.entries(NEVER)) {
      for (const column of columns) {
        const [row] = await db.sql<{ n: number }[]>`
          select count(*)::int as n from ${db.sql(`app.${table}`)} where ${db.sql(column)} is not null`
        expect(row!.n, `${table}.${column}`).toBeGreaterThan(0)
      }
    }
  })

  it("covers every allowed value that the API and events turn on", async () => {
    expect(await distinct(db, "corrective_actions", "status")).toEqual(["completed", "in_progress", "open", "verified"])
    expect(await distinct(db, "corrective_actions", "source")).toEqual([
      "assistant",
      "audit",
      "change",
      "gap_analysis_import",
      "incident",
      "inspection",
      "manual",
      "maturity_gap",
      "observation"
    ])
    // Acme has every status from every source.
    const pairs = await db.sql<{ source: string; n: number }[]>`
      select source, count(distinct status)::int as n from app.corrective_actions a join app.companies c on c.id = a.company_id
      where c.host = ${DEMO_HOST} group by source`
    expect(pairs.length).toBe(9)
    for (const p of pairs) expect(p.n, p.source).toBe(4)
    expect(await distinct(db, "incidents", "type")).toEqual([
      "environmental",
      "illness",
      "injury",
      "near_miss",
      "property_damage"
    ])
    expect(await distinct(db, "incidents", "severity")).toEqual(["critical", "minor", "moderate", "serious"])
    expect(await distinct(db, "incidents", "reported_via")).toEqual(["app", "assistant", "qr"])
    expect(await distinct(db, "observations", "type")).toEqual([
      "near_miss",
      "safe_behavior",
      "unsafe_act",
      "unsafe_condition"
    ])
    expect(await distinct(db, "changes", "status")).toEqual([
      "approved",
      "closed",
      "draft",
      "implemented",
      "rejected",
      "submitted"
    ])
    expect(await distinct(db, "permits", "status")).toEqual([
      "active",
      "approved",
      "cancelled",
      "closed",
      "rejected",
      "requested"
    ])
    expect(await distinct(db, "inspections", "outcome")).toEqual(["fail", "needs_attention", "pass"])
    expect(await distinct(db, "inspection_items", "result")).toEqual(["fail", "na", "pass"])
    expect(await distinct(db, "audit_items", "result")).toEqual(["fail", "na", "pass"])
    expect(await distinct(db, "policies", "status")).toEqual(["archived", "draft", "published"])
    expect(await distinct(db, "sds", "signal_word")).toEqual(["danger", "warning", null])
    expect(await distinct(db, "risk_assessments", "status")).toEqual(["approved", "archived", "draft"])
  })

  it("links corrective actions to the record they came from", async () => {
    const rows = await db.sql<{ source: string; linked: number; n: number }[]>`
      select source, count(*)::int as n, count(coalesce(incident_id, observation_id, audit_item_id, inspection_id, change_id))::int as linked
      from app.corrective_actions group by source`
    const by = Object.fromEntries(rows.map((r) => [r.source, r]))
    for (const source of ["incident", "observation", "audit", "inspection", "change"])
      expect(by[source]!.linked, source).toBe(by[source]!.n)
    for (const source of ["maturity_gap", "gap_analysis_import", "manual", "assistant"])
      expect(by[source]!.linked, source).toBe(0)
    const [closed] = await db.sql<{ bad: number }[]>`select count(*)::int as bad from app.corrective_actions
      where (status in ('completed', 'verified')) <> (completed_at is not null)`
    expect(closed!.bad).toBe(0)
  })

  it("has privacy cases with the person's details filled, and OSHA recordables", async () => {
    const [row] = await db.sql<{ privacy: number; osha: number; other: number }[]>`
      select count(*) filter (where privacy_case and person_name is not null and body_part is not null
                                and injury_type is not null and description is not null and location is not null)::int as privacy,
             count(*) filter (where osha_recordable)::int as osha,
             count(*) filter (where not privacy_case and person_name is not null)::int as other
      from app.incidents`
    expect(row!.privacy).toBeGreaterThan(5)
    expect(row!.osha).toBeGreaterThan(20)
    expect(row!.other).toBeGreaterThan(20)
  })

  it("tells each incident one story: a title has one description, injury type and body part", async () => {
    const mixed = await db.sql`
      select title from app.incidents
      group by title
      having count(distinct regexp_replace(description, ', reported at .*$', '')) > 1
          or count(distinct coalesce(injury_type, '-')) > 1 or count(distinct coalesce(body_part, '-')) > 1`
    expect(mixed).toEqual([])
    const [row] = await db.sql<{ bad: number }[]>`select count(*)::int as bad from app.incidents
      where (injury_type is not null) <> (type in ('injury', 'illness')) or (body_part is not null) <> (type = 'injury')`
    expect(row!.bad).toBe(0)
  })

  it("gives every risk assessment its hazards as a JSON array of {hazard, likelihood, severity, controls}", async () => {
    const rows = await db.sql<
      { kind: string; n: number }[]
    >`select jsonb_typeof(hazards) as kind, count(*)::int as n from app.risk_assessments group by 1`
    expect(rows).toEqual([{ kind: "array", n: expect.any(Number) }])
    const [bad] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from app.risk_assessments, jsonb_array_elements(hazards) h
      where not (h ? 'hazard' and h ? 'likelihood' and h ? 'severity' and h ? 'controls')`
    expect(bad!.n).toBe(0)
    const [some] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from app.risk_assessments where jsonb_array_length(hazards) > 0`
    expect(some!.n).toBeGreaterThan(0)
  })

  it("has a subcontractor for every documentStatus case", async () => {
    const rows = await db.sql<{ status: string }[]>`
      select case
        when count(d.id) = 0 then 'missing'
        when bool_or(d.status in ('rejected', 'expired')) then 'non_compliant'
        when bool_or(d.status = 'pending') then 'pending'
        else 'compliant' end as status
      from app.subcontractors s left join app.subcontractor_documents d on d.subcontractor_id = s.id
      group by s.id`
    expect(new Set(rows.map((r) => r.status))).toEqual(new Set(["missing", "non_compliant", "pending", "compliant"]))
    expect(await distinct(db, "subcontractor_documents", "status")).toEqual([
      "approved",
      "expired",
      "pending",
      "rejected"
    ])
  })

  it("spreads records over about 18 months, updated_at never before created_at", async () => {
    const [span] = await db.sql<{ oldest: number; newest: number }[]>`
      select extract(epoch from now() - min(created_at)) / 86400 as oldest, extract(epoch from now() - max(created_at)) / 86400 as newest
      from app.incidents`
    expect(Number(span!.oldest)).toBeGreaterThan(365)
    expect(Number(span!.oldest)).toBeLessThan(600)
    expect(Number(span!.newest)).toBeLessThan(7)
    for (const table of APP_TABLES) {
      const cols =
        await db.sql`select 1 from information_schema.columns where table_schema = 'app' and table_name = ${table} and column_name = 'updated_at'`
      if (cols.length === 0) continue
      const [row] = await db.sql<{ n: number; future: number }[]>`
        select count(*) filter (where updated_at < created_at)::int as n, count(*) filter (where updated_at > now() or created_at > now())::int as future
        from ${db.sql(`app.${table}`)}`
      expect(row!.n, table).toBe(0)
      expect(row!.future, table).toBe(0)
    }
    const [expiring] = await db.sql<{ soon: number; lapsed: number }[]>`
      select count(*) filter (where expires_at between now() and now() + interval '60 days')::int as soon,
             count(*) filter (where expires_at < now())::int as lapsed
      from app.training_records`
    expect(expiring!.soon).toBeGreaterThan(0)
    expect(expiring!.lapsed).toBeGreaterThan(0)
  })

  it("is a no-op the second time", async () => {
    const before = await db.sql`select count(*)::int as n from app.incidents`
    const again = await seedDemoOnce(db.sql)
    expect(again.seeded).toBe(false)
    expect(await db.sql`select count(*)::int as n from app.incidents`).toEqual(before)
    expect(await db.sql`select count(*)::int as n from app.companies`).toEqual([{ n: 2 }])
  })

  it("gives the same shape on another database", async () => {
    const other = await freshDatabase()
    try {
      const second = await seed(other)
      expect(second.counts).toEqual(summary.counts)
      const shape = (d: TestDatabase) => d.sql`
        select 'ca' as t, source || '/' || status as k, count(*)::int as n from app.corrective_actions group by 1, 2
        union all select 'inc', type || '/' || severity || '/' || status || '/' || privacy_case, count(*)::int from app.incidents group by 1, 2
        union all select 'insp', outcome, count(*)::int from app.inspections group by 1, 2
        order by 1, 2`
      expect(await shape(other)).toEqual(await shape(db))
    } finally {
      await other.drop()
    }
  })
})
