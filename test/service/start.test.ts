// The real `npm start` entry point as a user runs it: the bundle it builds (src/build.ts), on
// embedded PostgreSQL under DATA_DIR (the demo app's database and the service's own side by
// side), demo data on the first start, /healthz, a clean stop on SIGTERM, data intact on
// restart; a data directory an earlier version made (one database) kept as it is; and a
// clear refusal of a server without logical replication.
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { buildService } from "../../src/build.ts"
import postgres from "postgres"
import { EMBEDDED_SERVICE_DATABASE, databaseUrl } from "../../src/platform/db/Database.ts"
import { prepareDemoDatabase } from "../../src/platform/db/demo-schema.ts"
import { embeddedUrl, startEmbedded } from "../../src/platform/db/embedded.ts"
import { freePort } from "../support/global-setup.ts"
import { startService, streaming, waitForUrl } from "../support/service-process.ts"

const ROOT = fileURLToPath(new URL("../..", import.meta.url))

/** `npm start` as a user, systemd or `timeout` runs it: npm is the process they hold. */
const npmStart = (env: Record<string, string>) => {
  // npm_execpath is npm's own script when the suite runs under npm; else npm from PATH.
  const npm = process.env.npm_execpath
  const child = npm?.endsWith(".js")
    ? spawn(process.execPath, [npm, "start"], { cwd: ROOT, env: { ...process.env, ...env }, stdio: "pipe" })
    : spawn("npm", ["start"], { cwd: ROOT, env: { ...process.env, ...env }, stdio: "pipe" })
  let output = ""
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  return { child, output: () => output, exit }
}

/** The process ids whose parent is `pid` (from /proc). */
const childrenOf = (pid: number): number[] => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    return []
  }
}

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`)

describe("npm start", () => {
  const dirs: string[] = []
  const children: ChildProcess[] = []
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "srs-start-"))
    chmodSync(d, 0o755)
    dirs.push(d)
    return d
  }
  const pids: number[] = []
  afterAll(() => {
    for (const c of children) c.kill("SIGKILL")
    for (const pid of pids.filter(alive)) process.kill(pid, "SIGKILL")
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })
  // What `npm start` runs: src/main.ts built into one file (here into a temporary directory).
  let bundle = ""
  beforeAll(async () => {
    bundle = join(tempDir(), "service.mjs")
    await buildService(bundle)
  }, 60_000)

  it("serves /healthz and /readyz on the embedded database, stops cleanly, restarts with its data", {
    timeout: 120_000
  }, async () => {
    const dataDir = tempDir()
    const env = { DATA_DIR: dataDir, EMBEDDED_PG_PORT: String(await freePort()), PORT: String(await freePort()) }
    const base = `http://127.0.0.1:${env.PORT}`
    const first = startService(env, { main: bundle })
    children.push(first.child)
    const t0 = Date.now()
    await waitForUrl(`${base}/healthz`, 60_000)
    // The public port says ready or not, and nothing more.
    expect(await waitForUrl(`${base}/readyz`, 30_000)).toEqual({ status: "ready" })
    // Ready as soon as the database is; capture (which builds the first views) streams soon after.
    const ready = await waitForUrl(`${await first.opsUrl()}/readyz`, 30_000, streaming)
    expect(ready).toMatchObject({
      status: "ready",
      database: true,
      migrations: true,
      capture: { role: "leader", streaming: true }
    })
    expect(first.output()).toContain("demo data loaded")
    expect(first.output()).toContain("npm run admin -- keys create")
    expect(Date.now() - t0).toBeLessThan(60_000)
    expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(true)
    // Two databases in the one embedded server: the demo app's (postgres) holds the app's
    // tables and the slot, the service's own everything the service writes.
    const serverUrl = embeddedUrl(
      readFileSync(join(dataDir, "pg-password"), "utf8").trim(),
      Number(env.EMBEDDED_PG_PORT)
    )
    const appDb = postgres(serverUrl, { max: 1, onnotice: () => {} })
    const ownDb = postgres(databaseUrl(serverUrl, EMBEDDED_SERVICE_DATABASE), { max: 1, onnotice: () => {} })
    try {
      expect(await appDb`select nspname from pg_namespace where nspname in ('app', 'service')`).toEqual([
        { nspname: "app" }
      ])
      expect(await appDb`select slot_name from pg_replication_slots where database = 'postgres'`).toHaveLength(1)
      const [own] = await ownDb<{ app: boolean; views: number; state: number }[]>`
        select exists (select 1 from pg_namespace where nspname = 'app') as app,
               (select count(*)::int from service.views) as views,
               (select count(*)::int from service.capture_state) as state`
      expect(own).toMatchObject({ app: false, state: 1 })
      expect(own!.views).toBeGreaterThan(100)
    } finally {
      await appDb.end()
      await ownDb.end()
    }
    // Files the bundle finds beside its sources: the migrations ran (ready says so), and the
    // API reference page loads its script from the installed package on demand.
    const docs = await fetch(`${base}/docs`)
    expect(docs.status).toBe(200)
    const page = await docs.text()
    expect(page.includes("window.Scalar.createApiReference") && page.includes('"openapi"')).toBe(true)

    // One keys service in the process: a made-up key on the public port shows in the operations
    // port's /metrics as one client with a bucket of failed authentications.
    const unknownKey = await fetch(`${base}/api/v1/incidents`, {
      headers: { authorization: `Bearer mk_${"A".repeat(43)}` }
    })
    expect(unknownKey.status).toBe(401)
    const metrics = await (await fetch(`${await first.opsUrl()}/metrics`)).text()
    expect(metrics).toMatch(/^srs_api_cache_entries\{cache="clients"\} 1$/m)
    expect(metrics).toMatch(/^srs_api_cache_entries\{cache="unknown_keys"\} 1$/m)

    first.child.kill("SIGTERM")
    expect(await first.exited()).toBe(0)
    // The embedded server stopped with it: nothing left running.
    expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(false)
    expect(first.output()).toContain("embedded PostgreSQL stopped")

    const second = startService(env, { main: bundle })
    children.push(second.child)
    await waitForUrl(`${await second.opsUrl()}/readyz`, 60_000, streaming)
    expect(second.output()).not.toContain("demo data loaded")
    expect(second.output()).not.toContain("initial views built")
    second.child.kill("SIGINT")
    expect(await second.exited()).toBe(0)
  })

  it("SIGTERM or SIGINT sent to npm itself stops the service cleanly, and its embedded PostgreSQL with it", {
    timeout: 180_000
  }, async () => {
    const dataDir = tempDir()
    const env = {
      DATA_DIR: dataDir,
      EMBEDDED_PG_PORT: String(await freePort()),
      PORT: String(await freePort()),
      OPS_PORT: String(await freePort()),
      SEED_DEMO: "false",
      LOG_LEVEL: "Info"
    }
    for (const signal of ["SIGTERM", "SIGINT"] as const) {
      const npm = npmStart(env)
      children.push(npm.child)
      await waitForUrl(`http://127.0.0.1:${env.OPS_PORT}/readyz`, 90_000, streaming)
      // What npm started: the script's shell, which `exec` made the service itself.
      const service = childrenOf(npm.child.pid!)
      expect(service).toHaveLength(1)
      pids.push(...service)
      npm.child.kill(signal)
      expect(await npm.exit).toBe(0)
      await new Promise((r) => setTimeout(r, 200))
      expect(alive(service[0]!)).toBe(false)
      expect(existsSync(join(dataDir, "pg", "postmaster.pid"))).toBe(false)
      expect(npm.output()).toMatch(/"message":"capture stopped","checkpoint":"[0-9A-F]+\/[0-9A-F]+"/)
      expect(npm.output()).toContain("embedded PostgreSQL stopped")
    }
  })

  it("keeps a data directory an earlier version made (the service's state in the app's database) as it is, and says how to move", {
    timeout: 120_000
  }, async () => {
    const dataDir = tempDir()
    const port = await freePort()
    // What an earlier version left: one database, the app's tables and the service's schema.
    const earlier = await startEmbedded({ dataDir, port })
    const sql = postgres(earlier.url, { max: 1, onnotice: () => {} })
    await prepareDemoDatabase(sql)
    await sql.end()
    await earlier.stop()
    const env = {
      DATA_DIR: dataDir,
      EMBEDDED_PG_PORT: String(port),
      PORT: String(await freePort()),
      SEED_DEMO: "false"
    }
    const r = startService(env, { main: bundle })
    children.push(r.child)
    await waitForUrl(`${await r.opsUrl()}/readyz`, 60_000, streaming)
    expect(r.output().match(/the service's state stays in the app's database/g)).toHaveLength(1)
    expect(r.output()).toContain("docs/deployment.md#one-database-or-two")
    const serverUrl = embeddedUrl(readFileSync(join(dataDir, "pg-password"), "utf8").trim(), port)
    const check = postgres(serverUrl, { max: 1, onnotice: () => {} })
    try {
      expect(await check`select 1 from pg_database where datname = ${EMBEDDED_SERVICE_DATABASE}`).toHaveLength(0)
      expect(await check`select slot_name from service.capture_state`).toHaveLength(1)
    } finally {
      await check.end()
    }
    r.child.kill("SIGTERM")
    expect(await r.exited()).toBe(0)
  })

  it("refuses a server without logical replication, saying what to change", { timeout: 60_000 }, async () => {
    const dir = tempDir()
    const server = await startEmbedded({ dataDir: dir, port: await freePort(), settings: { wal_level: "replica" } })
    try {
      const r = startService({ DATABASE_URL: server.url, PORT: String(await freePort()) }, { main: bundle })
      children.push(r.child)
      const code = await r.exited()
      expect(code).not.toBe(0)
      expect(r.output()).toContain("wal_level=logical")
      expect(r.output()).toContain("ALTER SYSTEM SET wal_level = logical")
    } finally {
      await server.stop()
    }
  })
})
