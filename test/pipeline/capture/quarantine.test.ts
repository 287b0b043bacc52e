// One bad row stops no one: a record capture cannot shape is held in service.capture_quarantine,
// every other change flows, and the record heals (its events fire once) when it shapes again.
import { describe, expect, it } from "vitest"
import { insertIncident } from "../../support/app.ts"
import { outbox, rejectingNumeric, startCapture, useCapture, useCaptureWorld, view } from "../../support/capture.ts"
import { rebuildViews } from "../../../src/pipeline/capture/rebuild.ts"
import { runSql } from "../../support/sql.ts"
import { useDatabase, useCompany } from "../../support/fixtures.ts"
import { waitFor } from "../../support/wait.ts"
import { setMirrorValue } from "../../support/mirror.ts"
import { QUARANTINE_PREFIX } from "../../../src/pipeline/capture/quarantine/markers.ts"

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

  it("holds a value the decoder rejects until a whole copy of its row comes: a child's change does not release it, a retry re-reads the row from the app", {
    timeout: 60_000
  }, async () => {
    const restore = rejectingNumeric("66.6")
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
      // An item of the audit changes: the mirror still lacks the score, so the audit stays held.
      await db.sql`insert into app.audit_items (audit_id, position, item, result) values (${a!.id}, 1, 'Exits clear', 'pass')`
      await cap.settle()
      expect(await view(db.sql, "audits", a!.id)).toBeUndefined()
      expect((await quarantine(db.sql)).find((e) => e.key === a!.id)).toMatchObject({ attempts: 2 })
      // A retry: the row is read again from the app table (the decoder is not in that way).
      const before = (await outbox(db.sql)).length
      await db.sql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "retry", records: [["audits", a!.id]] })})`
      await waitFor(
        async () => (await quarantine(db.sql)).every((e) => e.key !== a!.id),
        "the audit released",
        20_000,
        50
      )
      await cap.settle()
      expect(await view(db.sql, "audits", a!.id)).toMatchObject({
        score: 66.6,
        items: [expect.objectContaining({ item: "Exits clear" })]
      })
      expect(
        (await outbox(db.sql))
          .slice(before)
          .filter((e) => e.record_id === a!.id)
          .map((e) => e.event)
      ).toEqual(["audit.created"])
    } finally {
      restore()
    }
  })
})

describe("capture quarantine, past the held keys kept in memory and in transactions too large for memory", () => {
  const db = useDatabase()
  const company = useCompany(db)
  // Two held keys in memory at most: past them every batch looks its records up.
  const cap = useCapture(db, { largeTransaction: 50, heldInMemory: 2 })

  it("a poison row inside a large streamed transaction is held; the rest applies; a later large one heals it", {
    timeout: 60_000
  }, async () => {
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const before = (await outbox(db.sql)).length
    const ids = await db.sql.begin(async (tx) => {
      const out: string[] = []
      for (let i = 0; i < 80; i++) {
        const score = i === 40 ? "NaN" : String(i)
        const [r] = await tx<{ id: string }[]>`
          insert into app.audits (company_id, title, performed_at, score) values (${company.id}, ${`Bulk ${i}`}, now(), ${score}::numeric) returning id::text`
        out.push(r!.id)
      }
      return out
    })
    await cap.settle()
    const bad = ids[40]!
    const events = (await outbox(db.sql)).slice(before)
    expect(events.filter((e) => e.event === "audit.created").map((e) => e.record_id)).toEqual(
      ids.filter((id) => id !== bad)
    )
    expect(await view(db.sql, "audits", bad)).toBeUndefined()
    expect(await view(db.sql, "audits", ids[41]!)).toMatchObject({ score: 41 })
    expect((await quarantine(db.sql)).map((e) => [e.key, e.attempts])).toEqual([[bad, 1]])

    // Another large one touches every audit and fixes the bad score: it heals there, its event once.
    await db.sql`update app.audits set notes = 'checked', score = coalesce(nullif(score, 'NaN'), 5) where id = any(${ids}::uuid[])`
    await cap.settle()
    expect(await view(db.sql, "audits", bad)).toMatchObject({ score: 5, notes: "checked" })
    expect(await quarantine(db.sql)).toEqual([])
    const after = (await outbox(db.sql)).slice(before)
    expect(after.filter((e) => e.record_id === bad).map((e) => e.event)).toEqual(["audit.created"])
    expect(after.length).toBe(80)
  })

  it("more held records than memory keeps: each is looked up, held again, and released with its events once", {
    timeout: 60_000
  }, async () => {
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const before = (await outbox(db.sql)).length
    const bad: string[] = []
    for (let i = 0; i < 5; i++) {
      const [r] = await db.sql<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at, score) values (${company.id}, ${`Spill ${i}`}, now(), 'NaN') returning id::text`
      bad.push(r!.id)
      await cap.settle()
    }
    expect((await quarantine(db.sql)).map((e) => e.key)).toEqual(bad)
    // Still bad: held again. A good audit beside them flows.
    await db.sql`update app.audits set title = title || '!' where id = any(${bad.slice(0, 2)}::uuid[])`
    const [good] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Good', now(), 1) returning id::text`
    await cap.settle()
    expect((await quarantine(db.sql)).map((e) => e.attempts)).toEqual([2, 2, 1, 1, 1])
    expect(await view(db.sql, "audits", good!.id)).toMatchObject({ title: "Good" })
    // Fixed: released, each owed event once; the rest stay held.
    await db.sql`update app.audits set score = 9 where id = any(${bad.slice(1, 4)}::uuid[])`
    await cap.settle()
    expect((await quarantine(db.sql)).map((e) => e.key)).toEqual([bad[0], bad[4]])
    for (const id of bad.slice(1, 4)) expect(await view(db.sql, "audits", id)).toMatchObject({ score: 9 })
    const events = (await outbox(db.sql)).slice(before)
    expect(events.map((e) => e.record_id).sort()).toEqual([good!.id, ...bad.slice(1, 4)].sort())
  })
})

describe("bootstrap and rebuild-views hold what they cannot shape", () => {
  const db = useDatabase()
  const company = useCompany(db)

  it("a first start builds every other view and holds the row it cannot shape; rebuild-views leaves held records to capture, which holds a record it can no longer shape", {
    timeout: 90_000
  }, async () => {
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const audit = async (title: string, score: string) =>
      (
        await db.sql<{ id: string }[]>`
          insert into app.audits (company_id, title, performed_at, score) values (${company.id}, ${title}, now(), ${score}::numeric) returning id::text`
      )[0]!.id
    const bad = await audit("Bad from the start", "NaN")
    const good = await audit("Good", "70")
    const other = await audit("Other", "71")
    const cap = startCapture(db)
    try {
      await cap.settle(60_000)
      expect(await view(db.sql, "audits", good)).toMatchObject({ score: 70 })
      expect(await view(db.sql, "audits", bad)).toBeUndefined()
      const [entry, ...rest] = await quarantine(db.sql)
      expect(rest).toEqual([])
      expect(entry).toMatchObject({ tbl: "audits", key: bad, attempts: 1, company_id: company.id })
      expect(entry!.error).toMatch(/score/)

      // The mirror row of another audit goes bad (as a new release's shaper might find it):
      // rebuild-views keeps its view, leaves the held one alone, and asks capture about both.
      const otherView = await view(db.sql, "audits", other)
      await setMirrorValue(db.sql, "audits", other, "score", "oops")
      const result = await runSql(db.sql, rebuildViews())
      expect(result).toMatchObject({ unshaped: 1, held: 1 })
      expect(await view(db.sql, "audits", other)).toEqual(otherView)
      await waitFor(
        async () => (await quarantine(db.sql)).some((e) => e.key === other),
        "capture to hold the audit rebuild-views could not shape",
        20_000,
        50
      )
      await cap.settle()
      expect((await quarantine(db.sql)).map((e) => [e.key, e.attempts])).toEqual([
        [bad, 2],
        [other, 1]
      ])
      // Fixed in the app: both shape (no event: bootstrap's rows owe none, and the other was created before).
      const events = (await outbox(db.sql)).length
      await db.sql`update app.audits set score = 72 where id = any(${[bad, other]}::uuid[])`
      await cap.settle()
      expect(await quarantine(db.sql)).toEqual([])
      expect(await view(db.sql, "audits", bad)).toMatchObject({ score: 72 })
      expect(await view(db.sql, "audits", other)).toMatchObject({ score: 72 })
      expect((await outbox(db.sql)).length).toBe(events)
    } finally {
      await cap.stop()
    }
  })
})
