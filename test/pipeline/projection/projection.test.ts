// Views through the real stream: children and referenced rows re-project their parents,
// privacy cases hide their fields, and no NEVER value reaches a view, the mirror or the outbox.
import { describe, expect, it } from "vitest"
import { NEVER_COLUMNS } from "../../../src/domain/records/index.ts"
import { decodeMirrorData } from "../../../src/pipeline/projection/mirror-codec.ts"
import { seedDemo } from "../../../src/seed/demo.ts"
import { simulate } from "../../../src/seed/simulate.ts"
import { insertIncident } from "../../support/app.ts"
import { useCaptureWorld, view } from "../../support/capture.ts"
import { WITHHELD_IN_A_PRIVACY_CASE } from "../../support/views.ts"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"

describe("projection through the stream", () => {
  const { db, cap, company } = useCaptureWorld()

  it("an inspection shows its equipment and the site's name, and follows renames", async () => {
    const [site] = await db.sql<
      { id: string }[]
    >`insert into app.job_sites (company_id, name) values (${company.id}, 'Harbour') returning id::text`
    const [eq] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, identifier, category, job_site_id, qr_code)
      values (${company.id}, 'Forklift 2', 'FL-2', 'vehicle', ${site!.id}, 'NEVER-qr') returning id::text`
    const [ins] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome, signature)
      values (${company.id}, ${eq!.id}, 'Pre-use', 'Jo', '2026-05-01T08:00:00Z', 'pass', 'NEVER-sig') returning id::text`
    await cap.settle()
    expect(await view(db.sql, "inspections", ins!.id)).toEqual({
      id: ins!.id,
      equipment: { id: eq!.id, name: "Forklift 2", identifier: "FL-2", category: "vehicle", jobSite: "Harbour" },
      checklist: "Pre-use",
      performedBy: "Jo",
      performedAt: "2026-05-01T08:00:00.000Z",
      outcome: "pass",
      notes: null,
      items: [],
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    })
    await db.sql`update app.job_sites set name = 'Harbour East' where id = ${site!.id}`
    await cap.settle()
    expect(((await view(db.sql, "inspections", ins!.id))!.equipment as { jobSite: string }).jobSite).toBe(
      "Harbour East"
    )
    expect((await view(db.sql, "job-sites", site!.id))?.name).toBe("Harbour East")
    await db.sql`update app.equipment set name = 'Forklift 2B' where id = ${eq!.id}`
    await cap.settle()
    expect(((await view(db.sql, "inspections", ins!.id))!.equipment as { name: string }).name).toBe("Forklift 2B")
    await db.sql`insert into app.inspection_items (inspection_id, position, item, result) values (${ins!.id}, 1, 'Horn', 'pass')`
    await cap.settle()
    expect((await view(db.sql, "inspections", ins!.id))?.items).toEqual([{ item: "Horn", result: "pass", note: null }])
  })

  it("a site's rename reaches every inspection at it, chunk after chunk, with those its transaction changed", {
    timeout: 60_000
  }, async () => {
    const [site, other] = await db.sql<{ id: string }[]>`
      insert into app.job_sites (company_id, name) values (${company.id}, 'Quay'), (${company.id}, 'Depot') returning id::text`
    const eqs = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, identifier, category, job_site_id)
      select ${company.id}, 'Crane ' || g, 'CR-' || g, 'lifting', ${site!.id} from generate_series(1, 3) g returning id::text`
    // 1,201 inspections over three pieces of equipment: many of capture's chunks, the last one short.
    await db.sql`
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome)
      select ${company.id}, (${eqs.map((e) => e.id)}::uuid[])[1 + g % 3], 'Daily', 'Ann', now(), 'pass' from generate_series(1, 1201) g`
    const [elsewhere] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, identifier, category, job_site_id)
      values (${company.id}, 'Hoist', 'HO-1', 'lifting', ${other!.id}) returning id::text`
    const [kept] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome)
      values (${company.id}, ${elsewhere!.id}, 'Daily', 'Ann', now(), 'pass') returning id::text`
    await cap.settle(30_000)
    const ours = [...eqs, elsewhere!].map((e) => e.id)
    const sites = async () =>
      await db.sql<{ site: string; n: number }[]>`
        select body::jsonb->'equipment'->>'jobSite' as site, count(*)::int as n from service.views
        where resource = 'inspections' and (body::jsonb->'equipment'->>'id')::uuid = any(${ours}::uuid[]) group by 1 order by 1`
    expect(await sites()).toEqual([
      { site: "Depot", n: 1 },
      { site: "Quay", n: 1201 }
    ])
    // One transaction renames the site, changes one of its inspections and adds another.
    const [changed] = await db.sql<
      { id: string }[]
    >`select id::text from app.inspections where equipment_id = ${eqs[0]!.id} limit 1`
    await db.sql.begin(async (tx) => {
      await tx`update app.job_sites set name = 'Quay North' where id = ${site!.id}`
      await tx`update app.inspections set outcome = 'fail' where id = ${changed!.id}`
      await tx`
        insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome)
        values (${company.id}, ${eqs[1]!.id}, 'Weekly', 'Bo', now(), 'pass')`
    })
    await cap.settle(30_000)
    expect(await sites()).toEqual([
      { site: "Depot", n: 1 },
      { site: "Quay North", n: 1202 }
    ])
    expect((await view(db.sql, "inspections", changed!.id))?.outcome).toBe("fail")
    // Equipment moved to the other site takes its inspections' site along; the rest stay.
    await db.sql`update app.equipment set job_site_id = ${other!.id} where id = ${eqs[2]!.id}`
    await cap.settle(30_000)
    const [moved] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from app.inspections where equipment_id = ${eqs[2]!.id}`
    expect(await sites()).toEqual([
      { site: "Depot", n: 1 + moved!.n },
      { site: "Quay North", n: 1202 - moved!.n }
    ])
    expect(((await view(db.sql, "inspections", kept!.id))!.equipment as { jobSite: string }).jobSite).toBe("Depot")
  })

  it("audit items, acknowledgements and subcontractor documents re-project their parents", async () => {
    const [a] = await db.sql<
      { id: string }[]
    >`insert into app.audits (company_id, title, performed_at) values (${company.id}, 'Q2 audit', now()) returning id::text`
    const [item] = await db.sql<
      { id: string }[]
    >`insert into app.audit_items (audit_id, position, item, result) values (${a!.id}, 1, 'Exits', 'pass') returning id::text`
    const [p] = await db.sql<
      { id: string }[]
    >`insert into app.policies (company_id, title, status) values (${company.id}, 'PPE policy', 'published') returning id::text`
    const [s] = await db.sql<
      { id: string }[]
    >`insert into app.subcontractors (company_id, name, contact_phone) values (${company.id}, 'Sparks Ltd', 'NEVER-phone') returning id::text`
    await cap.settle()
    expect((await view(db.sql, "subcontractors", s!.id))?.documentStatus).toBe("missing")
    await db.sql`update app.audit_items set result = 'fail', note = 'blocked' where id = ${item!.id}`
    await db.sql`insert into app.policy_acknowledgements (policy_id) values (${p!.id}), (${p!.id})`
    const [d] = await db.sql<
      { id: string }[]
    >`insert into app.subcontractor_documents (subcontractor_id, kind, status) values (${s!.id}, 'insurance', 'approved') returning id::text`
    await cap.settle()
    expect((await view(db.sql, "audits", a!.id))?.items).toEqual([
      { id: item!.id, item: "Exits", result: "fail", note: "blocked" }
    ])
    expect((await view(db.sql, "policies", p!.id))?.acknowledgementCount).toBe(2)
    expect((await view(db.sql, "subcontractors", s!.id))?.documentStatus).toBe("compliant")
    await db.sql`update app.subcontractor_documents set status = 'expired' where id = ${d!.id}`
    await db.sql`delete from app.policy_acknowledgements where policy_id = ${p!.id} and ctid = (select min(ctid) from app.policy_acknowledgements where policy_id = ${p!.id})`
    await db.sql`delete from app.audit_items where id = ${item!.id}`
    await cap.settle()
    expect((await view(db.sql, "subcontractors", s!.id))?.documentStatus).toBe("non_compliant")
    expect((await view(db.sql, "policies", p!.id))?.acknowledgementCount).toBe(1)
    expect((await view(db.sql, "audits", a!.id))?.items).toEqual([])
  })

  it("a privacy case hides the person, location, description, body part and injury type", async () => {
    const id = await insertIncident(db.sql, company.id, {
      privacy_case: true,
      person_name: "Jane Doe",
      body_part: "hand",
      injury_type: "laceration",
      location: "Bay 4",
      description: "Cut on sheet metal"
    })
    await cap.settle()
    const v = await view(db.sql, "incidents", id)
    expect(v).toMatchObject({
      privacyCase: true,
      ...WITHHELD_IN_A_PRIVACY_CASE
    })
    await db.sql`update app.incidents set privacy_case = false where id = ${id}`
    await cap.settle()
    expect((await view(db.sql, "incidents", id))?.personName).toBe("Jane Doe")
  })

  it("no NEVER value reaches a view, the mirror or an event payload", async () => {
    await seedDemo(db.sql)
    // Every NEVER column of every row holds a marker before and while the app keeps writing.
    for (const [table, cols] of Object.entries(NEVER_COLUMNS)) {
      for (const col of cols) {
        const [column] = await db.sql<{ type: string }[]>`
          select data_type as type from information_schema.columns where table_schema = 'app' and table_name = ${table} and column_name = ${col}`
        const type = column!.type
        const marker = `NEVER-marker-${table}-${col}`
        await db.sql.unsafe(
          `update app.${table} set ${col} = ${type === "ARRAY" ? `array['${marker}']` : `'${marker}'`}`
        )
      }
    }
    await simulate(db.sql, { rate: Infinity, maxOperations: 300, company: "acme.localhost", seed: 7 })
    await cap.settle(60_000)
    const [views] = await db.sql<
      { n: number; total: number }[]
    >`select count(*) filter (where body like '%NEVER-marker%')::int as n, count(*)::int as total from service.views`
    const [events] = await db.sql<
      { n: number; total: number }[]
    >`select count(*) filter (where ${db.sql.unsafe(eventPayload("e"))} like '%NEVER-marker%')::int as n, count(*)::int as total from service.events e`
    const [mirror] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.rows where data::text like '%NEVER-marker%'`
    expect(views!.total).toBeGreaterThan(1000)
    expect(events!.total).toBeGreaterThan(50)
    expect(views!.n).toBe(0)
    expect(events!.n).toBe(0)
    expect(mirror!.n).toBe(0)
    // Nor do the NEVER column names appear as keys.
    const keys = Object.values(NEVER_COLUMNS)
      .flat()
      .map((c) => c.replace(/_(\w)/g, (_, x: string) => x.toUpperCase()))
    const [leak] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.views v, jsonb_object_keys(v.body::jsonb) k where k = any(${keys}::text[])`
    expect(leak!.n).toBe(0)
    // The mirror holds every row by position (mirror-codec.ts), and no NEVER column under any name.
    const stored = await db.sql<{ tbl: string; data: string }[]>`select tbl, data from service.rows`
    expect(stored.length).toBeGreaterThan(1000)
    expect(stored.filter((r) => !r.data.startsWith("[")).map((r) => r.tbl)).toEqual([])
    const named = stored.flatMap((r) => {
      const row = decodeMirrorData(r.tbl, r.data)
      return (NEVER_COLUMNS[r.tbl] ?? []).filter((c) => c in row).map((c) => `${r.tbl}.${c}`)
    })
    expect(named).toEqual([])
  })
})
