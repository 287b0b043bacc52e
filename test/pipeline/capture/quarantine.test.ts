// One bad row stops no one: a record capture cannot shape is held in service.capture_quarantine,
// every other change flows, and the record heals (its events fire once) when it shapes again.
import { describe, expect, it } from "vitest"
import pg from "pg"
import { insertIncident } from "../../support/app.ts"
import { outbox, useCaptureWorld, view } from "../../support/capture.ts"

const quarantine = async (sql: import("postgres").Sql) =>
  sql<
    {
      id: string
      tbl: string
      key: string
      error: string
      attempts: number
      blocked_by: string | null
      company_id: string | null
    }[]
  >`
    select id::text, tbl, key, error, attempts, blocked_by, company_id::text from service.capture_quarantine order by id`

describe("capture quarantine", () => {
  const { db, cap, company } = useCaptureWorld()

  it("holds a NaN score, lets every other change through, and heals once the row is fixed", {
    timeout: 60_000
  }, async () => {
    // The demo schema forbids it; an app without the CHECK constraint allows it.
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const before = (await outbox(db.sql)).length
    const [bad] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Poison', now(), 'NaN') returning id::text`
    const [good] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Fine', now(), 42) returning id::text`
    await cap.settle()
    expect(await view(db.sql, "audits", good!.id)).toMatchObject({ title: "Fine", score: 42 })
    expect(await view(db.sql, "audits", bad!.id)).toBeUndefined()
    const events = (await outbox(db.sql)).slice(before)
    expect(events.map((e) => [e.event, e.record_id])).toEqual([["audit.created", good!.id]])
    const [entry, ...rest] = await quarantine(db.sql)
    expect(rest).toEqual([])
    expect(entry).toMatchObject({ tbl: "audits", key: bad!.id, attempts: 1, blocked_by: null, company_id: company.id })
    expect(entry!.error).toMatch(/score/)

    // A later change that still cannot be shaped: held again, no event.
    await db.sql`update app.audits set title = 'Poison 2' where id = ${bad!.id}`
    await cap.settle()
    expect((await quarantine(db.sql))[0]).toMatchObject({ key: bad!.id, attempts: 2 })
    expect(await view(db.sql, "audits", bad!.id)).toBeUndefined()

    // Fixed by the app: the record is shaped, its owed event fires once.
    await db.sql`update app.audits set score = 77 where id = ${bad!.id}`
    await cap.settle()
    expect(await view(db.sql, "audits", bad!.id)).toMatchObject({ title: "Poison 2", score: 77 })
    expect(await quarantine(db.sql)).toEqual([])
    const after = (await outbox(db.sql)).slice(before)
    expect(after.filter((e) => e.record_id === bad!.id).map((e) => e.event)).toEqual(["audit.created"])
    expect(cap.logs.some((l) => l.message === "capture quarantine: record held")).toBe(true)
  })

  it("keeps a record's last good view while a child row cannot be read, and re-shapes it after", {
    timeout: 60_000
  }, async () => {
    const [audit] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Kept', now(), 10) returning id::text`
    await cap.settle()
    const good = await view(db.sql, "audits", audit!.id)
    expect(good).toMatchObject({ title: "Kept", score: 10 })
    await db.sql`update app.audits set score = 'NaN', title = 'Kept 2' where id = ${audit!.id}`
    await insertIncident(db.sql, company.id)
    await cap.settle()
    expect(await view(db.sql, "audits", audit!.id)).toEqual(good)
    expect((await quarantine(db.sql)).map((q) => q.key)).toEqual([audit!.id])
    await db.sql`update app.audits set score = 11 where id = ${audit!.id}`
    await cap.settle()
    expect(await view(db.sql, "audits", audit!.id)).toMatchObject({ title: "Kept 2", score: 11 })
    expect(await quarantine(db.sql)).toEqual([])
  })

  it("holds a value the decoder rejects", { timeout: 60_000 }, async () => {
    // The decoder reads numeric with pg-types' parser: one that rejects a value stands for any it cannot read.
    const original = pg.types.getTypeParser(1700)
    pg.types.setTypeParser(1700, (v: string) => {
      if (v === "66.6") throw new Error("unreadable numeric")
      return v
    })
    try {
      // A new Relation message makes the decoder take the parser now registered.
      await db.sql`alter table app.audits add column tmp_q integer`
      await db.sql`alter table app.audits drop column tmp_q`
      const [a] = await db.sql<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Odd', now(), 66.6) returning id::text`
      const [b] = await db.sql<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Even', now(), 50) returning id::text`
      await cap.settle()
      expect(await view(db.sql, "audits", b!.id)).toMatchObject({ score: 50 })
      expect(await view(db.sql, "audits", a!.id)).toBeUndefined()
      const q = await quarantine(db.sql)
      expect(q.find((e) => e.key === a!.id)?.error).toMatch(/app\.audits\.score: the decoder rejects its value/)
    } finally {
      pg.types.setTypeParser(1700, original)
    }
  })
})
