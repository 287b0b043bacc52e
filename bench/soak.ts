// bench:soak: the service as an operator runs it, under a steady load, for a set time.
//   - the service as `npm start` runs it (package.json's start script: node, its options,
//     src/main.ts) on its embedded PostgreSQL under a throwaway DATA_DIR, the demo seeded
//     first (`node src/faces/cli/seed.ts`), keys and a webhook endpoint made with the admin CLI;
//   - `node src/faces/cli/simulate.ts --rate R --duration D --json` playing the app;
//   - API reads at a fixed rate, spread over several keys (each stays under its 120/min);
//   - one endpoint on every event, to an HTTPS receiver on loopback (in this process).
// Every 30 s it prints the service's RSS (/proc/<pid>/status), V8 heap used and total and
// external memory (/metrics), the outbox, deliveries received, API reads and errors, and
// capture's lag, and at the end the service's CPU time.
// At the end it compares the outbox with the events simulate's transactions must fire (its
// --json totals) and the deliveries received with those events, and exits 1, loudly, when
// an event or a delivery is missing or doubled, an API read failed or the service died.
//
//   npm run bench:soak [-- --duration 10m] [--rate 100] [--reads 28] [--sample 30s]
//                      [--heap-snapshots DIR]   (two heap snapshots of the service, at half
//                      time and near the end, written to DIR by --heapsnapshot-signal)
// Loopback only; bounded: setup, the run, then at most 3 minutes to drain.
// SOAK_START="node [options] src/main.ts" runs the service another way (e.g. other V8 settings);
// SOAK_NODE_OPTIONS adds NODE_OPTIONS for the service alone; SOAK_SERVICE_LOG keeps its output.
import { spawn, type ChildProcess } from "node:child_process"
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:https"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import postgres from "postgres"
import { Pool } from "undici"
import { Effect } from "effect"
import { captureStatus } from "../src/pipeline/capture/status.ts"
import { appSqlLayer, Sql } from "../src/platform/db/Sql.ts"
import { databaseUrl, EMBEDDED_SERVICE_DATABASE } from "../src/platform/db/Database.ts"
import { embeddedUrl } from "../src/platform/db/embedded.ts"
import { EVENT_KINDS, type EventKind } from "../src/domain/event-kinds.ts"
import { RESOURCES } from "../src/domain/resources.ts"
import { parseShortDuration } from "../src/domain/time.ts"
import { DEMO_HOST } from "../src/seed/demo.ts"
import type { SimulationResult } from "../src/seed/simulate.ts"
import { testCerts } from "../test/support/https-receiver.ts"
import { freePort } from "../test/support/net.ts"
import { startCommand } from "./support.ts"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const ADMIN_EMAIL = "admin@acme.example"
const KEY_LIMIT_PER_MINUTE = 120 // the service's default API_RATE_LIMIT (docs/api.md#rate-limit)
const MAX_KEYS = 20 // a company's active keys, at most (src/access/keys/store.ts)
const DRAIN_MS = 180_000
const MB = 1024 * 1024

const USAGE = `Usage: npm run bench:soak -- [--duration 10m] [--rate 100] [--reads 28] [--sample 30s] [--heap-snapshots DIR]`

// -----------------------------------------------------------------------------
// Arguments

const durationMs = (name: string, text: string): number => {
  const ms = parseShortDuration(text)
  if (ms === undefined) throw new Error(`--${name} must look like 500ms, 30s, 5m or 1h, not "${text}"`)
  return ms
}

const args = (() => {
  try {
    const { values } = parseArgs({
      options: {
        duration: { type: "string", default: "10m" },
        rate: { type: "string", default: "100" },
        reads: { type: "string", default: "28" },
        sample: { type: "string", default: "30s" },
        "heap-snapshots": { type: "string" },
        help: { type: "boolean", short: "h" }
      },
      strict: true
    })
    if (values.help) {
      process.stdout.write(`${USAGE}\n`)
      process.exit(0)
    }
    const rate = Number(values.rate)
    const reads = Number(values.reads)
    if (!(rate > 0) || !Number.isFinite(rate)) throw new Error(`--rate must be a number above 0, not "${values.rate}"`)
    if (!(reads >= 0) || !Number.isFinite(reads))
      throw new Error(`--reads must be a number, 0 or more, not "${values.reads}"`)
    const duration = durationMs("duration", values.duration)
    const sample = durationMs("sample", values.sample)
    if (duration < 10_000) throw new Error("--duration must be at least 10s")
    if (sample < 1000) throw new Error("--sample must be at least 1s")
    return { duration, durationText: values.duration, rate, reads, sample, snapshots: values["heap-snapshots"] }
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n${USAGE}\n`)
    process.exit(2)
  }
})()

// -----------------------------------------------------------------------------
// Small helpers

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const log = (s: string) => process.stderr.write(`${s}\n`)
const mb = (bytes: number | undefined) => (bytes === undefined || Number.isNaN(bytes) ? "-" : (bytes / MB).toFixed(1))
const fmt = (n: number) => Math.round(n).toLocaleString("en-US")

/** VmRSS and VmHWM (peak) of a process, in bytes (Linux /proc). */
const procMemory = (pid: number): { rss: number; peak: number } | undefined => {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8")
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN) * 1024
    return { rss: kb("VmRSS"), peak: kb("VmHWM") }
  } catch {
    return undefined
  }
}

/** CPU seconds (user + system) a process has used so far (Linux /proc). */
const procCpuSeconds = (pid: number): number => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(f[11]) + Number(f[12])) / 100
  } catch {
    return NaN
  }
}

/** Unlabelled samples of a Prometheus text page. */
const parseMetrics = (text: string): Map<string, number> => {
  const out = new Map<string, number>()
  for (const line of text.split("\n")) {
    const m = /^([a-z_]+)\s+(\S+)$/.exec(line)
    if (m) out.set(m[1]!, Number(m[2]))
  }
  return out
}

/** Every child process this bench starts, so that a stop (or the watchdog) ends them all. */
const children = new Set<ChildProcess>()

/** Runs a command to its end; its stdout, or an error with its stderr (exit codes in `ok` pass). */
const run = (
  file: string,
  argv: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv,
  timeoutMs = 120_000,
  ok: ReadonlyArray<number> = [0]
) =>
  new Promise<string>((resolvePromise, reject) => {
    const child = spawn(process.execPath, [file, ...argv], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
    children.add(child)
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs)
    child.once("exit", (code, signal) => {
      children.delete(child)
      clearTimeout(timer)
      if (code !== null && ok.includes(code)) resolvePromise(out)
      else reject(new Error(`${file} ${argv.join(" ")} exited with ${code ?? signal}:\n${err.slice(-2000)}`))
    })
  })

const waitUntil = async (check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(250)
  }
}

// -----------------------------------------------------------------------------
// The receiver: counts deliveries by their id (Service-Delivery) and by event

const startReceiver = (cert: string, key: string) => {
  const byDelivery = new Map<string, number>()
  const byKind = new Map<string, number>()
  let requests = 0
  let lastAt = 0
  const server = createServer({ cert, key }, (req: IncomingMessage, res: ServerResponse) => {
    req.resume()
    req.on("end", () => {
      requests++
      lastAt = Date.now()
      const id = String(req.headers["service-delivery"] ?? "")
      const kind = String(req.headers["service-event"] ?? "")
      const seen = byDelivery.get(id) ?? 0
      byDelivery.set(id, seen + 1)
      if (seen === 0) byKind.set(kind, (byKind.get(kind) ?? 0) + 1)
      res.writeHead(200, { "content-type": "text/plain" })
      res.end("ok")
    })
  })
  return new Promise<{
    port: number
    requests: () => number
    distinct: () => number
    repeated: () => number
    byKind: () => ReadonlyMap<string, number>
    lastAt: () => number
    close: () => Promise<void>
  }>((ok) =>
    server.listen(0, "127.0.0.1", () =>
      ok({
        port: (server.address() as { port: number }).port,
        requests: () => requests,
        distinct: () => byDelivery.size,
        repeated: () => requests - byDelivery.size,
        byKind: () => byKind,
        lastAt: () => lastAt,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    )
  )
}

// -----------------------------------------------------------------------------
// API reads at a fixed rate: lists of every resource (and their next page), records by id,
// the events feed; round robin over the keys.

const startReader = (port: number, keys: ReadonlyArray<string>, perSecond: number) => {
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 16 })
  const stats = {
    ok: 0,
    errors: 0,
    limited: 0,
    late: 0,
    byStatus: new Map<string, number>(),
    firstErrors: [] as Array<string>
  }
  const ids = new Map<string, Array<string>>()
  const cursors: Array<string> = []
  let inFlight = 0
  let i = 0
  let stopped = false
  const pick = <A>(xs: ReadonlyArray<A>) => xs[Math.floor(Math.random() * xs.length)]!

  const path = (): string => {
    const r = Math.random()
    const resource = pick(RESOURCES)
    if (r < 0.4) return `/api/v1/${resource}?limit=50`
    if (r < 0.55 && cursors.length > 0) return cursors.splice(Math.floor(Math.random() * cursors.length), 1)[0]!
    if (r < 0.85 && (ids.get(resource)?.length ?? 0) > 0) return `/api/v1/${resource}/${pick(ids.get(resource)!)}`
    return `/api/v1/events?limit=50`
  }

  const one = async () => {
    const key = keys[i++ % keys.length]!
    const p = path()
    inFlight++
    try {
      const res = await pool.request({
        path: p,
        method: "GET",
        headers: { authorization: `Bearer ${key}`, host: DEMO_HOST },
        headersTimeout: 30_000,
        bodyTimeout: 30_000
      })
      const text = await res.body.text()
      if (res.statusCode === 200) {
        stats.ok++
        const m = /^\/api\/v1\/([a-z-]+)\?limit=50$/.exec(p)
        if (m) {
          const body = JSON.parse(text) as { data: Array<{ id: string }>; nextCursor: string | null }
          if (m[1] !== "events")
            ids.set(
              m[1]!,
              body.data.slice(0, 20).map((d) => d.id)
            )
          if (body.nextCursor !== null && cursors.length < 100)
            cursors.push(`${p}&cursor=${encodeURIComponent(body.nextCursor)}`)
        }
      } else {
        stats.errors++
        if (res.statusCode === 429) stats.limited++
        stats.byStatus.set(String(res.statusCode), (stats.byStatus.get(String(res.statusCode)) ?? 0) + 1)
        if (stats.firstErrors.length < 5) stats.firstErrors.push(`${res.statusCode} GET ${p}: ${text.slice(0, 200)}`)
      }
    } catch (e) {
      stats.errors++
      stats.byStatus.set("network", (stats.byStatus.get("network") ?? 0) + 1)
      if (stats.firstErrors.length < 5)
        stats.firstErrors.push(`GET ${p}: ${e instanceof Error ? e.message : String(e)}`)
    } finally {
      inFlight--
    }
  }

  const done = (async () => {
    if (perSecond <= 0 || keys.length === 0) return
    const interval = 1000 / perSecond
    const start = performance.now()
    for (let n = 0; !stopped; n++) {
      const wait = start + n * interval - performance.now()
      if (wait > 0) await sleep(wait)
      if (stopped) break
      // A slow service must not make the bench pile up requests without bound.
      if (inFlight >= 64) stats.late++
      else void one()
    }
    await waitUntil(() => inFlight === 0, 60_000, "the API reads in flight")
  })()

  return {
    stats,
    stop: async () => {
      stopped = true
      await done
      await pool.close()
    }
  }
}

// -----------------------------------------------------------------------------

type Sample = {
  readonly t: number
  readonly rss: number
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly events: number
  readonly delivered: number
  readonly reads: number
  readonly errors: number
  readonly lagBytes: number
}

/** Least-squares slope of y over x. */
const slope = (xs: ReadonlyArray<number>, ys: ReadonlyArray<number>) => {
  const n = xs.length
  const mx = xs.reduce((a, b) => a + b, 0) / n
  const my = ys.reduce((a, b) => a + b, 0) / n
  let num = 0
  let den = 0
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my)
    den += (xs[i]! - mx) ** 2
  }
  return den === 0 ? 0 : num / den
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "srs-soak-"))
  chmodSync(dir, 0o755) // the embedded server runs as "postgres" when started as root
  const dataDir = join(dir, "data")
  // SOAK_SERVICE_LOG: keep the service's output there (else it goes with the run's directory).
  const logFile = process.env.SOAK_SERVICE_LOG ?? join(dir, "service.log")
  let service: ChildProcess | undefined
  // The embedded server's two databases: the demo app's (`sql`) and the service's own (`own`).
  let sql: postgres.Sql | undefined
  let own: postgres.Sql | undefined
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined
  const failures: Array<string> = []
  /** Asks the embedded server, if it still runs, to stop (fast shutdown); true if it was asked. */
  const stopPostgres = (): boolean => {
    try {
      const pgPid = Number(readFileSync(join(dataDir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
      if (!(pgPid > 0)) return false
      process.kill(pgPid, "SIGINT")
      return true
    } catch {
      return false // stopped already
    }
  }
  // Bounded: the run, plus setup and draining; past that, everything is stopped.
  const watchdog = setTimeout(
    () => {
      log(`\nbench:soak: over its time bound; stopping.`)
      for (const c of children) c.kill("SIGKILL")
      stopPostgres()
      process.exit(1)
    },
    args.duration + DRAIN_MS + 10 * 60_000
  )
  watchdog.unref()

  try {
    const { trusted } = testCerts()
    const caFile = join(dir, "receiver-ca.pem")
    writeFileSync(caFile, trusted.caCert)
    receiver = await startReceiver(trusted.cert, trusted.key)
    const httpPort = await freePort()
    const opsPort = await freePort()
    const pgPort = await freePort()
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATA_DIR: dataDir,
      EMBEDDED_PG_PORT: String(pgPort),
      PORT: String(httpPort),
      OPS_PORT: String(opsPort),
      HOST: "127.0.0.1",
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: caFile
    }
    delete env.DATABASE_URL
    delete env.NODE_OPTIONS

    // Keys enough for the read rate, each kept to three quarters of its limit; past 20 keys
    // (a company's most) the limit is raised for this run instead, and said.
    const perKeyPerMinute = 0.75 * KEY_LIMIT_PER_MINUTE
    let keyCount = Math.max(1, Math.ceil((args.reads * 60) / perKeyPerMinute))
    if (keyCount > MAX_KEYS) {
      keyCount = MAX_KEYS
      env.API_RATE_LIMIT = String(Math.ceil((args.reads * 60) / MAX_KEYS / 0.75))
      log(
        `note: ${args.reads} reads/s is more than ${MAX_KEYS} keys may make at 120/min: API_RATE_LIMIT=${env.API_RATE_LIMIT} for this run`
      )
    }

    log(`seeding the demo (node src/faces/cli/seed.ts) under ${dataDir}...`)
    log(`  ${(await run("src/faces/cli/seed.ts", [], env, 300_000)).trim()}`)

    const command = startCommand()
    for (const step of command.before) {
      log(`node ${step.join(" ")}`)
      await run(step[0]!, step.slice(1), env, 120_000)
    }
    log(
      `starting the service (${Object.entries(command.env)
        .map(([k, v]) => `${k}=${v} `)
        .join("")}node ${command.args.join(" ")})...`
    )
    // SOAK_NODE_OPTIONS: node options for the service alone (e.g. to try V8 settings).
    const nodeOptions = [process.env.SOAK_NODE_OPTIONS ?? ""]
    if (args.snapshots !== undefined) {
      mkdirSync(args.snapshots, { recursive: true })
      nodeOptions.push(`--heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${resolve(args.snapshots)}`)
    }
    const serviceEnv = { ...env, ...command.env, NODE_OPTIONS: nodeOptions.join(" ").trim() }
    const logFd = openSync(logFile, "a")
    service = spawn(process.execPath, command.args, { cwd: ROOT, env: serviceEnv, stdio: ["ignore", logFd, logFd] })
    closeSync(logFd)
    children.add(service)
    let serviceExit: string | undefined
    service.once("exit", (code, signal) => (serviceExit = `exit ${code ?? signal}`))
    const pid = service.pid!
    const ops = `http://127.0.0.1:${opsPort}`
    await waitUntil(
      async () => {
        if (serviceExit !== undefined)
          throw new Error(`the service stopped (${serviceExit}):\n${readFileSync(logFile, "utf8").slice(-3000)}`)
        return fetch(`${ops}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
          (r) => r.ok,
          () => false
        )
      },
      180_000,
      "the service to be ready"
    )
    log(`  ready, pid ${pid}, RSS ${mb(procMemory(pid)?.rss)} MB`)

    const serverUrl = embeddedUrl(readFileSync(join(dataDir, "pg-password"), "utf8").trim(), pgPort)
    sql = postgres(serverUrl, { max: 2, onnotice: () => {} })
    own = postgres(databaseUrl(serverUrl, EMBEDDED_SERVICE_DATABASE), { max: 2, onnotice: () => {} })
    /** captureStatus: the slot from the app's database, the checkpoint from the service's. */
    const statusOf = (slot: string) =>
      Effect.runPromise(
        captureStatus(slot).pipe(Effect.provideService(Sql, { pool: own! }), Effect.provide(appSqlLayer(sql)))
      )
    const [company] = await sql<{ id: string }[]>`select id from app.companies where host = ${DEMO_HOST}`
    const companyId = company!.id

    log(`making ${keyCount} API key(s) and a webhook endpoint (node src/faces/cli/admin.ts)...`)
    const keys: Array<string> = []
    for (let made = 0; made < keyCount; made += 4) {
      const batch = Array.from({ length: Math.min(4, keyCount - made) }, (_, j) =>
        run(
          "src/faces/cli/admin.ts",
          [
            "keys",
            "create",
            "--company",
            DEMO_HOST,
            "--name",
            `soak ${made + j + 1}`,
            "--read",
            "all",
            "--as",
            ADMIN_EMAIL,
            "--json"
          ],
          env
        ).then((out) => (JSON.parse(out) as { key: string }).key)
      )
      keys.push(...(await Promise.all(batch)))
    }
    await run(
      "src/faces/cli/admin.ts",
      [
        "endpoints",
        "create",
        "--company",
        DEMO_HOST,
        "--name",
        "soak",
        "--url",
        `https://127.0.0.1:${receiver.port}/hooks`,
        "--events",
        EVENT_KINDS.join(","),
        "--as",
        ADMIN_EMAIL,
        "--json"
      ],
      env
    )

    // What the outbox held before (the seed is bootstrapped, not sent: expected none).
    const slot = "safety_records_service"
    // Caught up: the checkpoint has reached the WAL's end as it is now (the service's own
    // writes move it on only at capture's next heartbeat), or `enough` says so first.
    const caughtUp = async (enough: () => Promise<boolean> = async () => false) => {
      const [{ lsn }] = [...(await sql!<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)] as [
        { lsn: string }
      ]
      await waitUntil(
        async () => {
          if (await enough()) return true
          const s = await statusOf(slot)
          if (s.checkpointLsn === null) return false
          const [r] = await sql!<{ ok: boolean }[]>`select ${s.checkpointLsn}::pg_lsn >= ${lsn}::pg_lsn as ok`
          return r!.ok
        },
        DRAIN_MS,
        "capture to catch up"
      )
    }
    await caughtUp()
    const countsByKind = async () => {
      const rows = await own!<
        { event: string; n: number }[]
      >`select event, count(*)::int as n from service.events where company_id = ${companyId} group by event`
      return new Map(rows.map((r) => [r.event, r.n]))
    }
    const before = await countsByKind()
    const outboxTotal = async () => {
      const [r] = await own!<
        { n: number }[]
      >`select count(*)::int as n from service.events where company_id = ${companyId}`
      return r!.n - [...before.values()].reduce((a, b) => a + b, 0)
    }
    const [{ since }] = [...(await sql<{ since: Date }[]>`select now() as since`)] as [{ since: Date }]

    log(
      `\nsoak: simulate at ${args.rate}/s for ${args.durationText}, ${args.reads} API reads/s over ${keys.length} key(s), one endpoint on all ${EVENT_KINDS.length} events, sampled every ${args.sample / 1000} s\n`
    )
    const samples: Array<Sample> = []
    const reader = startReader(httpPort, keys, args.reads)
    const t0 = performance.now()
    const cpu0 = procCpuSeconds(pid)
    const sampleNow = async (): Promise<Sample> => {
      const mem = procMemory(pid)
      const metrics = await fetch(`${ops}/metrics`, { signal: AbortSignal.timeout(10_000) })
        .then((r) => r.text())
        .then(parseMetrics, () => new Map<string, number>())
      const s: Sample = {
        t: (performance.now() - t0) / 1000,
        rss: mem?.rss ?? NaN,
        heapUsed: metrics.get("nodejs_heap_used_bytes") ?? NaN,
        heapTotal: metrics.get("nodejs_heap_size_total_bytes") ?? NaN,
        external: metrics.get("nodejs_external_memory_bytes") ?? NaN,
        events: await outboxTotal(),
        delivered: receiver!.distinct(),
        reads: reader.stats.ok,
        errors: reader.stats.errors,
        lagBytes: metrics.get("srs_capture_lag_bytes") ?? NaN
      }
      return s
    }
    const header = [
      "t (s)",
      "RSS MB",
      "heap used MB",
      "heap total MB",
      "external MB",
      "events",
      "delivered",
      "API reads",
      "API errors",
      "lag bytes"
    ]
    const row = (s: Sample) => [
      s.t.toFixed(0),
      mb(s.rss),
      mb(s.heapUsed),
      mb(s.heapTotal),
      mb(s.external),
      fmt(s.events),
      fmt(s.delivered),
      fmt(s.reads),
      fmt(s.errors),
      fmt(s.lagBytes)
    ]
    const widths = header.map((h) => Math.max(h.length, 10))
    const print = (cells: ReadonlyArray<string>) =>
      process.stdout.write(`${cells.map((c, i) => c.padStart(widths[i]!)).join("  ")}\n`)
    print(header)
    const take = async () => {
      const s = await sampleNow()
      samples.push(s)
      print(row(s))
    }
    await take()
    let sampling = true
    const sampler = (async () => {
      for (let n = 1; sampling; n++) {
        const wait = t0 + n * args.sample - performance.now()
        if (wait > 0) await sleep(wait)
        if (!sampling) break
        await take()
      }
    })()
    const snapshotTimers =
      args.snapshots === undefined
        ? []
        : [0.5, 0.95].map((f) =>
            setTimeout(() => {
              log(`  (heap snapshot of the service at ${((performance.now() - t0) / 1000).toFixed(0)} s)`)
              process.kill(pid, "SIGUSR2")
            }, args.duration * f)
          )

    // The simulation, to its end. It exits 1 when some of its transactions failed (rolled
    // back, they fire nothing and count nowhere); its totals are on stdout all the same.
    const simulateOut = await run(
      "src/faces/cli/simulate.ts",
      ["--rate", String(args.rate), "--duration", args.durationText, "--json"],
      env,
      args.duration + 120_000,
      [0, 1]
    )
    const result = JSON.parse(simulateOut.trim().split("\n").at(-1)!) as SimulationResult
    const simulatedFor = (performance.now() - t0) / 1000
    for (const t of snapshotTimers) clearTimeout(t)
    const lagAtEnd = await statusOf(slot)
    const cpuRun = procCpuSeconds(pid) - cpu0
    await reader.stop()
    sampling = false
    await sampler

    // Drain: capture to the end of the WAL, then the deliveries.
    const expectedTotal = EVENT_KINDS.reduce((n, k) => n + result.events[k], 0)
    const drain0 = performance.now()
    const drainStartedAt = Date.now()
    await caughtUp(async () => (await outboxTotal()) >= expectedTotal).catch((e: Error) => failures.push(e.message))
    const captureDrainMs = performance.now() - drain0
    await waitUntil(() => receiver!.distinct() >= expectedTotal, DRAIN_MS, "the deliveries").catch((e: Error) =>
      failures.push(e.message)
    )
    await sleep(2000) // a delivery sent twice arrives late, if at all
    const deliveryDrainMs = receiver.lastAt() - drainStartedAt
    await take()
    const finalMem = procMemory(pid)
    if (serviceExit !== undefined) failures.push(`the service stopped during the run (${serviceExit})`)

    // The outbox against what simulate's transactions must fire.
    const after = await countsByKind()
    const eventRows: Array<[string, number, number, number, string]> = []
    const broken: Array<string> = []
    for (const kind of EVENT_KINDS) {
      const expected = result.events[kind as EventKind]
      const got = (after.get(kind) ?? 0) - (before.get(kind) ?? 0)
      const delivered = receiver.byKind().get(kind) ?? 0
      const verdict =
        got === expected ? "ok" : got < expected ? `MISSING ${expected - got}` : `DOUBLED ${got - expected}`
      if (got !== expected) broken.push(`${kind}: expected ${expected}, outbox has ${got} (${verdict})`)
      eventRows.push([kind, expected, got, delivered, verdict])
    }
    const doubles = await own<{ event: string; record_id: string; n: number }[]>`
      select event, record_id::text, count(*)::int as n from service.events
      where company_id = ${companyId} and created_at >= ${since} and event like '%.created'
      group by event, record_id having count(*) > 1 limit 10`
    for (const d of doubles) broken.push(`${d.event} ${d.record_id}: ${d.n} events for one record (DOUBLED)`)

    // -------------------------------------------------------------------------
    // Report
    const total = (m: ReadonlyMap<string, number>) => [...m.values()].reduce((a, b) => a + b, 0)
    const gotTotal = total(after) - total(before)
    const operations = Object.values(result.operations).reduce((a, b) => a + b, 0)
    const half = samples.filter((s) => s.t >= simulatedFor / 2 && s.t <= simulatedFor + 1)
    const halfSpan = half.length > 1 ? half.at(-1)!.t - half[0]!.t : 0
    const growth =
      half.length > 1
        ? slope(
            half.map((s) => s.t),
            half.map((s) => s.rss)
          ) * halfSpan
        : NaN
    const heapGrowth =
      half.length > 1
        ? slope(
            half.map((s) => s.t),
            half.map((s) => s.heapUsed)
          ) * halfSpan
        : NaN
    const steady = median(half.map((s) => s.rss))
    const lines = [
      "",
      `Soak (${new Date().toISOString().slice(0, 10)}): \`${Object.entries(command.env)
        .map(([k, v]) => `${k}=${v} `)
        .join(
          ""
        )}node ${command.args.join(" ")}\`; simulate --rate ${args.rate} for ${args.durationText}, ${args.reads} API reads/s over ${keys.length} key(s)${env.API_RATE_LIMIT ? ` (API_RATE_LIMIT=${env.API_RATE_LIMIT})` : ""}, one HTTPS endpoint on all events`,
      "",
      "| Measure | Value |",
      "|---|---|",
      `| service RSS, steady (median, second half) | ${mb(steady)} MB |`,
      `| service RSS, growth over the second half (least squares, ${halfSpan.toFixed(0)} s) | ${growth >= 0 ? "+" : ""}${mb(growth)} MB |`,
      `| V8 heap used, growth over the second half | ${heapGrowth >= 0 ? "+" : ""}${mb(heapGrowth)} MB |`,
      `| service RSS, peak (VmHWM) | ${mb(finalMem?.peak)} MB |`,
      `| service CPU while simulate ran | ${cpuRun.toFixed(1)} s (${((cpuRun / simulatedFor) * 100).toFixed(0)}% of a core; ${((cpuRun * 1e6) / Math.max(1, gotTotal)).toFixed(0)} µs per event) |`,
      `| simulate: operations (per second), skipped, failed | ${fmt(operations)} (${(operations / (result.elapsedMs / 1000)).toFixed(1)}/s), ${fmt(result.skipped)}, ${fmt(result.failed)} |`,
      `| events expected / in the outbox | ${fmt(expectedTotal)} / ${fmt(gotTotal)} |`,
      `| deliveries expected / received (distinct) / repeated | ${fmt(expectedTotal)} / ${fmt(receiver.distinct())} / ${fmt(receiver.repeated())} |`,
      `| API reads answered 200 / errors${reader.stats.late ? " / not sent (64 in flight)" : ""} | ${fmt(reader.stats.ok)} / ${fmt(reader.stats.errors)}${reader.stats.late ? ` / ${fmt(reader.stats.late)}` : ""}${reader.stats.byStatus.size ? ` (${[...reader.stats.byStatus].map(([k, v]) => `${k}: ${v}`).join(", ")})` : ""} |`,
      `| capture lag when simulate ended | ${fmt(lagAtEnd.lagBytes ?? NaN)} bytes, ${(lagAtEnd.lagSeconds ?? 0).toFixed(1)} s |`,
      `| then: outbox complete after / last delivery after | ${fmt(captureDrainMs)} ms / ${fmt(Math.max(0, deliveryDrainMs))} ms |`,
      "",
      "| Event | Expected | Outbox | Delivered | |",
      "|---|---:|---:|---:|---|",
      ...eventRows.map(([k, e, g, d, v]) => `| ${k} | ${fmt(e)} | ${fmt(g)} | ${fmt(d)} | ${v} |`),
      ""
    ]
    process.stdout.write(`${lines.join("\n")}\n`)
    for (const e of reader.stats.firstErrors) log(`  API error: ${e}`)
    for (const e of result.errors) log(`  simulate failure: ${e}`)

    if (broken.length > 0) {
      failures.push(`EVENTS MISSING OR DOUBLED:\n${broken.map((b) => `    ${b}`).join("\n")}`)
    }
    if (receiver.distinct() !== expectedTotal)
      failures.push(`deliveries: ${expectedTotal} expected, ${receiver.distinct()} received`)
    if (receiver.repeated() > 0) failures.push(`deliveries: ${receiver.repeated()} delivered more than once`)
    if (reader.stats.errors > 0) failures.push(`API reads: ${reader.stats.errors} errors`)
  } catch (e) {
    failures.push(e instanceof Error ? e.message : String(e))
  } finally {
    if (service !== undefined && service.exitCode === null && service.signalCode === null) {
      const exited = new Promise((r) => service!.once("exit", r))
      service.kill("SIGTERM")
      await Promise.race([exited, sleep(30_000)])
      if (service.exitCode === null && service.signalCode === null) service.kill("SIGKILL")
      else if (service.exitCode !== 0 && failures.length === 0)
        failures.push(`the service did not stop cleanly on SIGTERM (${service.exitCode ?? service.signalCode})`)
    }
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL")
    await sql?.end({ timeout: 2 })
    await own?.end({ timeout: 2 })
    await receiver?.close()
    // The embedded server stops with the service; if the service was killed, stop it here.
    if (stopPostgres()) await sleep(3000)
    if (failures.length > 0) {
      try {
        log(`\nthe service's log, last lines:\n${readFileSync(logFile, "utf8").slice(-3000)}`)
      } catch {
        // never started
      }
    }
    rmSync(dir, { recursive: true, force: true })
    clearTimeout(watchdog)
  }
  if (failures.length > 0) {
    log(`\n${"!".repeat(78)}`)
    for (const f of failures) log(`!! SOAK FAILED: ${f}`)
    log("!".repeat(78))
    process.exitCode = 1
  } else {
    log("soak: every expected event in the outbox once, every delivery received once, no API error")
  }
}

await main()
