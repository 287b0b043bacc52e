// Capture with the service's state in a database of its own (SERVICE_DATABASE_URL): the app's
// database keeps only the slot (and the publication); views, events and the checkpoint commit
// together in the service's. A restart of either database loses and doubles nothing; a
// service database restored from a backup older than the slot is refused, saying what was
// lost, and `rebuild-views --fresh-snapshot` rebuilds it from a fresh snapshot of the app.
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connect } from "../../../src/platform/db/Database.ts"
import { ensureDemoAppSchema } from "../../../src/platform/db/demo-schema.ts"
import { startEmbedded, type EmbeddedServer } from "../../../src/platform/db/embedded.ts"
import { parseLsn } from "../../../src/platform/db/lsn.ts"
import { migrate } from "../../../src/platform/db/migrate.ts"
import { insertAction, insertIncident, makeCompany } from "../../support/app.ts"
import { outbox, startCapture, view } from "../../support/capture.ts"
import { runCli } from "../../support/cli.ts"
import { adminUrl } from "../../support/db.ts"
import { useSplitDatabases, useTempDirs } from "../../support/fixtures.ts"
import { freePort } from "../../support/net.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { startService } from "../../support/service-process.ts"
import { waitFor } from "../../support/wait.ts"

/** The slot's confirmed position and the service's checkpoint for it. */
const positions = async (app: postgres.Sql, service: postgres.Sql, slot: string) => {
  const [s] = await app<{ lsn: string }[]>`
    select confirmed_flush_lsn::text as lsn from pg_replication_slots where slot_name = ${slot}`
  const [c] = await service<{ lsn: string }[]>`
    select checkpoint_lsn::text as lsn from service.capture_state where slot_name = ${slot}`
  return { confirmed: parseLsn(s!.lsn), checkpoint: parseLsn(c!.lsn) }
}

describe("capture across two databases", () => {
  const d = useSplitDatabases()

  it("follows the app's database and writes only the service's: views, events and checkpoint there, the slot alone in the app's", async () => {
    const slot = `slot_${d.name}`
    const company = await makeCompany(d.app.sql)
    const cap = startCapture(d.service, { ...d.capture, slot, heartbeatMs: 200 })
    await cap.settle(60_000)
    const incident = await insertIncident(d.app.sql, company.id, { title: "Two databases" })
    const action = await insertAction(d.app.sql, company.id)
    await d.app.sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${action}`
    await cap.settle()
    // Idle: the heartbeat (a message in the app's WAL) moves checkpoint and slot together.
    await new Promise((r) => setTimeout(r, 1000))
    await cap.stop()
    expect(await view(d.service.sql, "incidents", incident)).toMatchObject({ title: "Two databases" })
    expect((await outbox(d.service.sql)).map((e) => `${e.event} ${e.record_id}`)).toEqual([
      `incident.created ${incident}`,
      `corrective_action.created ${action}`,
      `corrective_action.closed ${action}`
    ])
    // The app's database holds nothing of the service's: no schema, so no table, no row.
    expect(await d.app.sql`select 1 from pg_namespace where nspname = 'service'`).toHaveLength(0)
    // The slot is the app's; the service's database has none (nothing follows it).
    expect(await d.service.sql`select 1 from pg_replication_slots where database = current_database()`).toHaveLength(0)
    // Stored before confirmed: the slot never confirms what the service's database does not hold.
    const p = await positions(d.app.sql, d.service.sql, slot)
    expect(p.confirmed).toBeLessThanOrEqual(p.checkpoint)
    expect(p.confirmed).toBeGreaterThan(0n)
    const { diff } = await diffAgainstFreshProjection(d.service, d.app)
    expect(diff).toEqual([])
  })
})

describe("a service database restored from a backup older than the slot", () => {
  const d = useSplitDatabases()
  const dirs = useTempDirs("srs-split-")
  const backup = `tb_${randomBytes(5).toString("hex")}`
  let admin: postgres.Sql
  beforeAll(() => {
    admin = postgres(adminUrl(), { max: 1, onnotice: () => {} })
  })
  afterAll(async () => {
    await admin.unsafe(`drop database if exists ${backup} with (force)`)
    await admin.end()
  })

  /** `create database <to> template <from>`, with nobody connected to `from` (as a restore copies files). */
  const copy = async (from: string, to: string) => {
    for (let attempt = 0; ; attempt++) {
      await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${from} and pid <> pg_backend_pid()`
      try {
        await admin.unsafe(`create database ${to} template ${from}`)
        return
      } catch (e) {
        if (attempt > 50 || !/being accessed by other users/.test((e as Error).message)) throw e
        await new Promise((r) => setTimeout(r, 100))
      }
    }
  }

  it("is refused at start naming the lost range; rebuild-views --fresh-snapshot rebuilds it, and the lost changes fire nothing", {
    timeout: 180_000
  }, async () => {
    const slot = `slot_${d.name}`
    const env = {
      DATABASE_URL: d.app.url,
      SERVICE_DATABASE_URL: d.service.url,
      REPLICATION_SLOT: slot,
      SEED_DEMO: "false",
      SECRETS_KEY: randomBytes(32).toString("base64"),
      DATA_DIR: dirs()
    }
    const company = await makeCompany(d.app.sql)
    let cap = startCapture(d.service, { ...d.capture, slot })
    await cap.settle(60_000)
    const early = await insertIncident(d.app.sql, company.id, { title: "Before the backup" })
    await cap.settle()
    await cap.stop()
    // The backup, taken now.
    const backedUp = (await positions(d.app.sql, d.service.sql, slot)).checkpoint
    await copy(d.service.name, backup)
    // Capture goes on after it; the slot confirms the change.
    cap = startCapture(d.service, { ...d.capture, slot })
    await cap.settle()
    const lost = await insertIncident(d.app.sql, company.id, { title: "After the backup" })
    await cap.settle()
    // The slot confirms a batch once the service's database has flushed it (flushed.ts): soon after.
    await waitFor(
      async () => (await positions(d.app.sql, d.service.sql, slot)).confirmed > backedUp || undefined,
      "the slot to confirm the change made after the backup"
    )
    await cap.stop()
    const confirmed = (await positions(d.app.sql, d.service.sql, slot)).confirmed
    expect(confirmed).toBeGreaterThan(backedUp)
    // The service's database is restored from the backup.
    await admin.unsafe(`drop database ${d.service.name} with (force)`)
    await copy(backup, d.service.name)
    const fmt = (l: bigint) =>
      `${(l >> 32n).toString(16).toUpperCase()}/${(l & 0xffffffffn).toString(16).toUpperCase()}`

    // The service refuses to start (exit 1), naming the range and the fix.
    const refused = startService({ ...env, PORT: String(await freePort()) })
    expect(await refused.exited(60_000)).toBe(1)
    expect(refused.stderr()).toContain(
      `The service's database is behind replication slot ${slot}: its checkpoint is ${fmt(backedUp)}, but the slot in the app's database has confirmed ${fmt(confirmed)}.`
    )
    expect(refused.stderr()).toContain("npm run admin -- rebuild-views --fresh-snapshot")
    // A capture run refuses too (a standby taking over later), writing nothing.
    cap = startCapture(d.service, { ...d.capture, slot })
    await waitFor(
      () => cap.logs.find((l) => l.level === "retry" && l.message.includes("is behind replication slot")),
      "a capture run to refuse",
      30_000
    )
    await cap.stop()
    expect(await view(d.service.sql, "incidents", lost)).toBeUndefined()
    expect((await positions(d.app.sql, d.service.sql, slot)).checkpoint).toBe(backedUp)
    // status says so: broken.
    const status = await runCli(["status", "--json"], env)
    expect(status.code).toBe(2)
    expect(JSON.parse(status.stdout).capture).toMatchObject({ behindSlot: true, confirmedLsn: fmt(confirmed) })

    const fresh = await runCli(["rebuild-views", "--fresh-snapshot", "--json"], env)
    expect(fresh.code, fresh.stderr).toBe(0)
    const answer = JSON.parse(fresh.stdout)
    expect(answer).toMatchObject({ slot, behindSlot: fmt(confirmed), lost: { from: fmt(backedUp) } })
    expect(parseLsn(answer.consistentPoint)).toBeGreaterThan(confirmed)
    expect(fresh.stderr).toContain("views rebuilt from a fresh snapshot")

    // Capture resumes from the new slot: the lost change's view is back, its event never fires.
    cap = startCapture(d.service, { ...d.capture, slot })
    await cap.settle(60_000)
    expect(await view(d.service.sql, "incidents", lost)).toMatchObject({ title: "After the backup" })
    const later = await insertIncident(d.app.sql, company.id, { title: "After the rebuild" })
    await cap.settle()
    await cap.stop()
    expect((await outbox(d.service.sql)).map((e) => e.record_id)).toEqual([early, later])
    const [state] = await d.service.sql<{ gap_reason: string }[]>`
      select gap_reason from service.capture_state where slot_name = ${slot}`
    expect(state!.gap_reason).toContain(`events for changes after checkpoint ${fmt(backedUp)} could not be derived`)
    const { diff } = await diffAgainstFreshProjection(d.service, d.app)
    expect(diff).toEqual([])
  })
})

describe("a restart of either database mid-run", () => {
  const dirs: string[] = []
  let appServer: EmbeddedServer
  let serviceServer: EmbeddedServer
  const ports = { app: 0, service: 0 }
  const dirOf = () => {
    const dir = mkdtempSync(join(tmpdir(), "srs-split-restart-"))
    chmodSync(dir, 0o755)
    dirs.push(dir)
    return dir
  }
  beforeAll(async () => {
    ports.app = await freePort()
    ports.service = await freePort()
    const [a, s] = [dirOf(), dirOf()]
    appServer = await startEmbedded({ dataDir: a, port: ports.app })
    serviceServer = await startEmbedded({ dataDir: s, port: ports.service })
  })
  afterAll(async () => {
    await appServer?.stop()
    await serviceServer?.stop()
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  it("the app's, then the service's: capture resumes from its checkpoint, nothing lost or doubled", {
    timeout: 180_000
  }, async () => {
    const appUrl = appServer.url
    const serviceUrl = serviceServer.url
    const app = connect(appUrl, 2)
    const service = connect(serviceUrl, 4)
    const capturedApp = connect(appUrl, 2)
    await ensureDemoAppSchema(app)
    await migrate(service)
    const company = await makeCompany(app)
    const cap = startCapture(
      { sql: service, url: serviceUrl, name: "restart" },
      { app: { url: appUrl, sql: capturedApp } }
    )
    await cap.settle(60_000)
    const written: string[] = []
    // The app is its own program: each phase writes through a fresh pool of its own.
    const write = async (n: number) => {
      const sql = connect(appServer.url, 1)
      for (let i = 0; i < n; i++) written.push(await insertIncident(sql, company.id))
      await sql.end({ timeout: 2 })
    }
    const eventsNow = async () => {
      const sql = connect(serviceServer.url, 1)
      try {
        return (
          await sql<
            { record_id: string }[]
          >`select record_id::text from service.events where event = 'incident.created'`
        ).map((r) => r.record_id)
      } finally {
        await sql.end({ timeout: 2 })
      }
    }
    const caughtUp = () =>
      waitFor(
        async () => ((await eventsNow().catch(() => [])).length >= written.length ? true : undefined),
        "capture to apply every incident",
        60_000,
        100
      )

    await write(30)
    // The app's database goes down and comes back (its walsender waits, at shutdown, for
    // capture to confirm what it sent: capture stores that first in the service's database).
    await appServer.stop()
    appServer = await startEmbedded({ dataDir: dirs[0]!, port: ports.app })
    await write(30)
    await caughtUp()
    // Then the service's database, with the app writing meanwhile.
    const during = write(30)
    await serviceServer.stop()
    serviceServer = await startEmbedded({ dataDir: dirs[1]!, port: ports.service })
    await during
    await write(10)
    await caughtUp()
    await cap.settle(60_000)
    await cap.stop()

    const events = await eventsNow()
    expect(events.sort()).toEqual([...written].sort())
    expect(cap.logs.some((l) => l.level === "retry")).toBe(true)
    expect(cap.logs.some((l) => l.message.includes("behind replication slot"))).toBe(false)
    const a = connect(appServer.url, 1)
    const s = connect(serviceServer.url, 1)
    const p = await positions(a, s, `slot_restart`)
    expect(p.confirmed).toBeLessThanOrEqual(p.checkpoint)
    await Promise.all([a, s, app, service, capturedApp].map((x) => x.end({ timeout: 2 })))
  })
})
