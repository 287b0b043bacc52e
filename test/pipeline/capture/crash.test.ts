// Crash safety: the capture process is killed (SIGKILL) at random moments while the app
// writes thousands of transactions, poison rows among them (audits whose score capture cannot
// read, one inside a transaction too large for memory). Afterwards the views equal a fresh
// projection, the outbox holds exactly the events the writer's transitions call for (and those
// the poison rows owed once fixed, each once), and the quarantine holds each poison row once.
// Run with one database, and with the service's state in a database of its own
// (SERVICE_DATABASE_URL): the app writes one, capture's state and output go to the other.
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { seedDemo } from "../../../src/seed/demo.ts"
import { simulate } from "../../../src/seed/simulate.ts"
import { catchUp } from "../../support/capture.ts"
import type { TestDatabase } from "../../support/db.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { useDemoDatabase, useResource, useSplitDatabases } from "../../support/fixtures.ts"

const CHILD = fileURLToPath(new URL("../../support/capture-child.ts", import.meta.url))

/** Where capture keeps its state (`service`) and what it follows (`app`): one database, or two. */
interface Databases {
  readonly service: TestDatabase
  readonly app: TestDatabase
  readonly split: boolean
}

const oneDatabase = (): (() => Databases) => {
  const db = useDemoDatabase()
  return () => ({ service: db, app: db, split: false })
}

const twoDatabases = (): (() => Databases) => {
  const d = useSplitDatabases()
  useResource(
    "the demo data in the app's database",
    async () => ({ summary: await seedDemo(d.app.sql) }),
    async () => {}
  )
  return () => ({ service: d.service, app: d.app, split: true })
}

describe.each([
  ["with one database", oneDatabase],
  ["with the service's own database", twoDatabases]
] as const)("capture survives SIGKILL at random moments, %s", (_, use) => {
  const dbs = use()

  it("views, outbox and quarantine end exact after repeated kills, poison rows among the changes", {
    timeout: 240_000
  }, async () => {
    const { service: db, app, split } = dbs()
    const both = split ? { app: { url: app.url, sql: app.sql } } : {}
    const slot = `slot_${db.name}`
    // The demo forbids it; an app without the CHECK constraint allows a score capture cannot read.
    await app.sql`alter table app.audits drop constraint if exists audits_score_check`
    const [acme] = await app.sql<{ id: string }[]>`select id::text from app.companies where host = 'acme.localhost'`
    // The first start builds the views from the seeded rows (no events for those).
    await catchUp(db, { slot, ...both })
    let child: ChildProcess | null = null
    const startChild = () => {
      child = spawn(process.execPath, [CHILD], {
        env: {
          ...process.env,
          CAPTURE_URL: db.url,
          ...(split ? { CAPTURE_APP_URL: app.url } : {}),
          CAPTURE_SLOT: slot,
          CAPTURE_BATCH: "200",
          CAPTURE_LARGE: "300"
        },
        stdio: "ignore"
      })
    }
    startChild()
    const writer = simulate(app.sql, {
      rate: Infinity,
      maxOperations: 3000,
      concurrency: 2,
      company: "acme.localhost",
      seed: 42
    })
    // Beside the simulator: poison audits, touched again while still bad, some fixed later;
    // and one transaction too large for memory (over CAPTURE_LARGE) with a poison row inside.
    const poison: string[] = []
    const fixed: string[] = []
    const bulk: string[] = []
    const poisoner = (async () => {
      const insert = async (sql: typeof app.sql, title: string, score: string) =>
        (
          await sql<{ id: string }[]>`
            insert into app.audits (company_id, title, performed_at, score) values (${acme!.id}, ${title}, now(), ${score}::numeric) returning id::text`
        )[0]!.id
      for (let i = 0; i < 24; i++) {
        poison.push(await insert(app.sql, `Poison ${i}`, "NaN"))
        if (i % 3 === 1) await app.sql`update app.audits set notes = 'still bad' where id = ${poison[i - 1]!}`
        if (i % 4 === 3) {
          const id = poison[i - 2]!
          await app.sql`update app.audits set score = 50 where id = ${id}`
          fixed.push(id)
        }
        if (i === 12)
          await app.sql.begin(async (tx) => {
            for (let j = 0; j < 400; j++)
              bulk.push(await insert(tx as unknown as typeof app.sql, `Bulk ${j}`, j === 200 ? "NaN" : String(j % 100)))
          })
        await new Promise((r) => setTimeout(r, 60 + Math.floor(Math.random() * 120)))
      }
    })()
    let finished = false
    void Promise.all([writer, poisoner]).finally(() => (finished = true))
    let kills = 0
    let killsWhileWriting = 0
    while (!finished || kills < 6) {
      await new Promise((r) => setTimeout(r, 150 + Math.floor(Math.random() * 900)))
      const c = child as ChildProcess | null
      if (c && c.exitCode === null) {
        c.kill("SIGKILL")
        await new Promise((r) => c.once("exit", r))
        kills++
        if (!finished) killsWhileWriting++
      }
      startChild()
      if (kills >= 12 && finished) break
    }
    const result = await writer
    await poisoner
    expect(result.failed).toBe(0)
    ;(child as ChildProcess | null)?.kill("SIGKILL")
    // A last, clean run catches up.
    await new Promise((r) => setTimeout(r, 300))
    await catchUp(db, { slot, ...both }, 30_000)

    const counts = await db.sql<
      { event: string; n: number }[]
    >`select event, count(*)::int as n from service.events group by event`
    const actual = Object.fromEntries(counts.map((r) => [r.event, r.n]))
    // The simulator's events, and audit.created once for each fixed poison row and each good bulk row.
    const expected = Object.fromEntries(
      Object.entries(result.events)
        .map(([e, n]) => [e, e === "audit.created" ? n + fixed.length + bulk.length - 1 : n] as const)
        .filter(([, n]) => n > 0)
    )
    expect(kills).toBeGreaterThanOrEqual(6)
    expect(killsWhileWriting).toBeGreaterThanOrEqual(3)
    expect(actual).toEqual(expected)
    // No record's created event twice.
    const twice = await db.sql`
      select record_id, event from service.events where event like '%.created' group by 1, 2 having count(*) > 1`
    expect(twice).toEqual([])
    // Each poison row still bad is held, once; the fixed ones are not.
    const stillBad = [...poison.filter((id) => !fixed.includes(id)), bulk[200]!].sort()
    const held = await db.sql<{ key: string; attempts: number }[]>`
      select key, attempts from service.capture_quarantine order by key`
    expect(held.map((h) => h.key)).toEqual(stillBad)
    for (const id of fixed) expect(await db.sql`select 1 from service.views where id = ${id}`).toHaveLength(1)
    expect(await db.sql`select 1 from service.views where id = any(${stillBad}::uuid[])`).toHaveLength(0)

    const { diff, views } = await diffAgainstFreshProjection(db, split ? app : undefined)
    // Nothing of the service's in the app's database: no schema, so no table, no row.
    if (split) expect(await app.sql`select 1 from pg_namespace where nspname = 'service'`).toHaveLength(0)
    expect(views).toBeGreaterThan(1000)
    expect(diff).toEqual([])
  })
})
