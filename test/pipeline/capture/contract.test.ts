// An app table whose contract breaks while capture runs: its records are held, every other
// table flows, service.capture_contract names app.table.column and what the service expects,
// and once the table fits again capture re-reads it from the app (between two WAL watermarks)
// and releases what it held, each owed event once. What PostgreSQL 18 does to a table of a
// column-list publication: DROP COLUMN and ALTER COLUMN TYPE of a published column are refused;
// RENAME COLUMN is allowed (the publication follows the column); DROP COLUMN ... CASCADE takes
// the whole table out of the publication (its changes stop reaching capture at all).
import { describe, expect, it } from "vitest"
import { PUBLISHED_COLUMNS } from "../../../src/domain/records/index.ts"
import { insertIncident } from "../../support/app.ts"
import { outbox, useCapture, view } from "../../support/capture.ts"
import { readAppRows } from "../../../src/pipeline/capture/resync.ts"
import { useDatabase, useCompany } from "../../support/fixtures.ts"
import { sleep, waitFor } from "../../support/wait.ts"
import { mirrorRows } from "../../support/mirror.ts"

type Sql = import("postgres").Sql

const contract = async (sql: Sql) =>
  Object.fromEntries(
    (await sql<{ tbl: string; problems: string[] }[]>`select tbl, problems from service.capture_contract`).map((r) => [
      r.tbl,
      r.problems
    ])
  )

const held = async (sql: Sql) =>
  sql<{ tbl: string; key: string; blocked_by: string | null; attempts: number }[]>`
    select tbl, key, blocked_by, attempts from service.capture_quarantine order by id`

/** Nothing broken, re-read or held: capture is whole again. */
const whole = async (sql: Sql) => {
  const [r] = await sql<{ n: number }[]>`
    select (select count(*) from service.capture_contract) + (select count(*) from service.capture_resync)
      + (select count(*) from service.capture_quarantine) as n`
  return Number(r!.n) === 0
}

const eventsOf = async (sql: Sql, id: string) =>
  (await outbox(sql)).filter((e) => e.record_id === id).map((e) => e.event)

describe("an app table whose contract breaks mid-stream", () => {
  const db = useDatabase()
  const company = useCompany(db)
  // Small chunks: a re-read takes several. Between a chunk's read and its high watermark the
  // app may write a row of it (late), as it may at any moment: the row read is then older than
  // the stream's, and must not be written over it.
  let late: ((table: string, keys: ReadonlyArray<string>) => Promise<void>) | null = null
  const cap = useCapture(db, {
    contractCheckMs: 200,
    resyncChunk: 3,
    resyncAfterRead: async (table, keys) => {
      await late?.(table, keys)
    }
  })

  it("a renamed column: the table's records are held, others flow, and renaming it back re-reads the table", {
    timeout: 90_000
  }, async () => {
    const kept = await insertIncident(db.sql, company.id, { title: "Kept" })
    await cap.settle()
    const keptView = await view(db.sql, "incidents", kept)
    expect(keptView).toMatchObject({ title: "Kept" })

    await db.sql`alter table app.incidents rename column title to headline`
    await db.sql`update app.incidents set headline = 'Kept, renamed' where id = ${kept}`
    const [{ id: fresh } = { id: "" }] = await db.sql<{ id: string }[]>`
      insert into app.incidents (company_id, reference, type, headline, occurred_at, severity)
      values (${company.id}, 'INC-R', 'injury', 'New while renamed', now(), 'minor') returning id::text`
    const [audit] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Flows', now(), 50) returning id::text`
    await cap.settle()

    // Every other table flows.
    expect(await view(db.sql, "audits", audit!.id)).toMatchObject({ title: "Flows" })
    expect(await eventsOf(db.sql, audit!.id)).toEqual(["audit.created"])
    // The table is broken, naming the column and what the service expects.
    expect((await contract(db.sql)).incidents).toEqual(
      expect.arrayContaining([
        "app.incidents.title is not in the change stream (dropped, renamed or not published); the service reads it as text",
        expect.stringContaining("app.incidents.headline is published, but the service does not read it")
      ])
    )
    // Its records keep their last good view, and no event fires.
    expect(await view(db.sql, "incidents", kept)).toEqual(keptView)
    expect(await view(db.sql, "incidents", fresh)).toBeUndefined()
    expect(await eventsOf(db.sql, fresh)).toEqual([])
    expect((await held(db.sql)).map((h) => [h.key, h.blocked_by])).toEqual(
      expect.arrayContaining([
        [kept, "incidents"],
        [fresh, "incidents"]
      ])
    )
    // The column the service does not read is never stored: neither its name nor its values.
    const [stored] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.rows where tbl = 'incidents' and data like '%headline%'`
    expect(stored!.n).toBe(0)
    const rows = await mirrorRows(db.sql, "incidents")
    expect(rows.map((r) => r.key)).toEqual(expect.arrayContaining([kept, fresh]))
    for (const { data } of rows) {
      expect("headline" in data).toBe(false)
      expect(Object.values(data)).not.toContain("Kept, renamed")
      expect(Object.values(data)).not.toContain("New while renamed")
    }

    // Renamed back: the contract watch sees it fit, the table is re-read, the held records shape.
    await db.sql`alter table app.incidents rename column headline to title`
    await waitFor(() => whole(db.sql), "capture to re-read app.incidents and release its records", 60_000, 100)
    await cap.settle()
    expect(await view(db.sql, "incidents", kept)).toMatchObject({ title: "Kept, renamed" })
    expect(await view(db.sql, "incidents", fresh)).toMatchObject({ title: "New while renamed" })
    // The events the held records owed, once: created for the new one, nothing for the other.
    expect(await eventsOf(db.sql, fresh)).toEqual(["incident.created"])
    expect(await eventsOf(db.sql, kept)).toEqual(["incident.created"])
    expect(cap.logs.some((l) => l.message === "capture resync: app table re-read")).toBe(true)
  })

  it("a column dropped with CASCADE takes the table out of the publication: marked broken from the catalog, re-read once it is back", {
    timeout: 90_000
  }, async () => {
    const obs = (title: string) => db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at, location)
      values (${company.id}, 'unsafe_act', ${title}, now(), 'Gate') returning id::text`
    const [gone] = await obs("Deleted while out")
    const [changed] = await obs("Changed while out")
    await cap.settle()
    expect(await view(db.sql, "observations", gone!.id)).toBeDefined()

    await db.sql`alter table app.observations drop column location cascade`
    // Its changes no longer reach capture: nothing but the catalog tells.
    const [fresh] = await db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at) values (${company.id}, 'near_miss', 'New while out', now())
      returning id::text`
    await db.sql`update app.observations set title = 'Changed, while out' where id = ${changed!.id}`
    await db.sql`delete from app.observations where id = ${gone!.id}`
    const other = await insertIncident(db.sql, company.id, { title: "Flows" })
    const problems = await waitFor(
      async () => (await contract(db.sql)).observations,
      "app.observations marked broken",
      30_000,
      100
    )
    expect(problems).toEqual([
      expect.stringContaining("app.observations is not in publication safety_records_service"),
      "app.observations.location is not in the change stream (dropped, renamed or not published); the service reads it as text"
    ])
    await cap.settle()
    expect(await view(db.sql, "incidents", other)).toMatchObject({ title: "Flows" })
    expect(await view(db.sql, "observations", fresh!.id)).toBeUndefined()

    // Back as it was: the column, and the table in the publication with its columns.
    await db.sql`alter table app.observations add column location text`
    await db.sql.unsafe(
      `alter publication safety_records_service add table app.observations (${PUBLISHED_COLUMNS.observations!.join(", ")})`
    )
    await waitFor(() => whole(db.sql), "app.observations re-read", 60_000, 100)
    await cap.settle()
    expect(await view(db.sql, "observations", fresh!.id)).toMatchObject({ title: "New while out" })
    expect(await view(db.sql, "observations", changed!.id)).toMatchObject({ title: "Changed, while out" })
    expect(await view(db.sql, "observations", gone!.id)).toBeUndefined()
    const [tomb] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.deletions where resource = 'observations' and id = ${gone!.id}`
    expect(tomb!.n).toBe(1)
    // The changes made while it was out fire what they call for, once.
    expect(await eventsOf(db.sql, fresh!.id)).toEqual(["observation.created"])
    expect(await eventsOf(db.sql, changed!.id)).toEqual(["observation.created"])
  })

  it("a retyped column (the table taken out of the publication, altered, put back) is named with its type until it reads the same again", {
    timeout: 90_000
  }, async () => {
    const cols = PUBLISHED_COLUMNS.audits!.join(", ")
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    await db.sql.unsafe(`alter publication safety_records_service drop table app.audits`)
    await db.sql`alter table app.audits alter column score type text`
    await db.sql.unsafe(`alter publication safety_records_service add table app.audits (${cols})`)
    const [a] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${company.id}, 'Text score', now(), '12') returning id::text`
    const other = await insertIncident(db.sql, company.id, { title: "Still flows" })
    await cap.settle()
    await waitFor(
      async () =>
        (await contract(db.sql)).audits?.includes("app.audits.score is text; the service reads it as numeric"),
      "app.audits named with its type",
      30_000,
      100
    )
    expect(await view(db.sql, "incidents", other)).toMatchObject({ title: "Still flows" })
    expect(await view(db.sql, "audits", a!.id)).toBeUndefined()

    await db.sql.unsafe(`alter publication safety_records_service drop table app.audits`)
    await db.sql`alter table app.audits alter column score type numeric using score::numeric`
    await db.sql.unsafe(`alter publication safety_records_service add table app.audits (${cols})`)
    await waitFor(() => whole(db.sql), "app.audits re-read", 60_000, 100)
    await cap.settle()
    expect(await view(db.sql, "audits", a!.id)).toMatchObject({ title: "Text score", score: 12 })
    expect(await eventsOf(db.sql, a!.id)).toEqual(["audit.created"])
  })

  it("a re-read while the app keeps writing the table ends with the mirror exactly the app's rows", {
    timeout: 120_000
  }, async () => {
    const ids: string[] = []
    for (let i = 0; i < 12; i++) ids.push(await insertIncident(db.sql, company.id, { title: `Busy ${i}` }))
    await cap.settle()
    await db.sql`alter table app.incidents rename column title to headline`
    await db.sql`update app.incidents set headline = headline || ' (renamed)' where id = any(${ids}::uuid[])`
    await cap.settle()
    // Right after a chunk's read, the app changes one row of it: the stream's row is newer than
    // the one read, and must win.
    const lateOnes: string[] = []
    late = async (table, keys) => {
      const id = keys.find((k) => ids.includes(k) && !lateOnes.includes(k))
      if (table !== "incidents" || id === undefined) return
      await db.sql`update app.incidents set title = ${`Late ${id}`} where id = ${id}`
      lateOnes.push(id)
    }
    await db.sql`alter table app.incidents rename column headline to title`
    // Meanwhile the app goes on adding and removing rows of the table.
    let writing = true
    let n = 0
    const writer = (async () => {
      const mine: string[] = []
      while (writing) {
        if (n % 3 === 2) await db.sql`delete from app.incidents where id = ${mine.shift()!}`
        else mine.push(await insertIncident(db.sql, company.id, { title: `Extra ${n}` }))
        n++
        // The app's pace, not a tight loop: on a loaded machine a loop outruns capture and
        // the re-read, which follows the stream, waits on it.
        await sleep(10)
      }
    })()
    // The re-read may end before the app has written much (a fast run): the app goes on to at
    // least a dozen writes either way, and the mirror must end exactly as the app's rows.
    try {
      await waitFor(async () => n > 12 && (await whole(db.sql)), "app.incidents re-read", 90_000, 50)
    } finally {
      // Stopped either way: a writer left going would outlive the database.
      writing = false
      late = null
      await writer
    }
    await cap.settle()
    // The re-read met the app's changes to rows it had just read (the late updates).
    expect(lateOnes.length).toBeGreaterThan(1)
    const app = await readAppRows(db.sql, "incidents", { from: "", to: null })
    const mirror = await mirrorRows(db.sql, "incidents")
    const byKey = (rows: ReadonlyArray<{ key: string; data: unknown }>) =>
      Object.fromEntries(rows.map((r) => [r.key, r.data]).sort(([a], [b]) => String(a).localeCompare(String(b))))
    expect(byKey(mirror)).toEqual(byKey(app))
    for (const id of lateOnes) expect(await view(db.sql, "incidents", id)).toMatchObject({ title: `Late ${id}` })
  })
})

describe("the retries a re-read queues, across a crash before capture asks to go on", () => {
  const db = useDatabase()
  const company = useCompany(db)
  // Armed: the first time a stored batch leaves retries queued, the run fails right there,
  // before its `continue` request is written (a crash at that point); the harness starts
  // another run, which has only what the service's database stored.
  let armed = false
  let crashed = 0
  // The app changes the held record between its chunk's read and high watermark: the stream's
  // change is the newer, the chunk drops the row, and the change, met while the table is still
  // being re-read, holds the record again. Only the retry queued at the re-read's end releases it.
  let late: string | null = null
  const cap = useCapture(db, {
    contractCheckMs: 200,
    resyncAfterRead: async (_table, keys) => {
      const id = late
      if (id === null || !keys.includes(id)) return
      late = null
      await db.sql`update app.incidents set title = 'Late' where id = ${id}`
    },
    beforeContinue: async () => {
      if (!armed) return
      armed = false
      crashed++
      throw new Error("crash before the continue request")
    }
  })

  it("releases the records the table held, in the next run, with no request from anyone", {
    timeout: 90_000
  }, async () => {
    const kept = await insertIncident(db.sql, company.id, { title: "Kept" })
    await cap.settle()
    await db.sql`alter table app.incidents rename column title to headline`
    await db.sql`update app.incidents set headline = 'Kept, renamed' where id = ${kept}`
    await waitFor(async () => (await held(db.sql)).some((h) => h.key === kept), "the incident held", 30_000, 100)
    armed = true
    late = kept
    await db.sql`alter table app.incidents rename column headline to title`
    await waitFor(() => whole(db.sql), "app.incidents re-read and its records released", 60_000, 100)
    // The crash came where it was meant to: after the re-read's end was stored with its queued retry.
    expect(crashed).toBe(1)
    expect(cap.logs.some((l) => l.level === "retry" && l.message.includes("crash before the continue request"))).toBe(
      true
    )
    await cap.settle()
    expect(await view(db.sql, "incidents", kept)).toMatchObject({ title: "Late" })
    // A title is not what incident.updated is about: the release fires nothing more.
    expect(await eventsOf(db.sql, kept)).toEqual(["incident.created"])
    const [left] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.capture_retries`
    expect(left!.n).toBe(0)
  })
})
