import { describe, expect, it } from "vitest"
import { outbox, useCaptureWorld, view } from "../../support/capture.ts"
import { insertAction, insertIncident } from "../../support/app.ts"
import { WITHHELD_IN_A_PRIVACY_CASE } from "../../support/views.ts"

describe("capture", () => {
  const { db, cap, company } = useCaptureWorld()

  it("projects an inserted incident and fires incident.created once", async () => {
    const id = await insertIncident(db.sql, company.id, { photos: ["NEVER-photo"] })
    await cap.settle()
    const v = await view(db.sql, "incidents", id)
    expect(v?.id).toBe(id)
    expect(v?.occurredAt).toBe("2026-03-04T05:06:07.089Z")
    expect(JSON.stringify(v)).not.toContain("NEVER")
    const events = (await outbox(db.sql)).filter((e) => e.record_id === id)
    expect(events.map((e) => e.event)).toEqual(["incident.created"])
    expect(events[0]!.data).toEqual(v)
  })

  it("an update that changes a record's id moves it: nothing is left under the old id", async () => {
    const id = await insertIncident(db.sql, company.id)
    await cap.settle()
    const [{ moved }] = (await db.sql<
      { moved: string }[]
    >`update app.incidents set id = gen_random_uuid() where id = ${id} returning id::text as moved`) as unknown as [
      { moved: string }
    ]
    await cap.settle()
    expect(await view(db.sql, "incidents", id)).toBeUndefined()
    expect((await view(db.sql, "incidents", moved))?.id).toBe(moved)
    const [mirror] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.rows where tbl = 'incidents' and key = ${id}`
    expect(mirror!.n).toBe(0)
  })

  it("a TRUNCATE takes rows the same transaction wrote before it too", async () => {
    const before = await insertIncident(db.sql, company.id)
    await cap.settle()
    let during = ""
    await db.sql.begin(async (tx) => {
      const [r] = await tx<
        { id: string }[]
      >`insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
        values (${company.id}, 'INC-T', 'injury', 'Written then truncated', now(), 'minor') returning id::text`
      during = r!.id
      await tx`truncate app.incidents cascade`
    })
    await cap.settle()
    expect(await view(db.sql, "incidents", before)).toBeUndefined()
    expect(await view(db.sql, "incidents", during)).toBeUndefined()
    const [left] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.views where resource = 'incidents'`
    expect(left!.n).toBe(0)
    // and capture goes on
    const after = await insertIncident(db.sql, company.id)
    await cap.settle()
    expect((await view(db.sql, "incidents", after))?.id).toBe(after)
  })

  it("two updates in one transaction close once; completed to verified fires nothing", async () => {
    const id = await insertAction(db.sql, company.id)
    await db.sql.begin(async (tx) => {
      await tx`update app.corrective_actions set status = 'in_progress' where id = ${id}`
      await tx`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${id}`
    })
    await db.sql`update app.corrective_actions set status = 'verified' where id = ${id}`
    await cap.settle()
    const events = (await outbox(db.sql)).filter((e) => e.record_id === id).map((e) => e.event)
    expect(events).toEqual(["corrective_action.created", "corrective_action.closed"])
    expect((await view(db.sql, "corrective-actions", id))?.status).toBe("verified")
  })

  it("an update that leaves a TOASTed value unchanged keeps it in the view (pgoutput sends it as 'unchanged')", async () => {
    // Random text does not compress, so 20 kB is stored out of line and an update that does
    // not touch it sends no value for it.
    const long = Array.from(
      { length: 20_000 },
      () => "abcdefghijklmnopqrstuvwxyz0123456789"[Math.floor(Math.random() * 36)]
    ).join("")
    const id = await insertIncident(db.sql, company.id, { description: long })
    await cap.settle()
    expect((await view(db.sql, "incidents", id))?.description).toBe(long)
    await db.sql`update app.incidents set title = 'Renamed', updated_at = now() where id = ${id}`
    await cap.settle()
    const v = await view(db.sql, "incidents", id)
    expect(v?.title).toBe("Renamed")
    expect(v?.description).toBe(long)
  })

  it("an incident that becomes a privacy case has the withheld fields removed from its earlier events too", async () => {
    const id = await insertIncident(db.sql, company.id, {
      person_name: "Pat Doe",
      location: "Bay 4",
      body_part: "hand",
      injury_type: "cut"
    })
    await cap.settle()
    const [created] = (await outbox(db.sql)).filter((e) => e.record_id === id)
    expect(created!.data).toMatchObject({ personName: "Pat Doe", location: "Bay 4" })
    const keys = Object.keys(created!.data)
    await db.sql`update app.incidents set privacy_case = true, updated_at = now() where id = ${id}`
    await cap.settle()
    const [after] = (await outbox(db.sql)).filter((e) => e.record_id === id)
    expect(after!.data).toMatchObject({
      ...WITHHELD_IN_A_PRIVACY_CASE
    })
    expect(Object.keys(after!.data)).toEqual(keys) // the same shape, fields withheld in place
    expect(after!.payload).not.toContain("Pat Doe")
    expect((await view(db.sql, "incidents", id))?.personName).toBeNull()
  })

  it("an infinite timestamp is null in the view, and capture carries on past it", async () => {
    const id = await insertAction(db.sql, company.id)
    await db.sql`update app.corrective_actions set due_date = 'infinity', completed_at = '-infinity' where id = ${id}`
    const after = await insertIncident(db.sql, company.id)
    await cap.settle()
    expect(await view(db.sql, "corrective-actions", id)).toMatchObject({ dueDate: null, completedAt: null })
    expect((await view(db.sql, "incidents", after))?.id).toBe(after)
  })

  it("timestamps beyond year 9999 and BC are projected in ISO 8601's expanded form", async () => {
    const id = await insertAction(db.sql, company.id)
    await db.sql`update app.corrective_actions set due_date = '12026-03-04 05:06:07+00', completed_at = '0044-03-15 00:00:00+00 BC' where id = ${id}`
    await cap.settle()
    expect(await view(db.sql, "corrective-actions", id)).toMatchObject({
      dueDate: "+012026-03-04T05:06:07.000Z",
      completedAt: "-000043-03-15T00:00:00.000Z"
    })
  })

  it("delete removes the view and fires nothing", async () => {
    const id = await insertIncident(db.sql, company.id)
    await db.sql`delete from app.incidents where id = ${id}`
    await cap.settle()
    expect(await view(db.sql, "incidents", id)).toBeUndefined()
  })

  it("keeps service.companies in step with the app", async () => {
    await db.sql`update app.company_modules set enabled = false where company_id = ${company.id} and module = 'sds'`
    await cap.settle()
    const [c] = await db.sql<
      { modules: string[]; host: string }[]
    >`select modules, host from service.companies where id = ${company.id}`
    expect(c?.host).toBe(company.host)
    expect(c?.modules).not.toContain("sds")
    expect(c?.modules).toContain("incidents")
  })
})
