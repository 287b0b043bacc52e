// Webhook delivery benchmark: rows committed in the app's tables, through capture, the
// outbox, fan-out and the delivery engine, to a local HTTPS receiver.
//   1. deliveries/s at saturation: a backlog of events drained by the engine (to one
//      endpoint, to six, to six with a content filter on each, and to six by two engine
//      processes sharing the work);
//   2. commit-to-receipt latency p50/p99 with events committed at a fixed 200/s;
//   3. the baseline: a bare undici loop posting signed bodies to the same receiver;
//   4. isolation: a company whose 12 endpoints on 12 loopback addresses take requests and never
//      answer (until they recover) beside another company's healthy endpoint: the latter's
//      commit-to-receipt p50/p99 (and alone, before), and how long until every delivery of both
//      has arrived (the former's by its retry schedule).
// The receiver runs in its own process; BENCH_RECEIVER=local runs it inside this one instead,
// where its TLS work shares the event loop with the engine and with the bare loop.
// Run: npm run bench:webhooks   (BENCH_EVENTS, BENCH_RATE, BENCH_SECONDS, BENCH_INFLIGHT to change;
// BENCH_ISOLATION_SECONDS, BENCH_ISOLATION=0 to skip row 4, BENCH_SATURATION=0 to skip rows 1 and 3;
// BENCH_CPU=1 prints CPU per process and per delivery, the baseline's too, and PostgreSQL's by
// process kind; BENCH_PROFILE=<file> writes a CPU profile of the drains)
import { fork } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { Session } from "node:inspector/promises"
import { cpus, tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Exit, Scope } from "effect"
import postgres from "postgres"
import { Pool } from "undici"
import { parseAllowedNetworksOrThrow, type Lookup } from "../src/webhooks/net/address-guard.ts"
import { makeEngine, type EngineOptions } from "../src/webhooks/engine/engine.ts"
import { eventPayload } from "../src/pipeline/outbox/events.ts"
import { parseRetryScheduleOrThrow } from "../src/domain/retry-schedule.ts"
import { closeSenderConnections, USER_AGENT } from "../src/webhooks/net/sender.ts"
import { newSecret, sign } from "../src/webhooks/net/signature.ts"
import { connect } from "../src/platform/db/Database.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { prepareDemoDatabase } from "../src/platform/db/demo-schema.ts"
import { createEndpoint } from "../src/webhooks/endpoints/endpoints.ts"
import type { WebhookDeps } from "../src/webhooks/engine/settings.ts"
import { makeCompany } from "../test/support/app.ts"
import { runSql } from "../test/support/sql.ts"
import { startCapture } from "../test/support/capture.ts"
import { startHungReceivers, startLocalReceiver } from "./webhooks-receiver.ts"
import { freePort } from "../test/support/global-setup.ts"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000)
const RATE = Number(process.env.BENCH_RATE ?? 200)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const INFLIGHT = Number(process.env.BENCH_INFLIGHT ?? 50)
/** Alternating drains to six endpoints without and with a content filter on each. */
const FILTER_ROUNDS = Number(process.env.BENCH_FILTER_ROUNDS ?? 2)
const NAMES = ["127.0.0.1", "localhost", "receiver.test", "hooks.receiver.test", "webhook-test.local", "rebind.test"]
const ISO_SECONDS = Number(process.env.BENCH_ISOLATION_SECONDS ?? 60)
const ISOLATION = process.env.BENCH_ISOLATION !== "0"
const SATURATION = process.env.BENCH_SATURATION !== "0"
/** The hung company's endpoints: a<i>.hung.test on 127.0.0.<2 + i>. */
const HUNG = 12
const hungHost = (i: number) => `a${i}.hung.test`

/** CPU milliseconds used so far by a process and, with `children`, its direct children (Linux /proc). */
const cpuOf = (root: number, children: boolean): number => {
  let ticks = 0
  try {
    for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
        const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
        if (Number(pid) === root || (children && Number(f[1]) === root)) ticks += Number(f[11]) + Number(f[12])
      } catch {
        // gone meanwhile
      }
    }
  } catch {
    return 0
  }
  return ticks * 10
}

/** CPU milliseconds per PostgreSQL process title (walsender, client backends, autovacuum...), children of `root`. */
const cpuByTitle = (root: number): Map<string, number> => {
  const out = new Map<string, number>()
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (Number(f[1]) !== root) continue
      const title = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0/g, " ").trim()
      const kind =
        title
          .replace(/^postgres: /, "")
          .split(" ")[0]!
          .replace(/[^a-z ]/g, "") || "other"
      const key = kind === "bench" || kind === "postgres" ? "client backends" : kind
      out.set(key, (out.get(key) ?? 0) + (Number(f[11]) + Number(f[12])) * 10)
    } catch {
      // gone meanwhile
    }
  }
  return out
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
type CpuUs = { readonly engine: number; readonly postgres: number | null; readonly receiver: number | null }
const cpuRow = (name: string, c: CpuUs) => {
  const cell = (v: number | null) => (v === null ? "–" : Math.round(v).toLocaleString("en-US"))
  return `| ${name} | ${cell(c.engine)} | ${cell(c.postgres)} | ${cell(c.receiver)} | ${cell(c.engine + (c.postgres ?? 0) + (c.receiver ?? 0))} |`
}
const pct = (sorted: ReadonlyArray<number>, p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!
const fmt = (n: number) => Math.round(n).toLocaleString("en-US")
const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length)
const log = (s: string) => process.stderr.write(`${s}\n`)

const waitUntil = async (check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`)
    await sleep(20)
  }
}

type RemoteReceiver = {
  readonly pid: number
  readonly port: number
  readonly ca: string
  url(path: string, host?: string): string
  count(path: string): Promise<number>
  latency(from: number, path?: string): Promise<Array<number>>
  /** Starts receivers that never answer on these addresses; their ports. */
  hung(hosts: ReadonlyArray<string>): Promise<ReadonlyArray<number>>
  /** The hung receivers answer from now on. */
  recover(): Promise<void>
  /** Distinct delivery ids the hung receivers answered 200 at a path. */
  answered(path: string): Promise<number>
  close(): Promise<void>
}

/** The receiver inside this process (BENCH_RECEIVER=local): it shares the event loop of the engine and of the bare loop. */
const startInProcessReceiver = async (): Promise<RemoteReceiver> => {
  const r = await startLocalReceiver()
  let hung: Awaited<ReturnType<typeof startHungReceivers>> | null = null
  return {
    pid: process.pid,
    port: r.port,
    ca: r.ca,
    url: (path, host = "127.0.0.1") => `https://${host}:${r.port}${path}`,
    count: async (path) => r.count(path),
    latency: async (from, path) => r.latency(from, path),
    hung: async (hosts) => {
      hung = await startHungReceivers(hosts)
      return hung.ports
    },
    recover: async () => hung?.recover(),
    answered: async (path) => hung?.answered(path) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        hung?.close()
        r.server.closeAllConnections()
        r.server.close(() => resolve())
      })
  }
}

/** Starts bench/webhooks-receiver.ts in a child process. */
const startReceiver = async (): Promise<RemoteReceiver> => {
  const child = fork(new URL("./webhooks-receiver.ts", import.meta.url), [], {
    stdio: ["ignore", "inherit", "inherit", "ipc"]
  })
  const ready = await new Promise<{ port: number; ca: string }>((resolve, reject) => {
    child.once("message", (m) => resolve(m as { port: number; ca: string }))
    child.once("exit", (code) => reject(new Error(`receiver exited with ${code}`)))
  })
  let next = 0
  const waiting = new Map<number, (v: unknown) => void>()
  child.on("message", (m: { id?: number; value?: unknown }) => {
    if (m.id !== undefined) waiting.get(m.id)?.(m.value)
    if (m.id !== undefined) waiting.delete(m.id)
  })
  const ask = <A>(cmd: object): Promise<A> =>
    new Promise((resolve) => {
      const id = next++
      waiting.set(id, resolve as (v: unknown) => void)
      child.send({ id, ...cmd })
    })
  return {
    pid: child.pid!,
    port: ready.port,
    ca: ready.ca,
    url: (path, host = "127.0.0.1") => `https://${host}:${ready.port}${path}`,
    count: (path) => ask<number>({ cmd: "count", path }),
    latency: (from, path) => ask<Array<number>>({ cmd: "latency", from, path }),
    hung: (hosts) => ask<ReadonlyArray<number>>({ cmd: "hung", hosts }),
    recover: () => ask<void>({ cmd: "recover" }),
    answered: (path) => ask<number>({ cmd: "answered", path }),
    close: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve())
        child.send({ id: -1, cmd: "close" })
      })
  }
}

/** The baseline: signed POSTs of a real webhook body, `inFlight` at a time, for `ms`. */
const bareLoop = async (receiver: RemoteReceiver, body: string, inFlight: number, ms: number) => {
  const url = new URL(receiver.url("/bare"))
  const pool = new Pool(url.origin, { connections: inFlight, pipelining: 1, connect: { ca: receiver.ca } })
  const secret = newSecret()
  let sent = 0
  let failed = 0
  const deadline = performance.now() + ms
  const started = performance.now()
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        const res = await pool.request({
          path: url.pathname,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "user-agent": USER_AGENT,
            "service-event": "incident.created",
            "service-delivery": String(sent),
            "service-signature": sign(secret, Math.floor(Date.now() / 1000), body)
          },
          body
        })
        await res.body.dump()
        if (res.statusCode >= 200 && res.statusCode < 300) sent++
        else failed++
      }
    })
  )
  const elapsed = performance.now() - started
  await pool.close()
  return { rate: (sent / elapsed) * 1000, sent, failed }
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "srs-bench-"))
  const server = await startEmbedded({ dataDir: dir, port: await freePort(), settings: { max_connections: "100" } })
  const admin = postgres(server.url, { max: 1, onnotice: () => {} })
  await admin.unsafe("create database bench")
  await admin.end()
  const url = server.url.replace(/\/postgres$/, "/bench")
  const sql = connect(url, 10)
  await prepareDemoDatabase(sql)
  // Bench database only: when each outbox row was written, to split capture from delivery.
  await sql`alter table service.events add column bench_inserted_at timestamptz default clock_timestamp()`
  const local = process.env.BENCH_RECEIVER === "local"
  const receiver = local ? await startInProcessReceiver() : await startReceiver()
  const postmaster = Number(readFileSync(join(dir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
  const cap = startCapture({ name: "bench", url, sql })
  const scope = Effect.runSync(Scope.make())
  let latencyEngineStopped = false
  try {
    const company = await makeCompany(sql)
    await cap.settle()
    // The receiver's certificate names, all pointing at it: six origins, one server; the hung
    // company's names each at an address of its own.
    const lookup: Lookup = async (host) => {
      const hung = /^a(\d+)\.hung\.test$/.exec(host)
      return [{ address: hung ? `127.0.0.${2 + Number(hung[1])}` : "127.0.0.1", family: 4 }]
    }
    const deps: WebhookDeps = {
      secretsKey: randomBytes(32),
      allowed: parseAllowedNetworksOrThrow("127.0.0.0/8"),
      ca: receiver.ca,
      lookup
    }
    const engineOptions: EngineOptions = {
      sql,
      secretsKey: deps.secretsKey,
      allowed: deps.allowed,
      ca: deps.ca,
      lookup,
      schedule: parseRetryScheduleOrThrow("15m,1h,4h,12h,1d")
    }
    const [settings] = await sql<{ fsync: string; synchronous_commit: string }[]>`
      select current_setting('fsync') as fsync, current_setting('synchronous_commit') as synchronous_commit`

    // 1. Saturation: a backlog is committed and captured while no engine runs, then an
    // engine drains it. Once to one endpoint (one receiver origin: at most 8 in flight, the
    // per-receiver bound), once to six endpoints on six host names of the same receiver.
    const backlog = async (table: "incidents" | "corrective_actions") => {
      log(`committing ${EVENTS} ${table}...`)
      for (let done = 0; done < EVENTS; done += 1_000) {
        const n = Math.min(1_000, EVENTS - done)
        if (table === "incidents") {
          await sql`
            insert into app.incidents (company_id, reference, type, title, description, occurred_at, severity)
            select ${company.id}, 'INC-' || g, 'injury', 'Slipped on wet floor ' || g, 'Worker slipped near the loading bay',
              now() - (g || ' minutes')::interval, 'minor'
            from generate_series(${done + 1}::int, ${done + n}::int) g`
        } else {
          await sql`
            insert into app.corrective_actions (company_id, title, source, status, priority, owner)
            select ${company.id}, 'Fix the railing ' || g, 'manual', 'open', 'high', 'Sam'
            from generate_series(${done + 1}::int, ${done + n}::int) g`
        }
      }
      await cap.settle(120_000)
    }
    // BENCH_PROFILE=<file>: a CPU profile of this process while the engine drains (Chrome
    // DevTools format), to see where a delivery's time goes.
    const profiler = process.env.BENCH_PROFILE ? new Session() : null
    const drain = async (paths: ReadonlyArray<string>, expected: number) => {
      if (profiler) {
        profiler.connect()
        await profiler.post("Profiler.enable")
        await profiler.post("Profiler.start")
      }
      const cpu0 = process.cpuUsage()
      const pg0 = cpuOf(postmaster, true)
      const titles0 = cpuByTitle(postmaster)
      const rc0 = cpuOf(receiver.pid, false)
      const engineScope = Effect.runSync(Scope.make())
      const arrived = async () => (await Promise.all(paths.map((p) => receiver.count(p)))).reduce((a, b) => a + b, 0)
      const before = await arrived()
      const t0 = performance.now()
      const engine = await Effect.runPromise(Scope.provide(engineScope)(makeEngine(engineOptions)))
      await waitUntil(async () => (await arrived()) - before >= expected, 600_000, "the backlog")
      const ms = performance.now() - t0
      const cpu = process.cpuUsage(cpu0)
      if (process.env.BENCH_CPU) log(`  engine: ${JSON.stringify(await Effect.runPromise(engine.stats))}`)
      const perUs = (cpuMs: number) => (cpuMs * 1000) / expected
      const cpuUs = {
        engine: perUs((cpu.user + cpu.system) / 1000),
        postgres: perUs(cpuOf(postmaster, true) - pg0),
        receiver: local ? null : perUs(cpuOf(receiver.pid, false) - rc0)
      }
      if (process.env.BENCH_CPU) {
        const perDelivery = (cpuMs: number) => ((cpuMs * 1000) / expected).toFixed(0)
        const engineName = local ? "engine and receiver" : "engine"
        const receiverMs = local ? "" : `, receiver ${cpuOf(receiver.pid, false) - rc0} ms`
        log(
          `  cpu: ${engineName} ${Math.round((cpu.user + cpu.system) / 1000)} ms, postgres ${cpuOf(postmaster, true) - pg0} ms${receiverMs}, wall ${Math.round(ms)} ms`
        )
        const receiverUs = local ? "" : `, receiver ${perDelivery(cpuOf(receiver.pid, false) - rc0)} µs`
        log(
          `  cpu per delivery: ${engineName} ${perDelivery((cpu.user + cpu.system) / 1000)} µs, postgres ${perDelivery(cpuOf(postmaster, true) - pg0)} µs${receiverUs}`
        )
        const parts = [...cpuByTitle(postmaster)]
          .map(([k, v]) => [k, v - (titles0.get(k) ?? 0)] as const)
          .filter(([, v]) => v > 0)
        log(`  postgres by process: ${parts.map(([k, v]) => `${k} ${v} ms`).join(", ")}`)
      }
      if (profiler) {
        const { profile } = await profiler.post("Profiler.stop")
        writeFileSync(process.env.BENCH_PROFILE!, JSON.stringify(profile))
        profiler.disconnect()
      }
      await Effect.runPromise(Scope.close(engineScope, Exit.void))
      return { rate: (expected / ms) * 1000, ms, cpuUs }
    }

    /** Like drain, with `n` engine processes (bench/webhooks-engine.ts) started together. */
    const drainByProcesses = async (
      n: number,
      paths: ReadonlyArray<string>,
      expected: number,
      secretsKey: Uint8Array
    ) => {
      const children = await Promise.all(
        Array.from({ length: n }, async () => {
          const child = fork(new URL("./webhooks-engine.ts", import.meta.url), [], {
            stdio: ["ignore", "inherit", "inherit", "ipc"]
          })
          await new Promise<void>((resolve, reject) => {
            child.once("message", () => resolve())
            child.once("exit", (code) => reject(new Error(`engine process exited with ${code}`)))
          })
          return child
        })
      )
      const pg0 = cpuOf(postmaster, true)
      const rc0 = cpuOf(receiver.pid, false)
      const engines0 = children.map((c) => cpuOf(c.pid!, false))
      const arrived = async () => (await Promise.all(paths.map((p) => receiver.count(p)))).reduce((a, b) => a + b, 0)
      const before = await arrived()
      const t0 = performance.now()
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.once("message", () => resolve())
              c.send({ cmd: "start", url, secretsKey: Buffer.from(secretsKey).toString("base64"), ca: receiver.ca })
            })
        )
      )
      await waitUntil(async () => (await arrived()) - before >= expected, 600_000, "the backlog")
      const ms = performance.now() - t0
      const engineMs = children.map((c, i) => cpuOf(c.pid!, false) - engines0[i]!)
      const perUs = (cpuMs: number) => (cpuMs * 1000) / expected
      const cpuUs = {
        engine: perUs(engineMs.reduce((a, b) => a + b, 0)),
        postgres: perUs(cpuOf(postmaster, true) - pg0),
        receiver: perUs(cpuOf(receiver.pid, false) - rc0)
      }
      if (process.env.BENCH_CPU) {
        const perDelivery = (cpuMs: number) => ((cpuMs * 1000) / expected).toFixed(0)
        const all = engineMs.reduce((a, b) => a + b, 0)
        log(
          `  cpu: engines ${engineMs.join(" + ")} ms, postgres ${cpuOf(postmaster, true) - pg0} ms, receiver ${cpuOf(receiver.pid, false) - rc0} ms, wall ${Math.round(ms)} ms`
        )
        log(
          `  cpu per delivery: engines ${perDelivery(all)} µs, postgres ${perDelivery(cpuOf(postmaster, true) - pg0)} µs, receiver ${perDelivery(cpuOf(receiver.pid, false) - rc0)} µs`
        )
      }
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((resolve) => {
              c.once("exit", () => resolve())
              c.send({ cmd: "stop" })
            })
        )
      )
      return { rate: (expected / ms) * 1000, ms, engineMs, cpuUs }
    }

    const noCpu: CpuUs = { engine: 0, postgres: null, receiver: null }
    const skipped = { rate: 0, ms: 0, cpuUs: noCpu, sent: 0, failed: 0 }
    let bare = skipped
    let bareCpuUs: CpuUs = noCpu
    let single = skipped
    let many = skipped
    const manyRuns: Array<typeof skipped> = []
    const filteredRuns: Array<typeof skipped> = []
    let shared = skipped
    if (SATURATION) {
      const one = await runSql(
        sql,
        createEndpoint(
          deps,
          { kind: "system" },
          { companyId: company.id, name: "one", url: receiver.url("/one"), events: ["incident.created"] }
        )
      )
      await backlog("incidents")
      const [sample] = await sql<
        { payload: string; created_at: Date }[]
      >`select ${sql.unsafe(eventPayload("e"))} as payload, e.created_at from service.events e limit 1`
      if (!sample?.payload) throw new Error("no event payload to post in the bare loop")
      console.log(`bare loop body: an incident of ${sample.payload.length} characters`)
      const body = `{"id":"00000000-0000-4000-8000-000000000000","event":"incident.created","createdAt":"${sample!.created_at.toISOString()}","data":${sample!.payload}}`

      // 3. The baseline, run while the database is idle, on the same receiver.
      log(`bare undici loop, ${INFLIGHT} in flight...`)
      const bareCpu0 = process.cpuUsage()
      const bareRc0 = cpuOf(receiver.pid, false)
      bare = { ...(await bareLoop(receiver, body, INFLIGHT, 5_000)), ms: 0, cpuUs: noCpu }
      const bareCpu = process.cpuUsage(bareCpu0)
      bareCpuUs = {
        engine: (bareCpu.user + bareCpu.system) / bare.sent,
        postgres: null,
        receiver: local ? null : ((cpuOf(receiver.pid, false) - bareRc0) * 1000) / bare.sent
      }
      if (process.env.BENCH_CPU) {
        const receiverUs = bareCpuUs.receiver === null ? "" : `, receiver ${bareCpuUs.receiver.toFixed(0)} µs`
        log(
          `  cpu per delivery: ${local ? "loop and receiver" : "loop"} ${bareCpuUs.engine.toFixed(0)} µs${receiverUs}`
        )
      }

      log("engine draining the backlog to one endpoint...")
      single = { ...(await drain(["/one"], EVENTS)), sent: 0, failed: 0 }
      await sql`update service.webhook_endpoints set enabled = false where id = ${one.id}`

      const paths = NAMES.map((_, i) => `/many${i}`)
      for (const [i, name] of NAMES.entries()) {
        await runSql(
          sql,
          createEndpoint(
            deps,
            { kind: "system" },
            { companyId: company.id, name, url: receiver.url(paths[i]!, name), events: ["corrective_action.created"] }
          )
        )
      }
      // The same six origins, each endpoint with a content filter that every action passes (so
      // the deliveries are the same in number): what evaluating filters costs. Off while the
      // unfiltered ones drain, and the other way round; the two alternate BENCH_FILTER_ROUNDS
      // times, so that a machine's changing load weighs on both alike.
      const filteredPaths = NAMES.map((_, i) => `/filtered${i}`)
      const filteredNames = NAMES.map((name) => `filtered ${name}`)
      for (const [i, name] of NAMES.entries()) {
        const made = await runSql(
          sql,
          createEndpoint(
            deps,
            { kind: "system" },
            {
              companyId: company.id,
              name: filteredNames[i]!,
              url: receiver.url(filteredPaths[i]!, name),
              events: ["corrective_action.created"],
              filter: { priority: { $in: ["high", "critical"] }, status: { $ne: "verified" }, title: { $exists: true } }
            }
          )
        )
        await sql`update service.webhook_endpoints set enabled = false where id = ${made.id}`
      }
      const drainSix = async (names: ReadonlyArray<string>, to: ReadonlyArray<string>, what: string) => {
        await sql`update service.webhook_endpoints set enabled = (name = any(${names}))`
        await backlog("corrective_actions")
        log(`engine draining the backlog to ${NAMES.length} endpoints${what}...`)
        const r = { ...(await drain(to, EVENTS * NAMES.length)), sent: 0, failed: 0 }
        await sql`update service.webhook_endpoints set enabled = false`
        return r
      }
      for (let round = 0; round < FILTER_ROUNDS; round++) {
        manyRuns.push(await drainSix(NAMES, paths, ""))
        filteredRuns.push(await drainSix(filteredNames, filteredPaths, " with a filter on each"))
      }
      many = manyRuns[0]!

      // Two engine processes share the next backlog: each fans out and sends the events of its
      // partitions of the outbox. The endpoints are off while it is committed (no engine runs,
      // so nothing is fanned out yet), then on.
      await backlog("corrective_actions")
      await sql`update service.webhook_endpoints set enabled = true where name = any(${NAMES})`
      log(`two engine processes draining the backlog to ${NAMES.length} endpoints...`)
      shared = { ...(await drainByProcesses(2, paths, EVENTS * NAMES.length, deps.secretsKey)), sent: 0, failed: 0 }
      await sql`update service.webhook_endpoints set enabled = false`
    }

    await Effect.runPromise(Scope.provide(scope)(makeEngine(engineOptions)))

    /** Commits `perSecond` incidents a second for `seconds` (one per transaction, at its time); the number started late. */
    const commitAtRate = async (
      streams: ReadonlyArray<{ companyId: string; prefix: string; perSecond: number }>,
      seconds: number
    ) => {
      const plan: Array<{ at: number; companyId: string; reference: string }> = []
      for (const st of streams) {
        for (let i = 0; i < st.perSecond * seconds; i++)
          plan.push({ at: (i * 1000) / st.perSecond, companyId: st.companyId, reference: `${st.prefix}-${i}` })
      }
      plan.sort((a, b) => a.at - b.at)
      const start = performance.now() + 50
      const inserts: Array<Promise<unknown>> = []
      let late = 0
      for (const p of plan) {
        const wait = start + p.at - performance.now()
        if (wait > 1) await sleep(wait)
        else if (wait < -5) late++
        // postgres.js queries are lazy: execute() sends it now, at its scheduled time.
        inserts.push(
          sql`insert into app.incidents (company_id, reference, type, title, description, occurred_at, severity)
            values (${p.companyId}, ${p.reference}, 'injury', 'Latency probe', 'Probe', now(), 'minor')`.execute()
        )
      }
      await Promise.all(inserts)
      return late
    }

    // 2. Latency: one incident per transaction at a fixed rate, commit time (the event's
    // created_at, PostgreSQL's commit timestamp) to the receiver's arrival time.
    await runSql(
      sql,
      createEndpoint(
        deps,
        { kind: "system" },
        { companyId: company.id, name: "latency", url: receiver.url("/lat"), events: ["incident.created"] }
      )
    )
    log(`committing ${RATE} incidents/s for ${SECONDS} s (after 2 s warm-up)...`)
    const total = RATE * (SECONDS + 2)
    const warm = RATE * 2
    const late = await commitAtRate([{ companyId: company.id, prefix: "LAT", perSecond: RATE }], SECONDS + 2)
    await waitUntil(async () => (await receiver.count("/lat")) >= total, 60_000, "the latency events")
    const lat = (await receiver.latency(warm)).sort((a, b) => a - b)

    // Where the time goes: commit -> outbox row (capture) -> first attempt (fan-out: the first
    // attempt goes straight from it; its row is written after the answer).
    const [split] = await sql<{ cap50: number; cap99: number; fan50: number; fan99: number }[]>`
      select percentile_disc(0.5) within group (order by cap) as cap50, percentile_disc(0.99) within group (order by cap) as cap99,
        percentile_disc(0.5) within group (order by f) as fan50, percentile_disc(0.99) within group (order by f) as fan99
      from (
        select extract(epoch from e.bench_inserted_at - e.created_at) * 1000 as cap,
          extract(epoch from a.started_at - e.bench_inserted_at) * 1000 as f
        from service.webhook_deliveries d join service.events e on e.id = d.event_id
        join service.webhook_attempts a on a.delivery_id = d.id and a.number = 1
        join service.webhook_endpoints w on w.id = d.endpoint_id and w.name = 'latency'
        where substring(${sql.unsafe(eventPayload("e"))}::json->>'reference' from 5)::int >= ${warm}
      ) x`
    await sql`update service.webhook_endpoints set enabled = false`
    await Effect.runPromise(Scope.close(scope, Exit.void))
    latencyEngineStopped = true

    // 4. Isolation: company A's 12 endpoints, each on a loopback address of its own, take
    // requests and never answer (the engine gives up on each after its 10 s timeout) while A
    // commits 20 incidents a second; company B's one healthy endpoint gets 5 a second. B
    // alone first (the baseline), then both; then A's receivers recover and every delivery
    // of both must arrive, A's by its retry schedule (shortened here to 5s,10s,20s,40s,80s).
    const iso = ISOLATION
      ? await (async () => {
          const companyA = await makeCompany(sql)
          await cap.settle()
          const ports = await receiver.hung(Array.from({ length: HUNG }, (_, i) => `127.0.0.${2 + i}`))
          for (let i = 0; i < HUNG; i++) {
            await runSql(
              sql,
              createEndpoint(
                deps,
                { kind: "system" },
                {
                  companyId: companyA.id,
                  name: `hung ${i}`,
                  url: `https://${hungHost(i)}:${ports[i]}/a${i}`,
                  events: ["incident.created"]
                }
              )
            )
          }
          await sql`update service.webhook_endpoints set enabled = false where company_id = ${companyA.id}`
          await runSql(
            sql,
            createEndpoint(
              deps,
              { kind: "system" },
              { companyId: company.id, name: "isolated", url: receiver.url("/lat-iso"), events: ["incident.created"] }
            )
          )
          const isoScope = Effect.runSync(Scope.make())
          await Effect.runPromise(
            Scope.provide(isoScope)(
              makeEngine({ ...engineOptions, schedule: parseRetryScheduleOrThrow("5s,10s,20s,40s,80s") })
            )
          )
          try {
            log("company B alone: 5 incidents/s for 10 s...")
            await commitAtRate([{ companyId: company.id, prefix: "ISA", perSecond: 5 }], 10)
            await waitUntil(async () => (await receiver.count("/lat-iso")) >= 50, 60_000, "B alone")
            const alone = (await receiver.latency(0, "/lat-iso")).sort((a, b) => a - b)
            await sql`update service.webhook_endpoints set enabled = true where company_id = ${companyA.id}`
            await sleep(500)
            log(
              `company A (${HUNG} endpoints that never answer) 20 incidents/s and company B 5/s, for ${ISO_SECONDS} s...`
            )
            const cpu0 = process.cpuUsage()
            const pg0 = cpuOf(postmaster, true)
            const t0 = performance.now()
            const isoLate = await commitAtRate(
              [
                { companyId: companyA.id, prefix: "HNG", perSecond: 20 },
                { companyId: company.id, prefix: "ISB", perSecond: 5 }
              ],
              ISO_SECONDS
            )
            const loadMs = performance.now() - t0
            const bTotal = 5 * ISO_SECONDS
            const bInWindow = (await receiver.latency(0, "/lat-iso")).length - 50
            await receiver.recover()
            log("company A's receivers recovered; waiting for every delivery...")
            const aTotal = 20 * ISO_SECONDS * HUNG
            const aArrived = async () => {
              let n = 0
              for (let i = 0; i < HUNG; i++) n += await receiver.answered(`/a${i}`)
              return n
            }
            let aDone = 0
            let bDone = 0
            const waitStarted = performance.now()
            try {
              await waitUntil(
                async () => {
                  aDone = await aArrived()
                  bDone = (await receiver.count("/lat-iso")) - 50
                  return aDone >= aTotal && bDone >= bTotal
                },
                900_000,
                "every delivery of the isolation row"
              )
            } catch {
              log(`  not all arrived within 15 minutes: A ${aDone} of ${aTotal}, B ${bDone} of ${bTotal}`)
            }
            const afterMs = performance.now() - waitStarted
            const cpu = process.cpuUsage(cpu0)
            const all = (await receiver.latency(0, "/lat-iso")).slice(50)
            const both = [...all].sort((a, b) => a - b)
            const [states] = await sql<{ failed: number; attempts: number; circuit: number }[]>`
              select count(*) filter (where d.state = 'failed')::int as failed, coalesce(sum(d.attempts), 0)::int as attempts,
                (select count(*)::int from service.webhook_attempts a join service.webhook_deliveries d2 on d2.id = a.delivery_id
                  where d2.company_id = ${companyA.id} and a.error_kind = 'circuit') as circuit
              from service.webhook_deliveries d where d.company_id = ${companyA.id}`
            return {
              alone,
              both,
              bInWindow,
              bTotal,
              aTotal,
              aDone,
              bDone,
              afterMs,
              loadMs,
              late: isoLate,
              states: states!,
              cpuUs: {
                engine: ((cpu.user + cpu.system) / (aDone + bDone)) * 1,
                postgres: ((cpuOf(postmaster, true) - pg0) * 1000) / (aDone + bDone),
                receiver: null
              } satisfies CpuUs
            }
          } finally {
            await Effect.runPromise(Scope.close(isoScope, Exit.void))
          }
        })()
      : null

    const isoLines = iso
      ? [
          "",
          `Isolation: company A's ${HUNG} endpoints on ${HUNG} addresses take requests and never answer (10 s timeout) while A commits 20 incidents/s for ${ISO_SECONDS} s; company B's healthy endpoint gets 5/s:`,
          "",
          "| Measure | Value |",
          "|---|---|",
          `| B alone, commit to receipt p50 / p99 / max | ${pct(iso.alone, 50)} / ${pct(iso.alone, 99)} / ${iso.alone.at(-1)} ms (${iso.alone.length} deliveries) |`,
          `| B beside A, commit to receipt p50 / p99 / max | ${iso.both.length ? `${pct(iso.both, 50)} / ${pct(iso.both, 99)} / ${iso.both.at(-1)} ms` : "-"} (${iso.bDone} of ${iso.bTotal} deliveries) |`,
          `| B's deliveries received while A's receivers hung | ${iso.bInWindow} of ${iso.bTotal} |`,
          `| every delivery of both arrived (A's ${iso.aTotal} by the retry schedule 5s,10s,20s,40s,80s) | ${iso.aDone >= iso.aTotal && iso.bDone >= iso.bTotal ? "yes" : `no: A ${iso.aDone}, B ${iso.bDone}`}, ${fmt(iso.afterMs / 1000)} s after A's receivers recovered |`,
          `| A: attempts recorded / of them not sent (circuit open) / deliveries failed for good | ${fmt(iso.states.attempts)} / ${fmt(iso.states.circuit)} / ${fmt(iso.states.failed)} |`,
          `| CPU per delivery arrived: engine / PostgreSQL | ${fmt(iso.cpuUs.engine)} / ${fmt(iso.cpuUs.postgres ?? 0)} µs |`,
          `| commits started late | ${iso.late} |`,
          ""
        ]
      : []
    const lines = [
      "",
      `Webhook delivery benchmark (one loopback HTTPS receiver ${local ? "inside this process, sharing its event loop with the engine and the bare loop" : "in its own process"}; PostgreSQL fsync=${settings!.fsync}, synchronous_commit=${settings!.synchronous_commit}; ${cpus().length} CPUs)`,
      "",
      "| Measure | Engine | Bare undici loop |",
      "|---|---|---|",
      ...(SATURATION
        ? [
            `| deliveries/s at saturation, 1 endpoint (8 in flight) | ${fmt(single.rate)} (${fmt(EVENTS)} in ${fmt(single.ms)} ms) | ${fmt(bare.rate)} (${INFLIGHT} in flight, ${bare.failed} failed) |`,
            `| deliveries/s at saturation, ${NAMES.length} endpoints (${NAMES.length * 8} in flight) | ${fmt(many.rate)} (${fmt(EVENTS * NAMES.length)} in ${fmt(many.ms)} ms) | |`,
            `| ratio to bare (${NAMES.length} endpoints) | ${(many.rate / bare.rate).toFixed(2)} | 1 |`,
            `| deliveries/s at saturation, ${NAMES.length} endpoints, without / with a content filter on each, alternating | ${manyRuns.map((r) => fmt(r.rate)).join(", ")} / ${filteredRuns.map((r) => fmt(r.rate)).join(", ")} (with / without: ${((mean(filteredRuns.map((r) => r.rate)) / mean(manyRuns.map((r) => r.rate))) * 100).toFixed(0)}%) | |`,
            `| deliveries/s at saturation, ${NAMES.length} endpoints, two engine processes sharing the work | ${fmt(shared.rate)} (${fmt(EVENTS * NAMES.length)} in ${fmt(shared.ms)} ms; ratio to bare ${(shared.rate / bare.rate).toFixed(2)}) | |`
          ]
        : []),
      `| commit to receipt at ${RATE} events/s, p50 | ${lat.length ? pct(lat, 50) : "-"} ms | |`,
      `| commit to receipt at ${RATE} events/s, p99 | ${lat.length ? pct(lat, 99) : "-"} ms | |`,
      `| of which commit to outbox row (capture), p50 / p99 | ${Math.round(split!.cap50)} / ${Math.round(split!.cap99)} ms | |`,
      `| of which outbox row to first attempt (fan-out), p50 / p99 | ${Math.round(split!.fan50)} / ${Math.round(split!.fan99)} ms | |`,
      `| commit to receipt, max | ${lat.length ? lat.at(-1) : "-"} ms (${lat.length} events measured${late ? `, ${late} commits started late` : ""}) | |`,
      ...isoLines,
      ...(SATURATION
        ? [
            "",
            `CPU per delivery at saturation, by process kind (µs; ${cpus().length} CPUs shared by all of them):`,
            "",
            `| | ${local ? "engine and receiver" : "engine (Node)"} | PostgreSQL | receiver | in all |`,
            "|---|---:|---:|---:|---:|",
            cpuRow("engine, 1 endpoint", single.cpuUs),
            ...filteredRuns.flatMap((r, i) => [
              cpuRow(`engine, ${NAMES.length} endpoints, round ${i + 1}`, manyRuns[i]!.cpuUs),
              cpuRow(`engine, ${NAMES.length} endpoints, a filter on each, round ${i + 1}`, r.cpuUs)
            ]),
            cpuRow(`two engine processes, ${NAMES.length} endpoints`, shared.cpuUs),
            cpuRow("bare undici loop", bareCpuUs)
          ]
        : []),
      ""
    ]
    process.stdout.write(lines.join("\n"))
  } finally {
    if (!latencyEngineStopped) await Effect.runPromise(Scope.close(scope, Exit.void))
    await closeSenderConnections()
    await cap.stop()
    await receiver.close()
    await sql.end({ timeout: 5 })
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
