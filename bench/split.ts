// The app's database's load with the service's state beside it (one database) and in a
// database of its own (SERVICE_DATABASE_URL), in the same run, per 100,000 row changes captured:
// the WAL the app's server writes, the CPU of its backends (and of its walsender) and the growth
// of the app's database. Two embedded servers: the app's, and the service's own (so the app
// server's WAL and processes are its own). Each way, on a database of its own on the app's
// server: capture bootstraps on empty tables, the workload is committed while capture is
// stopped, then capture drains it; each phase is measured on its own (a CHECKPOINT before each,
// so full-page images weigh the same; autovacuum off), the app's writes being the same both ways.
// Usage: npm run bench:split [-- --transactions 20000] [--rounds 1]
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { randomUUID } from "node:crypto"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { Effect, Fiber, Logger } from "effect"
import type postgres from "postgres"
import { captureRun, CaptureStats, type CaptureOptions } from "../src/pipeline/capture/run.ts"
import { connect, databaseUrl } from "../src/platform/db/Database.ts"
import { ensureDemoAppSchema } from "../src/platform/db/demo-schema.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { parseLsn } from "../src/platform/db/lsn.ts"
import { migrate } from "../src/platform/db/migrate.ts"
import { RESOURCES } from "../src/domain/resources.ts"
import { freePort } from "../test/support/net.ts"
import { fmt, postmasterChildren, table } from "./support.ts"

const { TRANSACTIONS, ROUNDS } = (() => {
  try {
    const { values } = parseArgs({
      options: { transactions: { type: "string", default: "20000" }, rounds: { type: "string", default: "1" } },
      strict: true
    })
    const count = (name: "transactions" | "rounds") => {
      const n = Number(values[name])
      if (!Number.isInteger(n) || n < 1)
        throw new Error(`--${name} must be a whole number, 1 or more, not "${values[name]}"`)
      return n
    }
    return { TRANSACTIONS: count("transactions"), ROUNDS: count("rounds") }
  } catch (e) {
    process.stderr.write(
      `${e instanceof Error ? e.message : String(e)}\nUsage: npm run bench:split [-- --transactions 20000] [--rounds 1]\n`
    )
    process.exit(2)
  }
})()
const CHANGES_PER_TXN = 5
const PER = 100_000

if (process.env.BENCH_DATABASE_URL)
  process.stderr.write("bench:split starts two embedded servers of its own; BENCH_DATABASE_URL is not used\n")

const dirs: string[] = []
const server = async () => {
  const dir = mkdtempSync(join(tmpdir(), "srs-bench-split-"))
  chmodSync(dir, 0o755)
  dirs.push(dir)
  return startEmbedded({
    dataDir: dir,
    port: await freePort(),
    // No checkpoint and no autovacuum during a phase: their full-page images and vacuum WAL
    // would land in whichever phase they happened to fall (the drain leaves more for
    // autovacuum to do with one database, so this understates the split's gain, if anything).
    settings: { max_wal_size: "4GB", shared_buffers: "512MB", checkpoint_timeout: "1h", autovacuum: "off" }
  })
}
const appServer = await server()
const ownServer = await server()
const appAdmin = connect(appServer.url, 2)
const ownAdmin = connect(ownServer.url, 2)

// ---- CPU of a server's processes (Linux: /proc), by kind ----
const postmasterOf = async (sql: postgres.Sql) => {
  const [r] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`
  return readFileSync(`/proc/${r!.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]!
}
const appPostmaster = await postmasterOf(appAdmin)
const ownPostmaster = await postmasterOf(ownAdmin)
type Kind = "backends" | "walsender" | "background"
const cpuOf = (postmaster: string): Map<string, { kind: Kind; ms: number }> =>
  new Map(
    postmasterChildren(postmaster).map(({ pid, cmd, cpuMs }) => {
      // Client backends show "postgres: <user> <database> <address>"; the server's own processes their role.
      const kind: Kind = cmd.includes("walsender")
        ? "walsender"
        : /postgres: (checkpointer|background writer|walwriter|autovacuum|logical replication launcher|io worker)/.test(
              cmd
            )
          ? "background"
          : "backends"
      return [pid, { kind, ms: cpuMs }]
    })
  )
/** CPU milliseconds by kind between two samples (a process that ended meanwhile is not counted: sample before connections end). */
const cpuSince = (before: ReturnType<typeof cpuOf>, after: ReturnType<typeof cpuOf>) => {
  const sum: Record<Kind, number> = { backends: 0, walsender: 0, background: 0 }
  for (const [pid, a] of after) sum[a.kind] += a.ms - (before.get(pid)?.ms ?? 0)
  return sum
}
const walNow = async () =>
  parseLsn((await appAdmin<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)[0]!.lsn)

interface Way {
  readonly name: string
  /** The app's database, on the app's server. */
  readonly app: postgres.Sql
  readonly appUrl: string
  /** Where capture keeps its state: the app's database itself, or the service's own on its own server. */
  readonly service: postgres.Sql
  readonly serviceUrl: string
  readonly split: boolean
}

const makeWay = async (name: string, split: boolean, round: number): Promise<Way> => {
  const db = `bench_${split ? "app" : "one"}_${round}`
  await appAdmin.unsafe(`create database ${db}`)
  const appUrl = databaseUrl(appServer.url, db)
  const app = connect(appUrl, 4)
  await ensureDemoAppSchema(app)
  if (!split) {
    await migrate(app)
    return { name, app, appUrl, service: app, serviceUrl: appUrl, split }
  }
  const own = `bench_own_${round}`
  await ownAdmin.unsafe(`create database ${own}`)
  const serviceUrl = databaseUrl(ownServer.url, own)
  const service = connect(serviceUrl, 10)
  await migrate(service)
  return { name, app, appUrl, service, serviceUrl, split }
}

const startCapture = (w: Way) => {
  const stats = new CaptureStats()
  const opts: CaptureOptions = {
    url: w.serviceUrl,
    ...(w.split ? { app: { url: w.appUrl, sql: w.app } } : {}),
    slot: "bench_split",
    publication: "safety_records_service",
    batchChanges: 2000,
    heartbeatMs: 60_000
  }
  const run = Effect.runFork(captureRun(w.service, opts, stats).pipe(Effect.provide(Logger.layer([]))))
  return { stats, stop: () => Effect.runPromise(Fiber.interrupt(run)).then(() => {}) }
}
const marker = async (w: Way) =>
  parseLsn((await w.app<{ lsn: string }[]>`select pg_logical_emit_message(true, 'bench', '')::text as lsn`)[0]!.lsn)
const until = async (stats: CaptureStats, target: bigint) => {
  while (stats.checkpoint < target) await new Promise((r) => setTimeout(r, 5))
}
const size = async (sql: postgres.Sql) =>
  Number((await sql<{ n: string }[]>`select pg_database_size(current_database())::text as n`)[0]!.n)
const serviceSize = async (sql: postgres.Sql) =>
  Number(
    (
      await sql<{ n: string }[]>`
        select coalesce(sum(pg_total_relation_size(c.oid)), 0)::text as n
        from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'service' and c.relkind in ('r', 'm', 'p')`
    )[0]!.n
  )

/** The bench's workload (bench:capture's): two incidents, a corrective action, two actions' status changed. */
const workload = async (app: postgres.Sql) => {
  const [company] = await app<
    { id: string }[]
  >`insert into app.companies (name, host) values ('Bench', 'bench.test') returning id::text`
  for (const m of RESOURCES)
    await app`insert into app.company_modules (company_id, module) values (${company!.id}, ${m})`
  const companyId = company!.id
  const actions: string[] = []
  const statuses = ["in_progress", "completed", "open", "verified"]
  return async () => {
    for (let i = 0; i < TRANSACTIONS; i++) {
      await app.begin(async (tx) => {
        await tx`
          insert into app.incidents (id, company_id, reference, type, title, description, occurred_at, severity, location, photos)
          values (${randomUUID()}, ${companyId}, ${`INC-${i}`}, 'injury', 'Slipped on stairs', 'Wet stairs near gate 3', now(), 'minor', 'Gate 3', '{never.jpg}'),
                 (${randomUUID()}, ${companyId}, ${`INC-${i}b`}, 'near_miss', 'Dropped tool', 'From scaffold level 2', now(), 'moderate', 'Scaffold', null)`
        const [a] = await tx<{ id: string }[]>`
          insert into app.corrective_actions (company_id, title, description, source, status, priority, owner)
          values (${companyId}, 'Dry the stairs', 'Add mats', 'incident', 'open', 'high', 'Sam') returning id::text`
        actions.push(a!.id)
        const pick = [actions[(i * 7) % actions.length]!, actions[(i * 13 + 1) % actions.length]!]
        if (pick[0] === pick[1]) pick[1] = a!.id
        await tx`update app.corrective_actions set status = ${statuses[i % 4]!}, updated_at = now() where id = any(${pick}::uuid[])`
      })
    }
  }
}

interface Measured {
  readonly writeWal: number
  readonly drainWal: number
  readonly writeCpu: Record<Kind, number>
  readonly drainCpu: Record<Kind, number>
  readonly ownDrainCpu: Record<Kind, number>
  readonly appGrowth: number
  /** The service's schema in the app's database (none with its own database). */
  readonly appServiceBytes: number
  readonly serviceBytes: number
  readonly ownGrowth: number
  readonly drainMs: number
}

const measure = async (w: Way): Promise<Measured> => {
  // The slot, and views of the empty tables.
  {
    const c = startCapture(w)
    await until(c.stats, await marker(w))
    await c.stop()
  }
  const write = await workload(w.app)
  const appSize0 = await size(w.app)
  const ownSize0 = w.split ? await size(w.service) : 0
  await appAdmin`checkpoint`
  const wal0 = await walNow()
  const cpu0 = cpuOf(appPostmaster)
  await write()
  const end = await marker(w)
  const cpu1 = cpuOf(appPostmaster)
  const wal1 = await walNow()
  await appAdmin`checkpoint`
  await ownAdmin`checkpoint`
  const wal2 = await walNow()
  const cpu2 = cpuOf(appPostmaster)
  const own2 = cpuOf(ownPostmaster)
  const t0 = performance.now()
  const c = startCapture(w)
  await until(c.stats, end)
  const drainMs = performance.now() - t0
  // Sampled before capture's connections end.
  const cpu3 = cpuOf(appPostmaster)
  const own3 = cpuOf(ownPostmaster)
  const wal3 = await walNow()
  await c.stop()
  const changes = c.stats.changes
  if (changes < TRANSACTIONS * CHANGES_PER_TXN)
    throw new Error(`capture applied ${changes} changes, fewer than the ${TRANSACTIONS * CHANGES_PER_TXN} written`)
  return {
    writeWal: Number(wal1 - wal0),
    drainWal: Number(wal3 - wal2),
    writeCpu: cpuSince(cpu0, cpu1),
    drainCpu: cpuSince(cpu2, cpu3),
    ownDrainCpu: cpuSince(own2, own3),
    appGrowth: (await size(w.app)) - appSize0,
    appServiceBytes: await serviceSize(w.app),
    serviceBytes: await serviceSize(w.service),
    ownGrowth: w.split ? (await size(w.service)) - ownSize0 : 0,
    drainMs
  }
}

const results: Array<{ one: Measured; split: Measured }> = []
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Alternating which goes first, so neither always meets a warmer server.
    const order = round % 2 === 0 ? [false, true] : [true, false]
    const got: Partial<{ one: Measured; split: Measured }> = {}
    for (const split of order) {
      const w = await makeWay(split ? "service's own database" : "one database", split, round)
      got[split ? "split" : "one"] = await measure(w)
      await w.app`select pg_drop_replication_slot('bench_split')`
      await w.app.end({ timeout: 2 })
      if (w.split) await w.service.end({ timeout: 2 })
    }
    results.push(got as { one: Measured; split: Measured })
  }
} finally {
  await appAdmin.end({ timeout: 2 })
  await ownAdmin.end({ timeout: 2 })
  await appServer.stop()
  await ownServer.stop()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
}

const changes = TRANSACTIONS * CHANGES_PER_TXN
const scale = PER / changes
const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const mb = (bytes: number) => `${fmt((bytes * scale) / 1024 / 1024, 1)} MB`
const ms = (n: number) => `${fmt(n * scale)} ms`
const of = (f: (m: Measured) => number) => ({
  one: median(results.map((r) => f(r.one))),
  split: median(results.map((r) => f(r.split)))
})
const ratio = (v: { one: number; split: number }) => (v.one === 0 ? "-" : `${fmt(v.split / v.one, 2)}×`)
const row = (label: string, v: { one: number; split: number }, unit: (n: number) => string) => [
  label,
  unit(v.one),
  unit(v.split),
  ratio(v)
]

console.log(
  `\nThe app's server, per ${fmt(PER)} row changes captured (${fmt(changes)} written in ${fmt(TRANSACTIONS)} transactions, ${ROUNDS} round${ROUNDS === 1 ? "" : "s"}; medians)\n`
)
const drainWal = of((m) => m.drainWal)
const writeWal = of((m) => m.writeWal)
table([
  ["", "one database", "service's own database", "split / one"],
  row("WAL: capture's drain", drainWal, mb),
  row("WAL: the app's writes", writeWal, mb),
  row(
    "WAL: both",
    of((m) => m.drainWal + m.writeWal),
    mb
  ),
  row(
    "backends' CPU: capture's drain",
    of((m) => m.drainCpu.backends),
    ms
  ),
  row(
    "walsender's CPU: capture's drain",
    of((m) => m.drainCpu.walsender),
    ms
  ),
  row(
    "background CPU: capture's drain",
    of((m) => m.drainCpu.background),
    ms
  ),
  row(
    "backends' CPU: the app's writes",
    of((m) => m.writeCpu.backends),
    ms
  ),
  row(
    "the app's database's growth",
    of((m) => m.appGrowth),
    mb
  ),
  row(
    "  of it the service's schema",
    of((m) => m.appServiceBytes),
    mb
  )
])
if (ROUNDS > 1) {
  console.log(
    "\nEach round (WAL of the drain and of the app's writes, MB per 100,000 changes; one database / its own)\n"
  )
  table([
    ["round", "drain", "writes", "drain", "writes"],
    ...results.map((r, i) => [
      String(i + 1),
      mb(r.one.drainWal),
      mb(r.one.writeWal),
      mb(r.split.drainWal),
      mb(r.split.writeWal)
    ])
  ])
}
console.log("\nThe service's own server (the split only)\n")
table([
  ["", "service's own database"],
  ["its database's growth", mb(median(results.map((r) => r.split.ownGrowth)))],
  ["its schema service", mb(median(results.map((r) => r.split.serviceBytes)))],
  ["its backends' CPU: capture's drain", ms(median(results.map((r) => r.split.ownDrainCpu.backends)))]
])
console.log(
  `\nDrain: ${fmt(changes / (median(results.map((r) => r.one.drainMs)) / 1000))} changes/s with one database, ${fmt(changes / (median(results.map((r) => r.split.drainMs)) / 1000))} with the service's own.`
)
