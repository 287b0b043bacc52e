// Several replicas of the real service (node src/main.ts) on one database while the app
// writes: every one is ready, one leads capture and the others wait as standbys; SIGKILL the
// leader, then the next one, and a standby takes over each time. Every app change ends with
// exactly one event, every event reaches the HTTPS receiver under one delivery id, the
// survivor's API answers throughout, and a key's rate limit holds across the processes.
// Run with one database and with the service's state in a database of its own
// (SERVICE_DATABASE_URL): the leader lock is in the service's, the slot in the app's.
// Then SERVICE_ROLES: an API-only replica, a worker without the API, and bad values.
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { DELIVERIES_CHANNEL } from "../../src/platform/db/channels.ts"
import { Cause, Effect, Exit } from "effect"
import { loadServiceRoles, parseServiceRoles } from "../../src/platform/config.ts"
import { operationsStatus } from "../../src/faces/ops/status.ts"
import { createEndpoint } from "../../src/webhooks/endpoints/endpoints.ts"
import { insertAction, insertIncident, makeCompany } from "../support/app.ts"
import { startHttpsReceiver, type Receiver } from "../support/https-receiver.ts"
import { freePort } from "../support/net.ts"
import { apiKey, sample } from "../support/observed.ts"
import { ADMIN, LOOPBACK, sleep, waitFor } from "../support/world.ts"
import type { TestDatabase } from "../support/db.ts"
import { useDatabase, useSplitDatabases } from "../support/fixtures.ts"
import { runSql } from "../support/sql.ts"

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url))
const RATE_LIMIT = 60
const RATE_WINDOW_SECONDS = 10
const EVENTS = ["incident.created", "corrective_action.created", "corrective_action.closed"] as const

interface Readiness {
  status: string
  roles: string[]
  capture: { role: string; streaming: boolean; lagSeconds: number | null; lastError: string | null }
}

interface Replica {
  readonly name: string
  readonly child: ChildProcess
  readonly url: string
  /** The operations port: /metrics and the detailed /readyz. */
  readonly opsUrl: string
  readonly output: () => string
  /** The service's JSON log lines so far. */
  readonly logs: () => ReadonlyArray<Record<string, unknown>>
  readonly exited: Promise<number | null>
  killedAt: number | null
}

const db = useDatabase()
const split = useSplitDatabases()
let receiver: Receiver
let dir: string
let env: Record<string, string>
let companyId: string
const replicas: Replica[] = []

const start = async (name: string, extra: Record<string, string> = {}): Promise<Replica> => {
  const port = await freePort()
  const opsPort = await freePort()
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, ...env, PORT: String(port), OPS_PORT: String(opsPort), ...extra },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const replica: Replica = {
    name,
    child,
    url: `http://127.0.0.1:${port}`,
    opsUrl: `http://127.0.0.1:${opsPort}`,
    output: () => output,
    logs: () =>
      output
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    exited,
    killedAt: null
  }
  replicas.push(replica)
  return replica
}

const readiness = async (r: Replica): Promise<{ status: number; body: Readiness } | null> => {
  try {
    const answer = await fetch(`${r.opsUrl}/readyz`, { signal: AbortSignal.timeout(2_000) })
    return { status: answer.status, body: (await answer.json()) as Readiness }
  } catch {
    return null
  }
}

const ready = (r: Replica) =>
  waitFor(
    async () => {
      if (r.child.exitCode !== null)
        throw new Error(`${r.name} exited (${r.child.exitCode}):\n${r.output().slice(-3000)}`)
      const answer = await readiness(r)
      return answer?.status === 200 ? answer.body : null
    },
    `${r.name} to be ready`,
    40_000
  )

const live = (r: Replica) => r.killedAt === null && r.child.exitCode === null

/** The one live replica that leads capture and streams (the others must be standbys). */
const leader = (among: ReadonlyArray<Replica>) =>
  waitFor(
    async () => {
      const answers = await Promise.all(among.map(async (r) => ({ r, answer: await readiness(r) })))
      const leading = answers.filter((a) => a.answer?.body.capture.role === "leader")
      if (leading.length !== 1 || !leading[0]!.answer!.body.capture.streaming) return null
      for (const a of answers)
        if (a.r !== leading[0]!.r)
          expect(a.answer).toMatchObject({ status: 200, body: { capture: { role: "standby", streaming: false } } })
      return leading[0]!.r
    },
    "one replica to lead capture and stream",
    30_000
  )

const kill = async (r: Replica) => {
  r.killedAt = Date.now()
  r.child.kill("SIGKILL")
  await r.exited
}

/** Where the replicas run: the app's database (written by the app), the service's (the same one, or its own). */
interface Databases {
  readonly app: TestDatabase
  readonly service: TestDatabase
  /** What the replicas get besides `env`. */
  readonly env: Record<string, string>
  readonly companyId: string
}

/** Capture has applied everything committed before the call. */
const settled = async (dbs: Databases) => {
  const [row] = await dbs.app.sql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'test-sync', '')::text as lsn`
  await waitFor(
    async () => {
      const [c] = await dbs.service.sql<
        { ok: boolean }[]
      >`select checkpoint_lsn >= ${row!.lsn}::pg_lsn as ok from service.capture_state where slot_name = ${dbs.env.REPLICATION_SLOT ?? env.REPLICATION_SLOT!}`
      return c?.ok
    },
    "capture to catch up",
    30_000
  )
}

beforeAll(async () => {
  receiver = await startHttpsReceiver()
  dir = mkdtempSync(join(tmpdir(), "srs-replicas-"))
  const caFile = join(dir, "ca.pem")
  writeFileSync(caFile, receiver.ca)
  companyId = (await makeCompany(db.sql)).id
  env = {
    DATABASE_URL: db.url,
    REPLICATION_SLOT: `slot_${db.name}`,
    SEED_DEMO: "false",
    LOG_LEVEL: "Info",
    HOST: "127.0.0.1",
    SECRETS_KEY: randomBytes(32).toString("base64"),
    WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
    WEBHOOK_RETRY_SCHEDULE: "1s,1s,1s,1s,1s",
    NODE_EXTRA_CA_CERTS: caFile,
    CAPTURE_HEARTBEAT: "1 second",
    API_RATE_LIMIT: String(RATE_LIMIT),
    API_RATE_WINDOW_SECONDS: String(RATE_WINDOW_SECONDS),
    API_USAGE_FLUSH: "500 millis"
  }
})
afterAll(async () => {
  for (const r of replicas) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill("SIGKILL")
  await Promise.all(replicas.map((r) => r.exited))
  await receiver?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const oneDatabase = (): Databases => ({ app: db, service: db, env: {}, companyId })

let splitCompanyId = ""
const twoDatabases = (): Databases => ({
  app: split.app,
  service: split.service,
  env: {
    DATABASE_URL: split.app.url,
    SERVICE_DATABASE_URL: split.service.url,
    REPLICATION_SLOT: `slot_${split.name}`
  },
  companyId: splitCompanyId
})

/**
 * Three replicas; the capture leader killed twice, a standby takes over each time; one event
 * per change, one id per delivery; the survivor's API never fails; one rate limit. Returns the survivor.
 */
const killLeaders = async (dbs: Databases, tag: string): Promise<Replica> => {
  const sql = dbs.service.sql
  const companyId = dbs.companyId
  const slot = dbs.env.REPLICATION_SLOT ?? env.REPLICATION_SLOT!
  // (a block, so the test's body keeps its indentation)
  {
    const three = await Promise.all(["a", "b", "c"].map((n) => start(`${tag}${n}`, dbs.env)))
    const alive = () => three.filter(live)
    for (const r of three)
      expect(await ready(r)).toMatchObject({ status: "ready", roles: ["api", "capture", "delivery"] })
    const first = await leader(three)
    expect(first.logs().some((l) => l.message === "capture leader: took over")).toBe(true)
    // The standbys said so, and named the process that leads (its lock session's application name).
    for (const r of three.filter((r) => r !== first)) {
      await waitFor(
        () => r.logs().find((l) => l.message === "capture standby: waiting for the leader lock"),
        `${r.name} to log that it waits`,
        10_000
      )
      const waiting = r.logs().filter((l) => l.message === "capture standby: waiting for the leader lock")
      expect(waiting.at(-1)).toMatchObject({
        level: "info",
        leader: { applicationName: `safety-records-service capture leader ${hostname()}:${first.child.pid}` }
      })
    }

    // Capture mirrors the company; then its keys (one per replica for the pollers, one for
    // the rate limit) and an endpoint at the HTTPS receiver.
    await waitFor(
      async () => (await sql`select 1 from service.companies where id = ${companyId}`).length > 0,
      "the company to be mirrored"
    )
    const pollKeys = await Promise.all(three.map(() => apiKey(sql, companyId, ["incidents"])))
    const limited = await apiKey(sql, companyId, ["incidents"])
    await runSql(
      sql,
      createEndpoint({ secretsKey: Buffer.from(env.SECRETS_KEY!, "base64"), allowed: LOOPBACK }, ADMIN, {
        companyId,
        name: "Replicas",
        url: receiver.url(`/hook${tag}`),
        events: [...EVENTS]
      })
    )

    // One key's limit across the three processes: 30 requests to each at once (90), of which
    // at most the limit are admitted in its window. Leases can leave a request or two per
    // process unused at the end of a busy window, so a few fewer may be admitted.
    const t0 = Date.now()
    const statuses = await Promise.all(
      three.flatMap((r) =>
        Array.from({ length: 30 }, () =>
          fetch(`${r.url}/api/v1/incidents?limit=1`, { headers: { authorization: `Bearer ${limited.key}` } }).then(
            (a) => a.status
          )
        )
      )
    )
    expect(Date.now() - t0).toBeLessThan(RATE_WINDOW_SECONDS * 1000)
    const admitted = statuses.filter((s) => s === 200).length
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([])
    expect(admitted).toBeLessThanOrEqual(RATE_LIMIT)
    expect(admitted).toBeGreaterThanOrEqual(RATE_LIMIT - 2 * three.length)

    // The app writes: incidents, corrective actions made and closed, one transaction each.
    const written = { incidents: [] as string[], actions: [] as string[], closed: [] as string[] }
    let writing = true
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        written.incidents.push(await insertIncident(dbs.app.sql, companyId))
        if (i % 2 === 0) written.actions.push(await insertAction(dbs.app.sql, companyId))
        if (i % 3 === 0 && written.actions.length > written.closed.length) {
          const id = written.actions[written.closed.length]!
          await dbs.app
            .sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${id}`
          written.closed.push(id)
        }
        await sleep(25)
      }
    })()
    // Each replica's API, polled with its own key (4 a second: within the limit).
    const polls: Array<{ replica: Replica; at: number; status: number | string }> = []
    let polling = true
    const pollers = three.map(async (r, i) => {
      while (polling && r.killedAt === null) {
        const at = Date.now()
        const status = await fetch(`${r.url}/api/v1/incidents?limit=1`, {
          headers: { authorization: `Bearer ${pollKeys[i]!.key}` },
          signal: AbortSignal.timeout(3_000)
        }).then(
          (a) => a.status,
          (e: Error) => e.message
        )
        if (r.killedAt === null) polls.push({ replica: r, at, status })
        await sleep(250)
      }
    })

    await sleep(1_000)
    await kill(first)
    const second = await leader(alive())
    expect(second).not.toBe(first)
    expect(
      second
        .logs()
        .filter((l) => l.message === "capture leader: took over")
        .at(-1)
    ).toMatchObject({ waitedSeconds: expect.any(Number) })
    await sleep(1_000)
    await kill(second)
    const survivor = await leader(alive())
    expect(three.filter((r) => r.killedAt === null)).toEqual([survivor])
    expect(survivor.logs().some((l) => l.message === "capture leader: took over")).toBe(true)
    await sleep(1_000)
    writing = false
    await writer
    polling = false
    await Promise.all(pollers)
    await settled(dbs)

    // Every change has exactly one event, and there are no others.
    const expected = [
      ...written.incidents.map((id) => `incident.created ${id}`),
      ...written.actions.map((id) => `corrective_action.created ${id}`),
      ...written.closed.map((id) => `corrective_action.closed ${id}`)
    ].sort()
    const events = (
      await sql<{ e: string }[]>`select event || ' ' || record_id as e from service.events order by 1`
    ).map((r) => r.e)
    expect(written.incidents.length).toBeGreaterThan(20)
    expect(written.closed.length).toBeGreaterThan(3)
    expect(events).toEqual(expected)

    // A killed process's leases run out after 60 s; rather than wait, end those now (the
    // kills were seconds ago, while the survivor sends to this receiver within milliseconds
    // of leasing; should it be sending one still, it sends it again, under the same id), and
    // wake the survivor.
    await sql`update service.webhook_deliveries set lease_until = now() where state = 'pending' and lease_until > now() and lease_until < now() + interval '59 seconds'`
    await sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`
    // Every event reaches the receiver, each under one delivery id (a repeat keeps its id).
    const deliveredUnder = () => {
      const ids = new Map<string, Set<string>>()
      for (const req of receiver.requests.filter((q) => q.path === `/hook${tag}`)) {
        const body = JSON.parse(req.body.toString("utf8")) as { id: string; event: string; data: { id: string } }
        const key = `${body.event} ${body.data.id}`
        ids.set(key, (ids.get(key) ?? new Set()).add(body.id))
      }
      return ids
    }
    await waitFor(() => deliveredUnder().size >= expected.length, "every event to be delivered", 20_000)
    const delivered = deliveredUnder()
    expect([...delivered.keys()].sort()).toEqual(expected)
    expect([...delivered.entries()].filter(([, ids]) => ids.size !== 1)).toEqual([])
    // A first attempt's row is written after it was sent (many per statement): wait for the
    // last ones, then there is exactly one row per event.
    const rowsNow = async () =>
      (
        await sql<{ deliveries: number; events: number }[]>`
        select count(*)::int as deliveries, count(distinct event_id)::int as events from service.webhook_deliveries`
      )[0]!
    await waitFor(
      async () => ((await rowsNow()).deliveries >= expected.length ? true : undefined),
      "every delivery's row",
      20_000
    )
    expect(await rowsNow()).toEqual({ deliveries: expected.length, events: expected.length })

    // The survivor answered every poll; the others, every poll before they were killed.
    const of = (r: Replica) => polls.filter((p) => p.replica === r)
    expect(of(survivor).length).toBeGreaterThan(10)
    expect(of(survivor).filter((p) => p.status !== 200)).toEqual([])
    for (const r of [first, second])
      expect(of(r).filter((p) => p.at < r.killedAt! - 100 && p.status !== 200)).toEqual([])

    // status names the survivor's process as the leader (test/faces/ops/status.test.ts runs
    // the CLI); its metrics say it leads.
    const status = await runSql(sql, operationsStatus(slot), dbs.app === dbs.service ? undefined : dbs.app.sql)
    expect(status.capture.leader).toMatchObject({
      applicationName: `safety-records-service capture leader ${hostname()}:${survivor.child.pid}`
    })
    const metrics = await (await fetch(`${survivor.opsUrl}/metrics`)).text()
    expect(sample(metrics, "srs_capture_leader")).toBe(1)
    expect(sample(metrics, "srs_capture_role", { role: "leader" })).toBe(1)
    // The slot as the app's database has it (with two databases, not the service's).
    expect(sample(metrics, "srs_capture_slot_wal_status", { status: "reserved" })).toBe(1)
    return survivor
  }
}

describe("several replicas", () => {
  it("on one database: all ready; the capture leader killed twice, a standby takes over; one event per change, one id per delivery; the survivor's API never fails; one rate limit", {
    timeout: 90_000
  }, async () => {
    await killLeaders(oneDatabase(), "")
  })

  it("SERVICE_ROLES: an API-only replica and a worker without the API are ready; an unknown value is refused (exit 1)", {
    timeout: 60_000
  }, async () => {
    // The survivor of the test above still leads capture: the worker waits as a standby.
    const [api, worker, bad, badRate] = await Promise.all([
      start("api-only", { SERVICE_ROLES: "api" }),
      start("worker", { SERVICE_ROLES: "capture, delivery" }),
      start("bad", { SERVICE_ROLES: "api,bogus" }),
      start("bad-rate", { REPLAY_RATE: "fast" })
    ])
    expect(await bad.exited).toBe(1)
    expect(bad.output()).toContain(
      'SERVICE_ROLES must list one or more of api, capture, delivery, separated by commas (default api,capture,delivery), not "api,bogus"'
    )
    expect(await badRate.exited).toBe(1)
    expect(badRate.output()).toContain(
      'error: REPLAY_RATE must be deliveries per second per destination, more than 0 and at most 1000 (e.g. 10 or 0.5), not "fast"'
    )
    expect(await ready(api)).toMatchObject({
      status: "ready",
      roles: ["api"],
      capture: { role: "off", streaming: false }
    })
    expect(await ready(worker)).toMatchObject({
      status: "ready",
      roles: ["capture", "delivery"],
      capture: { role: "standby" }
    })
    const key = await apiKey(db.sql, companyId, ["incidents"])
    const read = (r: Replica, path: string) =>
      fetch(`${r.url}${path}`, { headers: { authorization: `Bearer ${key.key}` } })
    expect((await read(api, "/api/v1/incidents?limit=1")).status).toBe(200)
    expect(sample(await (await fetch(`${api.opsUrl}/metrics`)).text(), "srs_capture_role", { role: "off" })).toBe(1)
    // The worker serves what orchestrators ask, not the API or the admin.
    expect((await read(worker, "/api/v1/incidents?limit=1")).status).toBe(404)
    expect((await fetch(`${worker.url}/admin/sign-in`)).status).toBe(404)
    expect((await fetch(`${worker.url}/healthz`)).status).toBe(200)
    expect(
      sample(await (await fetch(`${worker.opsUrl}/metrics`)).text(), "srs_capture_role", { role: "standby" })
    ).toBe(1)
    await waitFor(
      () => worker.logs().some((l) => l.message === "capture standby: waiting for the leader lock"),
      "the worker to wait as a standby",
      10_000
    )
    expect(api.output()).not.toContain("capture standby")
    expect(api.output()).not.toContain("capture streaming")
    expect(api.output()).not.toContain("webhook delivery started")
  })

  it("with the service's own database: the same, the leader lock in the service's database and the slot in the app's", {
    timeout: 90_000
  }, async () => {
    splitCompanyId = (await makeCompany(split.app.sql)).id
    const dbs = twoDatabases()
    const survivor = await killLeaders(dbs, "own-")
    // Nothing of the service's in the app's database; the lock's session is in the service's.
    expect(await split.app.sql`select 1 from pg_namespace where nspname = 'service'`).toHaveLength(0)
    const [holder] = await split.service.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity
      where datname = current_database() and application_name = ${`safety-records-service capture leader ${hostname()}:${survivor.child.pid}`}`
    expect(holder!.n).toBe(1)
  })

  it("SERVICE_ROLES is read in any order and case; an empty one is refused, not taken for every role", async () => {
    expect(parseServiceRoles("Delivery, api")).toEqual(["api", "delivery"])
    expect(parseServiceRoles("capture,capture,")).toEqual(["capture"])
    for (const bad of ["", " , ", "api;capture", "web"]) expect(parseServiceRoles(bad)).toBeUndefined()
    const saved = process.env.SERVICE_ROLES
    try {
      // The environment provider reads "" as unset (it would mean the default, every role).
      process.env.SERVICE_ROLES = ""
      const exit = await Effect.runPromiseExit(loadServiceRoles)
      expect(Exit.isFailure(exit) && Cause.pretty(exit.cause)).toContain(
        'SERVICE_ROLES must list one or more of api, capture, delivery, separated by commas (default api,capture,delivery), not ""'
      )
      delete process.env.SERVICE_ROLES
      expect(await Effect.runPromise(loadServiceRoles)).toEqual(["api", "capture", "delivery"])
    } finally {
      if (saved === undefined) delete process.env.SERVICE_ROLES
      else process.env.SERVICE_ROLES = saved
    }
  })
})
