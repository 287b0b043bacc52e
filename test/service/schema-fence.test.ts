// The schema fence (docs/design.md, "The schema fence"), as an upgrade meets it: the database
// made newer than the process, which then writes nothing (no view, event, delivery or mirror
// row), refuses to start again, and is named with the release the database needs in `status`,
// /readyz and the log.
import type { ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import postgres from "postgres"
import { afterAll, describe, expect, it } from "vitest"
import { connect } from "../../src/platform/db/Database.ts"
import { checkFence, FENCE_REFUSED } from "../../src/platform/db/fence.ts"
import { RELEASE } from "../../src/platform/release.ts"
import { insertIncident, makeCompany } from "../support/app.ts"
import { runCli } from "../support/cli.ts"
import { useDatabase } from "../support/fixtures.ts"
import { freePort } from "../support/net.ts"
import { startService, waitForUrl, type Readiness } from "../support/service-process.ts"
import { addEndpoint, at, arrived, sleep, startEngine, useWorld, waitFor } from "../support/world.ts"

const NEWER = "99.0.0"

/** Raises (or lowers) the fence by hand, as a migration of a newer release would. */
const fenceAt = (sql: postgres.Sql, release: string) =>
  sql`update service.schema_fence set oldest_writer = ${release}, raised_by = '999_newer.sql'`

/** What a process may have written: every row of the mirror, views, outbox, tombstones and deliveries. */
const written = async (sql: postgres.Sql) => {
  const [r] = await sql<{ rows: string; views: string; events: string; deletions: string; deliveries: string }[]>`
    select (select md5(coalesce(string_agg(tbl || key || data, ',' order by tbl, key), '')) from service.rows) as rows,
           (select md5(coalesce(string_agg(id::text || body, ',' order by id), '')) from service.views) as views,
           (select count(*)::text from service.events) as events,
           (select count(*)::text from service.deletions) as deletions,
           (select md5(coalesce(string_agg(id::text || state || attempts, ',' order by id), '')) from service.webhook_deliveries) as deliveries`
  return r!
}

describe("the database's guard", () => {
  const db = useDatabase()

  it("refuses writes from a session of a release older than the fence, and leaves other sessions alone", async () => {
    const insert = (sql: postgres.Sql) =>
      sql`insert into service.deletions (resource, id, company_id, deleted_at) values ('incidents', gen_random_uuid(), gen_random_uuid(), now())`
    // A release before the fence says nothing, under the service's name; a DBA's psql is someone else.
    const older = postgres(db.url, {
      max: 1,
      onnotice: () => {},
      connection: { application_name: "safety-records-service" }
    })
    const dba = postgres(db.url, { max: 1, onnotice: () => {}, connection: { application_name: "psql" } })
    try {
      await expect(insert(older)).rejects.toMatchObject({ code: FENCE_REFUSED }) // 0.1.0, below 0.2.0
      await insert(db.sql)
      await insert(dba)
      await fenceAt(dba, NEWER)
      await expect(insert(db.sql)).rejects.toMatchObject({
        code: FENCE_REFUSED,
        message: `schema fence: this database takes writes to service.deletions from release ${NEWER} or newer; this process runs release ${RELEASE.version}`
      })
      await expect(db.sql`truncate service.deletions`).rejects.toMatchObject({ code: FENCE_REFUSED })
      await insert(dba)
      expect(await checkFence(db.sql)).toMatchObject({
        writable: false,
        release: RELEASE,
        database: { oldestWriter: NEWER, raisedBy: "999_newer.sql" },
        reason: expect.stringMatching(new RegExp(`release ${NEWER} or newer .* runs release ${RELEASE.version}`))
      })
      await fenceAt(dba, "0.1.0")
      await insert(older)
      await fenceAt(dba, RELEASE.version)
    } finally {
      await Promise.all([older.end(), dba.end()])
    }
  })
})

describe("a process whose release is older than the database's fence", () => {
  const w = useWorld()

  it("writes nothing: no view, event, delivery or mirror row; what it missed waits in the slot", async () => {
    await addEndpoint(w, "/fenced")
    const engine = await startEngine(w.deps)
    try {
      await insertIncident(w.db.sql, w.company.id)
      await w.cap.settle()
      await arrived(w.receiver, "/fenced", 1, "the delivery before the fence rises")
      // Its outcome recorded too: the receiver has the request before the engine writes the result.
      await waitFor(
        async () =>
          (await w.db.sql`select 1 from service.webhook_deliveries where state = 'succeeded' and leased_by is null`)
            .length === 1,
        "the delivery's outcome to be recorded"
      )
      const dba = connect(w.db.url, 1)
      try {
        await fenceAt(dba, NEWER)
        const before = await written(w.db.sql)
        const [gone] = await w.db.sql<{ id: string }[]>`select id::text from app.incidents limit 1`
        await insertIncident(w.db.sql, w.company.id)
        await w.db.sql`update app.incidents set title = 'Changed' where id <> ${gone!.id}`
        await w.db.sql`delete from app.incidents where id = ${gone!.id}`
        await waitFor(
          // Fenced (not a failure to retry), saying which release the database takes writes from.
          () =>
            w.cap.logs.some((l) => l.message.startsWith("CaptureFenced:") && l.message.includes(`release ${NEWER}`)),
          "capture to meet the fence",
          20_000
        )
        await sleep(2_000)
        expect(await written(w.db.sql)).toEqual(before)
        expect(at(w.receiver, "/fenced").length).toBe(1)
        // The engine gave up its partitions: their leases lapse to a process the fence takes.
        const [parts] = await w.db.sql<{ mine: number }[]>`
          select count(*)::int as mine from service.webhook_fanout_parts where owner = ${engine.instanceId} and lease_until > now() + interval '1 minute'`
        expect(parts!.mine).toBe(0)
        // Lowered again, capture applies what waited in the slot: nothing was lost.
        await fenceAt(dba, RELEASE.version)
        await w.cap.settle(60_000)
        expect((await written(w.db.sql)).deletions).toBe(String(Number(before.deletions) + 1))
      } finally {
        await dba.end()
      }
    } finally {
      await engine.stop()
    }
  })
})

describe("a service process of a release older than the database's fence", () => {
  const db = useDatabase()
  const children: ChildProcess[] = []
  const dirs: string[] = []
  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL")
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it("stops writing when the fence rises, says so in /readyz and status, and refuses to start again", {
    timeout: 120_000
  }, async () => {
    await makeCompany(db.sql)
    const dataDir = mkdtempSync(join(tmpdir(), "srs-fence-"))
    dirs.push(dataDir)
    const env = {
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      REPLICATION_SLOT: `fence_${db.name}`,
      CAPTURE_HEARTBEAT: "1 second"
    }
    const running = startService({ ...env, PORT: String(await freePort()) })
    children.push(running.child)
    const ops = await running.opsUrl()
    await waitForUrl(`${ops}/readyz`, 60_000)
    await fenceAt(db.sql, NEWER)
    // Its registry entry says so within a beat (15 s).
    const status = await waitFor(
      async () => {
        const r = await runCli(["status", "--json"], { DATABASE_URL: db.url, REPLICATION_SLOT: env.REPLICATION_SLOT })
        const s = JSON.parse(r.stdout)
        return s.release?.processes?.some((p: { writable: boolean }) => !p.writable) ? { code: r.code, s } : null
      },
      "status to list the process as fenced",
      40_000,
      1_000
    )
    expect(status.code).toBe(1)
    expect(status.s.release).toMatchObject({
      version: RELEASE.version,
      generation: RELEASE.generation,
      database: { oldestWriter: NEWER, generation: RELEASE.generation },
      processes: [{ release: RELEASE.version, pid: running.child.pid, writable: false }]
    })
    expect(status.s.health.reasons).toContain(
      `process ${status.s.release.processes[0].host}:${running.child.pid} runs release ${RELEASE.version}, older than the ${NEWER} the database takes writes from: it writes nothing; replace it`
    )
    const text = await runCli(["status"], { DATABASE_URL: db.url, REPLICATION_SLOT: env.REPLICATION_SLOT })
    expect(text.stdout).toContain(`this tool:   ${RELEASE.version} (schema generation ${RELEASE.generation})`)
    expect(text.stdout).toContain(`takes writes from release ${NEWER} or newer (since 999_newer.sql)`)
    expect(text.stdout).toMatch(new RegExp(`${RELEASE.version.replace(/\./g, "\\.")}\\s.*no: fenced`))
    const ready = (await (await fetch(`${ops}/readyz`)).json()) as Readiness & { release: Record<string, unknown> }
    expect(ready.status).toBe("ready")
    expect(ready.release).toEqual({
      version: RELEASE.version,
      generation: RELEASE.generation,
      writable: false,
      database: { generation: RELEASE.generation, oldestWriter: NEWER },
      fenceReason: expect.stringContaining(`takes writes from release ${NEWER} or newer`)
    })
    expect(running.output()).toContain("schema fence: this process may no longer write")

    const again = startService({ ...env, PORT: String(await freePort()) })
    children.push(again.child)
    expect(await again.exited()).toBe(1)
    expect(again.stderr()).toMatch(
      new RegExp(
        `^error: schema fence: the service's database \\(schema generation \\d+\\) takes writes from release ${NEWER.replace(/\./g, "\\.")} or newer`
      )
    )
    expect(again.stderr()).toContain(`this process runs release ${RELEASE.version}`)
  })
})
