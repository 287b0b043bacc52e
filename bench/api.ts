// bench/api: the read API against a bare node:http + postgres.js server doing the same
// query the obvious way (rows parsed, then JSON.stringify), in the same run, on the same
// database. Two scenarios: a list of 50 records and a get by id, each with a valid key.
// For each: the most requests per second at 50 connections, then latency at a steady
// 300 requests per second. Prints req/s, p50/p99 and the ratio to the bare server.
//
//   npm run bench:api                 embedded PostgreSQL in a temporary directory
//   BENCH_DATABASE_URL=... npm run bench:api  a fresh database on that server (dropped after)
//   BENCH_SECONDS=10 BENCH_RECORDS=10000 BENCH_ROUNDS=3 (defaults)
//
// The servers run in child processes (one each) so autocannon does not share their event
// loop. The service keeps authentication and its rate limit on every request; the limit is
// raised (API_RATE_LIMIT) so that the measurement is not a wall of 429s.
import { ROUTER_CONFIG } from "../src/platform/http/node-server.ts"
import { NodeHttpServer } from "@effect/platform-node"
import { Effect, Layer, References } from "effect"
import { HttpRouter } from "effect/http"
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { Agent, createServer, request as httpRequest } from "node:http"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import postgres from "postgres"
import { createKey } from "../src/access/keys/store.ts"
import { makeApiRoutes } from "../src/faces/routes.ts"
import { connect, Database } from "../src/platform/db/Database.ts"
import { Sql } from "../src/platform/db/Sql.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { prepareDemoDatabase } from "../src/platform/db/demo-schema.ts"
import { RequestObservability } from "../src/faces/observability.ts"
import { MetricsLive } from "../src/faces/ops/metrics.ts"
import { makeWebhooks, Webhooks } from "../src/webhooks/service.ts"
import { shape, viewMeta } from "../src/domain/records/index.ts"
import { RESOURCES } from "../src/domain/resources.ts"
import { freePort } from "../test/support/net.ts"

const SELF = fileURLToPath(import.meta.url)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const RECORDS = Number(process.env.BENCH_RECORDS ?? 10_000)
const CONNECTIONS = 50
const STEADY_RATE = 300
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const POOL = Number(process.env.DATABASE_POOL_SIZE ?? 10)

// -----------------------------------------------------------------------------
// Child: the service's routes, as src/main.ts serves them

const serveService = async (url: string, port: number) => {
  const DatabaseLive = Layer.effect(
    Database,
    Effect.acquireRelease(
      Effect.sync(() => connect(url, POOL)),
      (sql) => Effect.promise(() => sql.end({ timeout: 2 }))
    ).pipe(Effect.map((sql) => ({ sql, url, embedded: false })))
  )
  // The webhook operations (/api/v1/hooks) are not measured here: a throwaway secrets key.
  const WebhooksBench = Layer.effect(
    Webhooks,
    Effect.map(Sql, (sql) => makeWebhooks({ secretsKey: randomBytes(32), allowed: [] }, sql))
  )
  // As src/main.ts serves them on the public port: with the per-request middleware (request id, metrics).
  const Routes = Layer.mergeAll(makeApiRoutes({ rateLimit: 1_000_000_000 }), RequestObservability)
  const Server = HttpRouter.serve(Routes, { disableLogger: true, routerConfig: ROUTER_CONFIG }).pipe(
    Layer.provide(WebhooksBench),
    Layer.provide(MetricsLive),
    Layer.provide(NodeHttpServer.layer(createServer, { port, host: "127.0.0.1" })),
    Layer.provide(Sql.layer.pipe(Layer.provideMerge(DatabaseLive))),
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Error"))
  )
  await Effect.runPromise(Layer.launch(Server))
}

// -----------------------------------------------------------------------------
// Child: the bare server, the obvious way

const serveBare = async (url: string, port: number, companyId: string) => {
  const sql = postgres(url, { max: POOL, onnotice: () => {} })
  const server = createServer(async (req, res) => {
    try {
      const u = new URL(req.url ?? "/", "http://x")
      const parts = u.pathname.split("/").filter((s) => s !== "")
      if (parts.length === 3 && parts[2] === "incidents") {
        const limit = Number(u.searchParams.get("limit") ?? 50)
        const rows = await sql<{ body: unknown }[]>`
          select body::json as body from service.views
           where company_id = ${companyId} and resource = 'incidents'
             and service.resource_no(resource) = service.resource_no('incidents')
           order by created_at desc, id desc limit ${limit}`
        const data = rows.map((r) => r.body)
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({ data, nextCursor: null }))
      } else if (parts.length === 4 && parts[2] === "incidents") {
        const [row] = await sql<{ body: unknown }[]>`
          select body::json as body from service.views where resource = 'incidents' and id = ${parts[3]!} and company_id = ${companyId}`
        if (row === undefined) {
          res.writeHead(404, { "content-type": "application/json" })
          res.end(JSON.stringify({ error: "not found" }))
        } else {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify({ data: row.body }))
        }
      } else {
        res.writeHead(404)
        res.end()
      }
    } catch (error) {
      res.writeHead(500)
      res.end(String(error))
    }
  })
  server.listen(port, "127.0.0.1")
}

// -----------------------------------------------------------------------------
// Orchestrator

// CPU used per request, from /proc (Linux): the server process, and PostgreSQL's processes
// when the bench started PostgreSQL itself. Unlike req/s it hardly depends on what else the
// machine is running at the time.
const ticksOf = (pid: number): number => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
    return Number(fields[11]) + Number(fields[12])
  } catch {
    return NaN
  }
}
const postgresTicks = (postmaster: number | undefined): number => {
  if (postmaster === undefined) return NaN
  let total = ticksOf(postmaster)
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1]!.split(" ")
      if (Number(fields[1]) === postmaster) total += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone
    }
  }
  return total
}
const TICK_US = 10_000 // USER_HZ = 100

interface Result {
  readonly requests: number
  readonly p50: number
  readonly p99: number
  readonly non2xx: number
  readonly errors: number
  /** What the errors were (error codes), when the run knows. */
  readonly errorKinds?: ReadonlyArray<string>
}

type Autocannon = (options: Record<string, unknown>) => Promise<{
  requests: { average: number }
  latency: { p50: number; p99: number }
  non2xx: number
  errors: number
}>
const autocannon = createRequire(import.meta.url)("autocannon") as Autocannon

interface Cpu {
  /** Microseconds of CPU per request in the server process. */
  readonly server: number
  /** ... and in PostgreSQL (NaN when PostgreSQL is not the bench's own). */
  readonly postgres: number
}

/** The most requests per second at CONNECTIONS connections (autocannon), and the CPU they cost. */
const run = async (
  url: string,
  headers: Record<string, string>,
  pid?: number,
  postmaster?: number
): Promise<Result & { readonly cpu: Cpu }> => {
  const s0 = pid === undefined ? NaN : ticksOf(pid)
  const p0 = postgresTicks(postmaster)
  const r = await autocannon({ url, headers, connections: CONNECTIONS, duration: SECONDS })
  const total = r.requests.average * SECONDS
  const cpu = {
    server: ((ticksOf(pid ?? -1) - s0) * TICK_US) / total,
    postgres: ((postgresTicks(postmaster) - p0) * TICK_US) / total
  }
  return {
    requests: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    non2xx: r.non2xx,
    errors: r.errors,
    cpu
  }
}

/**
 * Latency at a steady rate: requests sent at evenly spaced moments whatever the answers
 * do (open loop, so a slow answer does not hide the ones queued behind it), over up to
 * CONNECTIONS keep-alive connections. autocannon's own rate option sends in bursts.
 */
const steady = async (url: string, headers: Record<string, string>, rate: number): Promise<Result> => {
  const agent = new Agent({ keepAlive: true, maxSockets: CONNECTIONS })
  const u = new URL(url)
  const latencies: Array<number> = []
  let non2xx = 0
  let errors = 0
  const errorKinds = new Set<string>()
  const once = () =>
    new Promise<void>((resolve) => {
      const started = process.hrtime.bigint()
      const req = httpRequest(
        { host: u.hostname, port: u.port, path: u.pathname + u.search, agent, headers },
        (res) => {
          res.on("data", () => {})
          res.on("end", () => {
            latencies.push(Number(process.hrtime.bigint() - started) / 1e6)
            if ((res.statusCode ?? 0) >= 300) non2xx++
            resolve()
          })
        }
      )
      req.on("error", (error: NodeJS.ErrnoException) => {
        errors++
        errorKinds.add(error.code ?? error.message)
        resolve()
      })
      req.end()
    })
  const total = rate * SECONDS
  const begin = performance.now()
  const pending: Array<Promise<void>> = []
  for (let i = 0; i < total; i++) {
    const wait = begin + (i * 1000) / rate - performance.now()
    if (wait > 0.5) await new Promise((r) => setTimeout(r, wait))
    pending.push(once())
  }
  await Promise.all(pending)
  agent.destroy()
  latencies.sort((a, b) => a - b)
  const at = (q: number) =>
    Number(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!.toFixed(1))
  return {
    requests: latencies.length / SECONDS,
    p50: at(0.5),
    p99: at(0.99),
    non2xx,
    errors,
    errorKinds: [...errorKinds]
  }
}

const startChild = async (args: ReadonlyArray<string>, port: number): Promise<ChildProcess> => {
  const child = spawn(process.execPath, [SELF, ...args], { stdio: ["ignore", "inherit", "inherit"] })
  for (let i = 0; i < 200; i++) {
    try {
      // A request that arrives between listen() and the handler being installed is never
      // answered: give up on it and ask again.
      const r = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(1000) })
      await r.arrayBuffer()
      return child
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  child.kill()
  throw new Error(`server ${args[0]} did not start`)
}

const seed = async (sql: postgres.Sql) => {
  const [c] = await sql<{ id: string; created_at: Date }[]>`
    insert into app.companies (name, host, tier, api_enabled) values ('Bench Co', ${`bench-${randomBytes(4).toString("hex")}.test`}, 'company', true)
    returning id::text, created_at`
  const companyId = c!.id
  const [u] = await sql<{ id: string }[]>`
    insert into app.users (company_id, name, email, role) values (${companyId}, 'Bench Admin', 'bench@example.test', 'admin') returning id::text`
  await sql`
    insert into service.companies (id, name, host, tier, api_enabled, modules, created_at)
    select id, name, host, tier, api_enabled, ${RESOURCES as unknown as string[]}::text[], created_at from app.companies where id = ${companyId}`
  const now = Date.now()
  const ids: Array<string> = []
  for (let start = 0; start < RECORDS; start += 1000) {
    const rows = []
    for (let i = start; i < Math.min(RECORDS, start + 1000); i++) {
      const id = crypto.randomUUID()
      ids.push(id)
      const createdAt = new Date(now - i * 60_000).toISOString()
      const record = shape("incidents", {
        row: {
          id,
          company_id: companyId,
          reference: `INC-${String(i).padStart(5, "0")}`,
          type: "injury",
          title: `Laceration while cutting rebar (${i})`,
          description:
            "Left hand cut on rebar end during placement; first aid given on site and the area was made safe.",
          occurred_at: createdAt,
          job_site_id: crypto.randomUUID(),
          location: "Level 3, east core",
          person_name: "Dana Okafor",
          worker_id: crypto.randomUUID(),
          body_part: "left hand",
          injury_type: "laceration",
          severity: "minor",
          privacy_case: false,
          osha_recordable: i % 7 === 0,
          status: "open",
          reported_by: "Sam Site Lead",
          reported_via: "app",
          created_at: createdAt,
          updated_at: createdAt
        },
        children: [],
        acknowledgementCount: 0,
        equipment: null,
        equipmentJobSite: null
      })
      const meta = viewMeta("incidents", record)
      rows.push({
        resource: "incidents",
        id,
        company_id: companyId,
        created_at: meta.createdAt,
        name: null,
        status: null,
        body: JSON.stringify(record)
      })
    }
    await sql`insert into service.views ${sql(rows)}`
  }
  await sql`analyze service.views`
  const created = await Effect.runPromise(
    createKey(
      { userId: u!.id, email: "bench@example.test", name: "Bench Admin", companyId },
      { companyId, name: "bench", scopes: ["incidents"], webhooks: false, expires: "never" }
    ).pipe(Effect.provide(Sql.fromPool(sql)))
  )
  return { companyId, key: created.key, ids }
}

const main = async () => {
  let dir: string | undefined
  let postmaster: number | undefined
  let stopEmbedded: (() => Promise<void>) | undefined
  let adminUrl: string
  if (process.env.BENCH_DATABASE_URL) {
    adminUrl = process.env.BENCH_DATABASE_URL
  } else {
    dir = mkdtempSync(join(tmpdir(), "bench-api-"))
    chmodSync(dir, 0o755)
    const server = await startEmbedded({ dataDir: dir, port: await freePort(), settings: { max_connections: "200" } })
    adminUrl = server.url
    stopEmbedded = server.stop
    postmaster = Number(readFileSync(join(dir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
  }
  const dbName = `bench_api_${randomBytes(4).toString("hex")}`
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${dbName}`)
  const u = new URL(adminUrl)
  u.pathname = `/${dbName}`
  const url = u.toString()
  const sql = connect(url, 4)
  const children: Array<ChildProcess> = []
  try {
    await prepareDemoDatabase(sql)
    process.stdout.write(`seeding ${RECORDS} incidents...\n`)
    const { companyId, key, ids } = await seed(sql)
    const servicePort = await freePort()
    const barePort = await freePort()
    const service = await startChild(["serve-service", url, String(servicePort)], servicePort)
    const bareServer = await startChild(["serve-bare", url, String(barePort), companyId], barePort)
    children.push(service, bareServer)
    const auth = { authorization: `Bearer ${key}` }
    const id = ids[Math.floor(ids.length / 2)]!
    const scenarios = [
      { name: "list of 50", path: "/api/v1/incidents?limit=50" },
      { name: "get by id", path: `/api/v1/incidents/${id}` }
    ]
    const lines: Array<string> = []
    const fmt = (r: Result) =>
      `${r.requests.toFixed(0).padStart(6)} req/s  p50 ${String(r.p50).padStart(5)} ms  p99 ${String(r.p99).padStart(6)} ms`
    for (const s of scenarios) {
      const svcUrl = `http://127.0.0.1:${servicePort}${s.path}`
      const bareUrl = `http://127.0.0.1:${barePort}${s.path}`
      // warm up both (JIT, prepared statements, caches)
      await run(svcUrl, auth)
      await run(bareUrl, {})
      const cpuRatios: Array<number> = []
      lines.push(
        `${s.name}: ${CONNECTIONS} connections, ${SECONDS} s per measurement, ${ROUNDS} rounds (bare and service alternate)`
      )
      const ratios: Array<number> = []
      for (let round = 1; round <= ROUNDS; round++) {
        const bare = await run(bareUrl, {}, bareServer.pid, postmaster)
        const svc = await run(svcUrl, auth, service.pid, postmaster)
        const bareSteady = await steady(bareUrl, {}, STEADY_RATE)
        const svcSteady = await steady(svcUrl, auth, STEADY_RATE)
        for (const [label, r] of [
          ["bare, max", bare],
          ["service, max", svc],
          ["bare, steady", bareSteady],
          ["service, steady", svcSteady]
        ] as const) {
          if (r.non2xx > 0 || r.errors > 0) {
            const kinds = r.errorKinds === undefined || r.errorKinds.length === 0 ? "" : ` (${r.errorKinds.join(", ")})`
            lines.push(`  warning: ${label}: ${r.non2xx} non-2xx answers, ${r.errors} errors${kinds}`)
          }
        }
        ratios.push(svc.requests / bare.requests)
        const cpuOf = (c: Cpu) => c.server + (Number.isNaN(c.postgres) ? 0 : c.postgres)
        cpuRatios.push(cpuOf(bare.cpu) / cpuOf(svc.cpu))
        const cpuText = (c: Cpu) =>
          `CPU per request: server ${c.server.toFixed(0)} µs` +
          (Number.isNaN(c.postgres) ? "" : ` + PostgreSQL ${c.postgres.toFixed(0)} µs`)
        lines.push(
          `  round ${round}`,
          `    most req/s   bare    ${fmt(bare)}   ${cpuText(bare.cpu)}`,
          `                 service ${fmt(svc)}   ${cpuText(svc.cpu)}   ratio ${(svc.requests / bare.requests).toFixed(2)}x`,
          `    at ${STEADY_RATE} req/s  bare    ${fmt(bareSteady)}`,
          `                 service ${fmt(svcSteady)}`
        )
      }
      ratios.sort((a, b) => a - b)
      cpuRatios.sort((a, b) => a - b)
      lines.push(
        `  median ratio to the bare server: ${ratios[Math.floor(ratios.length / 2)]!.toFixed(2)}x in req/s; ` +
          `${cpuRatios[Math.floor(cpuRatios.length / 2)]!.toFixed(2)}x in requests per CPU second (server + PostgreSQL)`,
        ""
      )
    }
    process.stdout.write(`\n${lines.join("\n")}\n`)
    process.stdout.write(`targets: ratio >= 1.2x, service p99 < 25 ms at ${STEADY_RATE} req/s\n`)
  } finally {
    for (const c of children) c.kill("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    await sql.end({ timeout: 2 })
    await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => undefined)
    await admin.end()
    await stopEmbedded?.()
    if (dir) rmSync(dir, { recursive: true, force: true })
  }
}

const [mode, ...args] = process.argv.slice(2)
if (mode === "serve-service") await serveService(args[0]!, Number(args[1]))
else if (mode === "serve-bare") await serveBare(args[0]!, Number(args[1]), args[2]!)
else await main()
