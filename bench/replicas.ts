// bench/replicas: what the read API costs the service's primary database with and without a
// hot standby (READ_DATABASE_URL), in the same run, on the same data. Two API-only processes
// (node src/main.ts), one reading from the primary alone and one from a streaming standby of
// it, take turns serving lists of 50 records to CONCURRENCY clients for BENCH_SECONDS each;
// for each turn: requests per second, p50 and p99, and the CPU the primary's and the
// standby's backends spent per request (Linux /proc), rounds alternating.
//
//   npm run bench:replicas       embedded PostgreSQL in a temporary directory (the standby is
//                                copied from its files, so no BENCH_DATABASE_URL here)
//   BENCH_SECONDS=10 BENCH_RECORDS=10000 BENCH_ROUNDS=3 (defaults)
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { Agent, request } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import postgres from "postgres"
import { API_KEY_PREFIX, newSecret } from "../src/access/keys/bearer-secrets.ts"
import { connect } from "../src/platform/db/Database.ts"
import { prepareDemoDatabase } from "../src/platform/db/demo-schema.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { freePort } from "../test/support/net.ts"
import { startService, waitForUrl, type ServiceProcess } from "../test/support/service-process.ts"
import { startStandby } from "../test/support/standby.ts"
import { createCompany, seedRecords } from "../test/support/views.ts"
import { waitFor } from "../test/support/wait.ts"
import { percentile, postmasterChildren, table } from "./support.ts"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const RECORDS = Number(process.env.BENCH_RECORDS ?? 10_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const CONCURRENCY = 20

if (process.env.BENCH_DATABASE_URL) {
  process.stderr.write(
    "bench:replicas copies its standby from the server's files: it runs on an embedded server only\n"
  )
  process.exit(2)
}

// ---- CPU of a server's client backends (Linux: /proc) ----
const postmasterOf = async (sql: postgres.Sql) => {
  const [r] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`
  return readFileSync(`/proc/${r!.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]!
}
/** CPU milliseconds of each client backend (not the walsender, not the server's own processes). */
const backendsCpu = (postmaster: string): Map<string, number> =>
  new Map(
    postmasterChildren(postmaster)
      .filter(
        ({ cmd }) =>
          !(cmd.includes("walsender") || cmd.includes("walreceiver") || cmd.includes("startup")) &&
          !/postgres: (checkpointer|background writer|walwriter|autovacuum|logical replication|io worker)/.test(cmd)
      )
      .map(({ pid, cpuMs }) => [pid, cpuMs])
  )
const cpuSince = (before: Map<string, number>, after: Map<string, number>) => {
  let ms = 0
  for (const [pid, a] of after) ms += a - (before.get(pid) ?? 0)
  return ms
}

// ---- load: CONCURRENCY clients, each a request after the other, for SECONDS ----
const load = async (base: string, key: string) => {
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })
  const url = new URL(`${base}/api/v1/incidents?limit=50`)
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now()
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: url.pathname + url.search,
          agent,
          headers: { authorization: `Bearer ${key}` }
        },
        (res) => {
          res.resume()
          res.on("end", () =>
            res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`HTTP ${res.statusCode}`))
          )
        }
      )
      req.on("error", reject)
      req.end()
    })
  const latencies: Array<number> = []
  let errors = 0
  const end = Date.now() + SECONDS * 1000
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (Date.now() < end) {
        try {
          latencies.push(await one())
        } catch {
          errors++
        }
      }
    })
  )
  agent.destroy()
  latencies.sort((a, b) => a - b)
  return { requests: latencies.length, errors, p50: percentile(latencies, 50), p99: percentile(latencies, 99) }
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "bench-replicas-"))
  chmodSync(dir, 0o755)
  const server = await startEmbedded({ dataDir: dir, port: await freePort(), settings: { max_connections: "200" } })
  const admin = postgres(server.url, { max: 1, onnotice: () => {} })
  const dbName = `bench_replicas_${randomBytes(4).toString("hex")}`
  await admin.unsafe(`create database ${dbName}`)
  const u = new URL(server.url)
  u.pathname = `/${dbName}`
  const url = u.toString()
  const sql = connect(url, 4)
  const services: Array<ServiceProcess> = []
  const dirs: Array<string> = [dir]
  let removeStandby: (() => Promise<void>) | undefined
  try {
    await prepareDemoDatabase(sql)
    process.stdout.write(`seeding ${RECORDS} incidents...\n`)
    const company = await createCompany(sql)
    await seedRecords(sql, "incidents", company.id, RECORDS)
    await sql`analyze service.views`
    const secret = newSecret(API_KEY_PREFIX)
    await sql`insert into service.api_keys (company_id, name, fingerprint, scopes)
              values (${company.id}, 'bench', ${secret.fingerprint}, ${["incidents"]})`
    const standby = await startStandby(server.url)
    removeStandby = standby.remove
    const onStandby = postgres(standby.urlFor(dbName), { max: 1, onnotice: () => {} })
    await waitFor(
      async () =>
        ((await onStandby`select count(*)::int as n from service.views`)[0]!.n as number) === RECORDS || undefined,
      "the standby to replay the seed",
      120_000,
      200
    )
    const primaryPm = await postmasterOf(admin)
    const standbyPm = await postmasterOf(onStandby)
    await onStandby.end()

    const start = async (env: Record<string, string>) => {
      const port = await freePort()
      const d = mkdtempSync(join(tmpdir(), "bench-replicas-service-"))
      dirs.push(d)
      const s = startService({
        DATABASE_URL: url,
        SERVICE_ROLES: "api",
        PORT: String(port),
        DATA_DIR: d,
        API_RATE_LIMIT: "1000000000",
        ...env
      })
      services.push(s)
      const base = `http://127.0.0.1:${port}`
      await waitForUrl(`${base}/readyz`, 60_000)
      return { base, ops: await s.opsUrl() }
    }
    // One database, one secrets key (the second process checks it against the first's).
    const key = randomBytes(32).toString("base64")
    const ways = [
      { name: "primary only", ...(await start({ SECRETS_KEY: key })) },
      { name: "with a standby", ...(await start({ SECRETS_KEY: key, READ_DATABASE_URL: standby.urlFor(dbName) })) }
    ]
    await waitForUrl<{ readReplicas: ReadonlyArray<{ usable: boolean }> }>(
      `${ways[1]!.ops}/readyz`,
      30_000,
      (b) => b.readReplicas[0]?.usable === true
    )
    // Warm up both (JIT, prepared statements, caches).
    for (const w of ways) await load(w.base, secret.secret)

    const rows: Array<Array<string>> = [["", "req/s", "p50 ms", "p99 ms", "primary µs/req", "standby µs/req"]]
    const perWay = new Map<string, Array<{ primary: number; standby: number; rps: number }>>()
    for (let round = 1; round <= ROUNDS; round++) {
      for (const w of ways) {
        const p0 = backendsCpu(primaryPm)
        const s0 = backendsCpu(standbyPm)
        const r = await load(w.base, secret.secret)
        const primaryUs = (cpuSince(p0, backendsCpu(primaryPm)) * 1000) / r.requests
        const standbyUs = (cpuSince(s0, backendsCpu(standbyPm)) * 1000) / r.requests
        const rps = r.requests / SECONDS
        perWay.set(w.name, [...(perWay.get(w.name) ?? []), { primary: primaryUs, standby: standbyUs, rps }])
        rows.push([
          `round ${round}, ${w.name}`,
          rps.toFixed(0),
          r.p50.toFixed(1),
          r.p99.toFixed(1),
          primaryUs.toFixed(0),
          standbyUs.toFixed(0)
        ])
        if (r.errors > 0) rows.push([`  (${r.errors} requests failed)`, "", "", "", "", ""])
      }
    }
    const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    for (const w of ways) {
      const rs = perWay.get(w.name)!
      rows.push([
        `median, ${w.name}`,
        median(rs.map((r) => r.rps)).toFixed(0),
        "",
        "",
        median(rs.map((r) => r.primary)).toFixed(0),
        median(rs.map((r) => r.standby)).toFixed(0)
      ])
    }
    process.stdout.write(
      `\nlists of 50 of ${RECORDS} incidents, ${CONCURRENCY} clients, ${SECONDS} s per turn, ${ROUNDS} rounds; CPU of client backends only\n`
    )
    table(rows)
  } finally {
    for (const s of services) s.child.kill("SIGTERM")
    await Promise.all(services.map((s) => s.exited().catch(() => s.child.kill("SIGKILL"))))
    await removeStandby?.()
    await sql.end({ timeout: 2 })
    await admin.unsafe(`drop database if exists ${dbName} with (force)`).catch(() => undefined)
    await admin.end()
    await server.stop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  }
}

await main()
