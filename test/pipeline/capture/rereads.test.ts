// App rows capture asks to read again (a retried record whose row lacks a value the decoder
// rejected, an incident whose person's details PostgreSQL sent as unchanged when its privacy
// case ended) are asked with the batch that needs them and met by the batch that applies the
// row read: a run that ends in between, or a read that fails, leaves the ask, and it is read.
import { describe, expect, it } from "vitest"
import type { Sql } from "postgres"
import { QUARANTINE_PREFIX } from "../../../src/pipeline/capture/quarantine/markers.ts"
import { insertIncident, outOfLineText } from "../../support/app.ts"
import { outbox, rejectingNumeric, startCapture, useCapture, view, type RunningCapture } from "../../support/capture.ts"
import { useCompany, useDatabase } from "../../support/fixtures.ts"
import { waitFor } from "../../support/wait.ts"

const asks = async (sql: Sql) =>
  (await sql<{ tbl: string; key: string }[]>`select tbl, key from service.capture_rereads order by tbl, key`).map(
    (r) => [r.tbl, r.key]
  )

/** Until the incident's view has this description. */
const describedAs = (sql: Sql, id: string, description: string, what: string) =>
  waitFor(async () => (await view(sql, "incidents", id))?.description === description, what, 30_000, 50)

/**
 * A re-read of one row that stops between its read and its high watermark once armed: `seen`
 * resolves there, and the read goes on when `release` lets it, or fails when `end` makes it.
 */
const gate = () => {
  let want: readonly [string, string] | null = null
  let reached: () => void = () => {}
  let fail: (e: Error) => void = () => {}
  let go: () => void = () => {}
  let seen = Promise.resolve()
  return {
    arm(table: string, key: string) {
      want = [table, key]
      seen = new Promise<void>((r) => (reached = r))
    },
    get seen() {
      return seen
    },
    hook: async (table: string, keys: ReadonlyArray<string>) => {
      if (want === null || table !== want[0] || !keys.includes(want[1])) return
      want = null
      const released = new Promise<void>((resolve, reject) => {
        fail = reject
        go = resolve
      })
      reached()
      await released
    },
    release: () => go(),
    end: () => fail(new Error("the run ended under the re-read"))
  }
}

/** Stops a capture run while its re-read waits at the gate. */
const stopUnder = async (cap: RunningCapture, g: ReturnType<typeof gate>) => {
  const stopping = cap.stop()
  g.end()
  await stopping
}

describe("a re-read asked and not yet applied when the run ends", () => {
  const db = useDatabase()
  const company = useCompany(db)

  it("is read by the next run: a privacy case's end brings back details PostgreSQL sent as unchanged", {
    timeout: 90_000
  }, async () => {
    const g = gate()
    const first = startCapture(db, { resyncAfterRead: g.hook })
    let second: RunningCapture | null = null
    try {
      await first.settle(60_000)
      const long = outOfLineText()
      const id = await insertIncident(db.sql, company.id, {
        person_name: "Sam Roe",
        description: long,
        privacy_case: true
      })
      await first.settle()
      expect((await view(db.sql, "incidents", id))?.description).toBeNull()
      g.arm("incidents", id)
      await db.sql`update app.incidents set privacy_case = false where id = ${id}`
      await g.seen
      // The batch that ended the privacy case stored its ask; the row is read, not yet applied.
      expect(await asks(db.sql)).toEqual([["incidents", id]])
      await stopUnder(first, g)
      expect((await view(db.sql, "incidents", id))?.description).toBeNull()
      expect(await asks(db.sql)).toEqual([["incidents", id]])

      second = startCapture(db)
      await describedAs(db.sql, id, long, "the description read again by the next run")
      expect((await view(db.sql, "incidents", id))?.personName).toBe("Sam Roe")
      await second.settle()
      expect(await asks(db.sql)).toEqual([])
    } finally {
      await first.stop()
      await second?.stop()
    }
  })

  it("is read by the next run: a retried record whose row lacks a value the decoder rejected", {
    timeout: 90_000
  }, async () => {
    const g = gate()
    const first = startCapture(db, { resyncAfterRead: g.hook })
    let second: RunningCapture | null = null
    const restore = rejectingNumeric("66.6")
    try {
      await first.settle(60_000)
      // A new Relation message makes the decoder take the parser now registered.
      await db.sql`alter table app.audits add column tmp_q integer`
      await db.sql`alter table app.audits drop column tmp_q`
      const [a] = await db.sql<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Odd', now(), 66.6) returning id::text`
      await first.settle()
      expect(await view(db.sql, "audits", a!.id)).toBeUndefined()
      g.arm("audits", a!.id)
      await db.sql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "retry", records: [["audits", a!.id]] })})`
      await g.seen
      // The batch that took the retry stored its ask for the whole row.
      expect(await asks(db.sql)).toEqual([["audits", a!.id]])
      await stopUnder(first, g)

      second = startCapture(db)
      await waitFor(
        async () => (await view(db.sql, "audits", a!.id))?.score === 66.6,
        "the audit shaped from its row read again by the next run",
        30_000,
        50
      )
      const [held] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from service.capture_quarantine where key = ${a!.id}`
      expect(held!.n).toBe(0)
      await second.settle()
      expect(await asks(db.sql)).toEqual([])
    } finally {
      restore()
      await first.stop()
      await second?.stop()
    }
  })
})

describe("a re-read whose read fails", () => {
  const db = useDatabase()
  const company = useCompany(db)
  let failures = 0
  let failFor: string | null = null
  const cap = useCapture(db, {
    resyncAfterRead: async (table, keys) => {
      if (table !== "incidents" || failFor === null || !keys.includes(failFor)) return
      failFor = null
      failures++
      throw new Error("the app's database stopped answering")
    }
  })

  it("is asked again and read in the same run", { timeout: 60_000 }, async () => {
    const long = outOfLineText()
    const id = await insertIncident(db.sql, company.id, {
      person_name: "Ana Poe",
      description: long,
      privacy_case: true
    })
    await cap.settle()
    failFor = id
    await db.sql`update app.incidents set privacy_case = false where id = ${id}`
    await describedAs(db.sql, id, long, "the description read again after the failed read")
    expect(failures).toBe(1)
    expect(cap.logs.some((l) => l.message.startsWith("capture resync: reading the app table failed"))).toBe(true)
    await cap.settle()
    expect(await asks(db.sql)).toEqual([])
  })
})

describe("an incident whose privacy case ends with its details left out", () => {
  const db = useDatabase()
  const company = useCompany(db)
  const cap = useCapture(db)

  it("waits for its row read whole: made a privacy case and ended in one transaction, its created event has the details", {
    timeout: 60_000
  }, async () => {
    const long = outOfLineText()
    const id = await db.sql.begin(async (tx) => {
      const made = await insertIncident(tx as unknown as Sql, company.id, {
        person_name: "Ida Lee",
        description: long,
        privacy_case: true
      })
      // Leaves the description, stored out of line, as it is: PostgreSQL sends it as unchanged.
      await tx`update app.incidents set privacy_case = false where id = ${made}`
      return made
    })
    await describedAs(db.sql, id, long, "the incident shaped from its row read whole")
    await cap.settle()
    const events = (await outbox(db.sql)).filter((e) => e.record_id === id)
    expect(events.map((e) => e.event)).toEqual(["incident.created"])
    expect(events[0]!.data).toMatchObject({ description: long, personName: "Ida Lee", privacyCase: false })
    const [held] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.capture_quarantine`
    expect(held!.n).toBe(0)
    expect(await asks(db.sql)).toEqual([])
  })
})

describe("a re-read whose high watermark's batch is lost", () => {
  const db = useDatabase()
  const company = useCompany(db)

  it("is applied where it was read by the run that streams again from the batch holding its low watermark", {
    timeout: 90_000
  }, async () => {
    const g = gate()
    const cap = startCapture(db, { resyncAfterRead: g.hook })
    const locker = await db.sql.reserve()
    try {
      await cap.settle(60_000)
      // Two incidents made privacy cases and ended in one transaction, their descriptions out
      // of line: each is held, its created event owed, until its row is read whole (one chunk).
      const long = outOfLineText()
      const [x, y] = await db.sql.begin(async (tx) => {
        const made: Array<string> = []
        for (const title of ["X", "Y"]) {
          const id = await insertIncident(tx as unknown as Sql, company.id, {
            title,
            person_name: "Ola Berg",
            description: long,
            privacy_case: true
          })
          await tx`update app.incidents set privacy_case = false where id = ${id}`
          made.push(id)
        }
        return made
      })
      g.arm("incidents", y!)
      await g.seen
      // Between the watermarks: X changes (the chunk's X is then left to the stream).
      await db.sql`update app.incidents set title = 'X changed' where id = ${x!}`
      await cap.settle()
      // The batch that meets the high watermark waits on the checkpoint's row, and is lost.
      await locker`begin`
      await locker`lock table service.capture_state in exclusive mode`
      g.release()
      await waitFor(
        async () =>
          (await db.sql`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%with moved as%'`)
            .length > 0,
        "the batch with the high watermark waiting",
        20_000,
        20
      )
      // After the high watermark in the WAL: Y changes again.
      await db.sql`update app.incidents set title = 'Y later' where id = ${y!}`
      await db.sql`
        select pg_terminate_backend(pid) from pg_stat_activity
         where wait_event_type = 'Lock' and query like '%with moved as%'`
      await locker`rollback`
      // The next run streams again from the batch after the low watermark: Y's row as read, at its place.
      await describedAs(db.sql, y!, long, "Y shaped from its row read")
      await waitFor(async () => (await view(db.sql, "incidents", y!))?.title === "Y later", "Y's later title", 30_000)
      await waitFor(async () => (await view(db.sql, "incidents", x!))?.title === "X changed", "X read again", 30_000)
      await cap.settle()
      // Y's owed event fired where its row was read (read again later, it said "Y later").
      const events = (await outbox(db.sql)).filter((e) => e.record_id === y)
      expect(events.map((e) => [e.event, e.data.title])).toEqual([["incident.created", "Y"]])
      const xs = (await outbox(db.sql)).filter((e) => e.record_id === x)
      expect(xs.map((e) => [e.event, e.data.title])).toEqual([["incident.created", "X changed"]])
      expect(await asks(db.sql)).toEqual([])
    } finally {
      await locker`rollback`.catch(() => {})
      locker.release()
      await cap.stop()
    }
  })
})
