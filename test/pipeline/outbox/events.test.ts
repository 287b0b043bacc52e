// Each event rule of docs/events.md#event-kinds, through the real WAL stream.
import { describe, expect, it } from "vitest"
import { insertAction, insertIncident } from "../../support/app.ts"
import { outbox, useCaptureWorld, view } from "../../support/capture.ts"

describe("events from the stream", () => {
  const { db, cap, company } = useCaptureWorld()
  const eventsOf = async (id: string) => (await outbox(db.sql)).filter((e) => e.record_id === id).map((e) => e.event)

  const equipment = async () => {
    const [site] = await db.sql<
      { id: string }[]
    >`insert into app.job_sites (company_id, name) values (${company.id}, 'North Yard') returning id::text`
    const [e] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, identifier, category, job_site_id) values (${company.id}, 'Crane 7', 'CR-7', 'lifting', ${site!.id}) returning id::text`
    return { site: site!.id, equipment: e!.id }
  }

  it("insert as completed fires created and closed, in that order", async () => {
    const id = await insertAction(db.sql, company.id, { status: "completed", completed_at: new Date() })
    await cap.settle()
    expect(await eventsOf(id)).toEqual(["corrective_action.created", "corrective_action.closed"])
  })

  it("reopen then close fires closed again", async () => {
    const id = await insertAction(db.sql, company.id)
    await db.sql`update app.corrective_actions set status = 'completed' where id = ${id}`
    await db.sql`update app.corrective_actions set status = 'in_progress' where id = ${id}`
    await db.sql`update app.corrective_actions set status = 'verified' where id = ${id}`
    await cap.settle()
    expect(await eventsOf(id)).toEqual([
      "corrective_action.created",
      "corrective_action.closed",
      "corrective_action.closed"
    ])
  })

  it("closed and reopened within one transaction fires nothing", async () => {
    const id = await insertAction(db.sql, company.id, { status: "in_progress" })
    await db.sql.begin(async (tx) => {
      await tx`update app.corrective_actions set status = 'completed' where id = ${id}`
      await tx`update app.corrective_actions set status = 'open' where id = ${id}`
    })
    await cap.settle()
    expect(await eventsOf(id)).toEqual(["corrective_action.created"])
  })

  it("an inspection updated to fail fires inspection.failed once, with its items and equipment", async () => {
    const { equipment: eq } = await equipment()
    const [i] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome, notes)
      values (${company.id}, ${eq}, 'Daily crane check', 'Lee', now(), 'needs_attention', 'hook worn') returning id::text`
    await db.sql.begin(async (tx) => {
      await tx`insert into app.inspection_items (inspection_id, position, item, result, note) values (${i!.id}, 2, 'Hook', 'fail', 'worn'), (${i!.id}, 1, 'Brakes', 'pass', null)`
      await tx`update app.inspections set outcome = 'fail' where id = ${i!.id}`
    })
    await db.sql`update app.inspections set notes = 'still failing' where id = ${i!.id}`
    await cap.settle()
    const events = (await outbox(db.sql)).filter((e) => e.record_id === i!.id)
    expect(events.map((e) => e.event)).toEqual(["inspection.failed"])
    expect(events[0]!.data.items).toEqual([
      { item: "Brakes", result: "pass", note: null },
      { item: "Hook", result: "fail", note: "worn" }
    ])
    expect(events[0]!.data.equipment).toMatchObject({ id: eq, name: "Crane 7", jobSite: "North Yard" })
    expect(events[0]!.data.notes).toBe("hook worn")
    expect((await view(db.sql, "inspections", i!.id))?.notes).toBe("still failing")
  })

  it("a change inserted as approved fires approved; implemented later fires implemented", async () => {
    const [c] = await db.sql<{ id: string }[]>`
      insert into app.changes (company_id, title, status, requested_by, approved_by, approved_at)
      values (${company.id}, 'New scaffold supplier', 'approved', 'Kim', 'Lee', now()) returning id::text`
    await db.sql`update app.changes set status = 'implemented', implemented_at = now() where id = ${c!.id}`
    await db.sql`update app.changes set status = 'closed' where id = ${c!.id}`
    await cap.settle()
    expect(await eventsOf(c!.id)).toEqual(["change.approved", "change.implemented"])
  })

  it("permits fire approved and closed on those transitions only", async () => {
    const [p] = await db.sql<{ id: string }[]>`
      insert into app.permits (company_id, type, title, status) values (${company.id}, 'hot_work', 'Welding bay 3', 'requested') returning id::text`
    for (const status of ["approved", "active", "closed"])
      await db.sql`update app.permits set status = ${status} where id = ${p!.id}`
    await cap.settle()
    expect(await eventsOf(p!.id)).toEqual(["permit.approved", "permit.closed"])
  })

  it("an audit inserted with its items carries them in audit.created", async () => {
    const [a] = await db.sql.begin(async (tx) => {
      const rows = await tx<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_by, performed_at, score) values (${company.id}, 'Monthly site audit', 'Pat', now(), 87.5) returning id::text`
      await tx`insert into app.audit_items (audit_id, position, item, result) values (${rows[0]!.id}, 1, 'Guardrails', 'pass'), (${rows[0]!.id}, 2, 'Signage', 'fail')`
      return rows
    })
    await cap.settle()
    const [e] = (await outbox(db.sql)).filter((x) => x.record_id === a!.id)
    expect(e?.event).toBe("audit.created")
    expect(e?.data.score).toBe(87.5)
    expect((e!.data.items as Array<{ item: string }>).map((x) => x.item)).toEqual(["Guardrails", "Signage"])
  })

  it("a module turned off at that moment writes no event; the view is still kept", async () => {
    await db.sql`update app.company_modules set enabled = false where company_id = ${company.id} and module = 'incidents'`
    const off = await insertIncident(db.sql, company.id)
    await db.sql`update app.company_modules set enabled = true where company_id = ${company.id} and module = 'incidents'`
    const on = await insertIncident(db.sql, company.id)
    await cap.settle()
    expect(await eventsOf(off)).toEqual([])
    expect(await eventsOf(on)).toEqual(["incident.created"])
    expect(await view(db.sql, "incidents", off)).toBeDefined()
  })

  it("training records and observations fire created", async () => {
    const [w] = await db.sql<
      { id: string }[]
    >`insert into app.workers (company_id, name) values (${company.id}, 'Ana') returning id::text`
    const [t] = await db.sql<{ id: string }[]>`
      insert into app.training_records (company_id, worker_id, course, completed_at, via) values (${company.id}, ${w!.id}, 'Working at height', now(), 'qr_course') returning id::text`
    const [o] = await db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at, reported_via) values (${company.id}, 'unsafe_act', 'No harness', now(), 'qr') returning id::text`
    await cap.settle()
    expect(await eventsOf(t!.id)).toEqual(["training_record.created"])
    expect(await eventsOf(o!.id)).toEqual(["observation.created"])
  })

  it("events are ordered and unique by (commit LSN, index)", async () => {
    const all = await outbox(db.sql)
    const keys = all.map((e) => `${e.commit_lsn}/${e.seq}`)
    expect(new Set(keys).size).toBe(keys.length)
  })
})
