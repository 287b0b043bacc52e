// Capture throughput, latency and memory, each beside its bare limit in the same run:
//   1. a mixed workload of small transactions is committed while capture is stopped; then
//      capture drains it (row changes/s from WAL to views and outbox), pg_recvlogical decodes
//      the same WAL (decoding alone), and a plain batched write of the same number of changes
//      (append-only insert + keyed upsert per change, 500 per transaction) gives the write limit,
//      three ways: set-based (two statements per 500 changes), per row pipelined, and per row
//      one statement at a time (two statements per change);
//      then ROUNDS (--rounds, 3) more rounds of the workload, drained, then written bare set-based,
//      whose median ratio is the figure (a single pair swings with the machine);
//   2. commit-to-outbox latency at a steady 1,000 changes/s with capture running;
//   3. peak memory while a 20k-row and a 200k-row transaction are applied;
//   4. the heap a job site's rename takes while the views of 2,000 and 20,000 inspections at it are re-shaped.
// Where capture's time goes while it drains the workload is printed beside: its phases (time
// spent waiting for the stream, decoding, preparing a batch, writing one), the CPU time of this
// process and of PostgreSQL's processes (Linux), and each statement's server time
// (pg_stat_statements, loaded into the embedded server).
// Usage: npm run bench:capture [-- --transactions 4000] [--latency-seconds 10] [--rounds 3] [--cpu-profile drain.cpuprofile]
// (--cpu-profile writes a V8 CPU profile of this process while capture drains the workload.)
import { spawn } from "node:child_process"
import { randomUUID } from "node:crypto"
import { parseArgs } from "node:util"
import { readFileSync } from "node:fs"
import { CaptureProfile, PHASES } from "../src/pipeline/capture/profile.ts"
import { Effect, Fiber, Logger } from "effect"
import { captureRun, CaptureStats } from "../src/pipeline/capture/run.ts"
import { formatLsn, parseLsn } from "../src/platform/db/lsn.ts"
import { RESOURCES } from "../src/domain/resources.ts"
import { benchDatabase, fmt, percentile, postmasterChildren, table } from "./support.ts"

const { TRANSACTIONS, LATENCY_SECONDS, ROUNDS, CPU_PROFILE } = (() => {
  try {
    const { values } = parseArgs({
      options: {
        transactions: { type: "string", default: "4000" },
        "latency-seconds": { type: "string", default: "10" },
        rounds: { type: "string", default: "3" },
        "cpu-profile": { type: "string" }
      },
      strict: true
    })
    const count = (name: "transactions" | "latency-seconds" | "rounds") => {
      const n = Number(values[name])
      if (!Number.isInteger(n) || n < 1)
        throw new Error(`--${name} must be a whole number, 1 or more, not "${values[name]}"`)
      return n
    }
    return {
      TRANSACTIONS: count("transactions"),
      LATENCY_SECONDS: count("latency-seconds"),
      ROUNDS: count("rounds"),
      CPU_PROFILE: values["cpu-profile"]
    }
  } catch (e) {
    process.stderr.write(
      `${e instanceof Error ? e.message : String(e)}\nUsage: npm run bench:capture [-- --transactions 4000] [--latency-seconds 10] [--rounds 3] [--cpu-profile FILE]\n`
    )
    process.exit(2)
  }
})()
const CHANGES_PER_TXN = 5

// track_planning: a custom plan evaluates string_to_array over a batch's column as it plans.
const db = await benchDatabase({
  shared_preload_libraries: "pg_stat_statements",
  "pg_stat_statements.track_planning": "on"
})
const { sql, url } = db
const SLOT = "bench_capture"
const statements = await sql`create extension if not exists pg_stat_statements`.then(
  () => true,
  () => false
)

// CPU time of PostgreSQL's processes (the embedded server's children), by kind: Linux only.
const postmaster = await (async () => {
  try {
    const [r] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`
    return readFileSync(`/proc/${r!.pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]!
  } catch {
    return null
  }
})()
const pgCpu = (): Map<string, number> =>
  postmaster === null
    ? new Map()
    : new Map(
        postmasterChildren(postmaster).map(({ pid, cmd, cpuMs }) => [
          pid + (cmd.includes("walsender") ? " walsender" : " backend"),
          cpuMs
        ])
      )
/** Runs `f`; returns its result with the CPU milliseconds this process and PostgreSQL's
 *  walsenders and other processes spent meanwhile. With `processesEnd` (pg_recvlogical's
 *  walsender ends with it) they are sampled every 50 ms so that one that ends counts too;
 *  otherwise only before and after: reading /proc every 50 ms costs this process ~5% of a
 *  core, which capture, bound by its own CPU, would pay and the bare write would not. */
const cpuOf = async <A>(f: () => Promise<A>, options: { processesEnd?: boolean } = {}) => {
  const pg0 = pgCpu()
  const seen = new Map(pg0)
  const sample = () => {
    for (const [k, v] of pgCpu()) seen.set(k, v)
  }
  const timer = options.processesEnd ? setInterval(sample, 50) : undefined
  const node0 = process.cpuUsage()
  try {
    const result = await f()
    const node = process.cpuUsage(node0)
    sample()
    let walsender = 0
    let backends = 0
    for (const [k, v] of seen) {
      const d = v - (pg0.get(k) ?? 0)
      if (k.endsWith("walsender")) walsender += d
      else backends += d
    }
    return { result, cpu: { node: (node.user + node.system) / 1000, walsender, backends } }
  } finally {
    if (timer) clearInterval(timer)
  }
}

const [company] = await sql<
  { id: string }[]
>`insert into app.companies (name, host) values ('Bench', 'bench.test') returning id::text`
const companyId = company!.id
for (const m of RESOURCES) await sql`insert into app.company_modules (company_id, module) values (${companyId}, ${m})`

/** A V8 CPU profile of this process, written where `stop` is told (chrome://inspect, speedscope). */
async function startCpuProfile() {
  const { Session } = await import("node:inspector/promises")
  const { writeFileSync } = await import("node:fs")
  const session = new Session()
  session.connect()
  await session.post("Profiler.enable")
  await session.post("Profiler.setSamplingInterval", { interval: 200 })
  await session.post("Profiler.start")
  return {
    stop: async (file: string) => {
      const { profile } = await session.post("Profiler.stop")
      writeFileSync(file, JSON.stringify(profile))
      session.disconnect()
    }
  }
}

// Capture, run in this process so its memory can be sampled.
let peakRss = 0
// rss() alone: memoryUsage() also walks V8's heap statistics, a cost capture would pay.
const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage.rss())), 20)
const startCapture = (profile?: CaptureProfile) => {
  const stats = new CaptureStats()
  // No log lines (Logger.layer([])): the bench prints its own table.
  const run = Effect.runFork(
    captureRun(
      sql,
      {
        url,
        slot: SLOT,
        publication: "safety_records_service",
        batchChanges: 2000,
        heartbeatMs: 60_000,
        ...(profile ? { profile } : {})
      },
      stats
    ).pipe(Effect.provide(Logger.layer([])))
  )
  return { stats, stop: () => Effect.runPromise(Fiber.interrupt(run)).then(() => {}) }
}
const marker = async () => {
  const [r] = await sql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'bench', '')::text as lsn`
  return parseLsn(r!.lsn)
}
const until = async (stats: CaptureStats, target: bigint) => {
  while (stats.checkpoint < target) await new Promise((r) => setTimeout(r, 2))
}

// Bootstrap once (empty tables) so the slot exists before the workload.
{
  const c = startCapture()
  await until(c.stats, await marker())
  await c.stop()
}
await sql`select pg_create_logical_replication_slot('bench_raw', 'pgoutput')`

// ---- 1. the workload, written while capture is stopped ----
const actions: string[] = []
const statuses = ["in_progress", "completed", "open", "verified"]
const writeTxn = async (i: number, incidentId = randomUUID()) => {
  await sql.begin(async (tx) => {
    await tx`
      insert into app.incidents (id, company_id, reference, type, title, description, occurred_at, severity, location, photos)
      values (${incidentId}, ${companyId}, ${`INC-${i}`}, 'injury', 'Slipped on stairs', 'Wet stairs near gate 3', now(), 'minor', 'Gate 3', '{never.jpg}'),
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
const t0 = performance.now()
for (let i = 0; i < TRANSACTIONS; i++) await writeTxn(i)
const writeMs = performance.now() - t0
const end = await marker()
const totalChanges = TRANSACTIONS * CHANGES_PER_TXN

peakRss = 0
if (statements) await sql`select pg_stat_statements_reset()`
const profile = new CaptureProfile()
const profiler = CPU_PROFILE ? await startCpuProfile() : null
const capture = startCapture(profile)
const c0 = performance.now()
const { cpu: captureCpu } = await cpuOf(() => until(capture.stats, end))
const captureMs = performance.now() - c0
if (profiler) await profiler.stop(CPU_PROFILE!)
const drainBatches = capture.stats.batches
await capture.stop()
const capturePeak = peakRss
// Server time of each statement capture ran while draining (not those of this script).
const statementTimes = statements
  ? await sql<{ query: string; calls: number; ms: number; plan: number; rows: number; wal: number }[]>`
      select regexp_replace(query, '[[:space:]]+', ' ', 'g') as query, calls::int, total_exec_time::float8 as ms, total_plan_time::float8 as plan, rows::int, wal_bytes::float8 as wal
      from pg_stat_statements
      where query !~* 'pg_stat_statements|pg_logical_emit_message|pg_catalog|pg_replication|pg_publication|application_name|pg_backend_pid'
      order by total_exec_time + total_plan_time desc limit 9`
  : []

const endText = formatLsn(end)
const r0 = performance.now()
const { cpu: recvCpu } = await cpuOf(
  () =>
    new Promise<void>((resolve, reject) => {
      const p = spawn(
        "pg_recvlogical",
        [
          "-d",
          url,
          "--slot",
          "bench_raw",
          "--start",
          "--endpos",
          endText,
          "-o",
          "proto_version=1",
          "-o",
          "publication_names=safety_records_service",
          "-f",
          "/dev/null",
          "--no-loop"
        ],
        { stdio: ["ignore", "ignore", "pipe"] }
      )
      let err = ""
      p.stderr.on("data", (d) => (err += d))
      p.on("exit", (code) => (code === 0 ? resolve() : reject(new Error(`pg_recvlogical exited ${code}: ${err}`))))
      p.on("error", reject)
    }),
  { processesEnd: true }
)
const recvMs = performance.now() - r0
await sql`select pg_drop_replication_slot('bench_raw')`

// The bare write: per change one append-only insert and one keyed upsert, 500 per transaction.
await sql`create table public.bare_append (id bigserial primary key, k text not null, body text not null)`
await sql`create table public.bare_keyed (k text primary key, body text not null)`
const [sample] = await sql<{ body: string }[]>`select body from service.views where resource = 'incidents' limit 1`
const body = sample!.body
/** The set-based bare write of `totalChanges` changes, keys under `prefix`: half of them new,
 *  half written again (as capture's workload: inserts and updates); returns its milliseconds. */
const bareSetBased = async (prefix: string) => {
  const b0 = performance.now()
  for (let done = 0; done < totalChanges; done += 500) {
    const rows = Array.from({ length: Math.min(500, totalChanges - done) }, (_, j) => ({
      k: `${prefix}${(done + j) % (totalChanges / 2)}`,
      body
    }))
    const json = JSON.stringify(rows)
    await sql.begin(async (tx) => {
      await tx`insert into public.bare_append (k, body) select k, body from json_to_recordset(${json}::text::json) as x(k text, body text)`
      await tx`insert into public.bare_keyed (k, body) select distinct on (k) k, body from json_to_recordset(${json}::text::json) as x(k text, body text)
               on conflict (k) do update set body = excluded.body`
    })
  }
  return performance.now() - b0
}
const { result: bareMs, cpu: bareCpu } = await cpuOf(() => bareSetBased("r"))

// The same rows written the plain way docs/benchmarks.md#capture words its baseline: per change one
// insert statement and one upsert statement, 500 changes per transaction.
await sql`truncate public.bare_append, public.bare_keyed`
const p0 = performance.now()
for (let done = 0; done < totalChanges; done += 500) {
  await sql.begin(async (tx) => {
    for (let j = 0; j < Math.min(500, totalChanges - done); j++) {
      const k = `r${(done + j) % (totalChanges / 2)}`
      await tx`insert into public.bare_append (k, body) values (${k}, ${body})`
      await tx`insert into public.bare_keyed (k, body) values (${k}, ${body}) on conflict (k) do update set body = excluded.body`
    }
  })
}
const perRowMs = performance.now() - p0

// The same statements pipelined: each transaction's 1,000 statements sent without waiting for
// each answer (postgres.js pipelines queries on a connection), so round trips do not set the pace.
await sql`truncate public.bare_append, public.bare_keyed`
const q0 = performance.now()
for (let done = 0; done < totalChanges; done += 500) {
  await sql.begin((tx) => {
    const statements: Array<Promise<unknown>> = []
    for (let j = 0; j < Math.min(500, totalChanges - done); j++) {
      const k = `r${(done + j) % (totalChanges / 2)}`
      statements.push(tx`insert into public.bare_append (k, body) values (${k}, ${body})`.execute())
      statements.push(
        tx`insert into public.bare_keyed (k, body) values (${k}, ${body}) on conflict (k) do update set body = excluded.body`.execute()
      )
    }
    return Promise.all(statements)
  })
}
const pipelinedMs = performance.now() - q0

// ---- 1b. rounds: the same workload again, drained, then written bare, in turn ----
// One ~1 s drain beside one ~0.75 s write swings by +-5% with the machine, and the first drain
// also pays V8 compiling capture's code: the ratio docs/benchmarks.md#capture reports is the median of these rounds
// (the workload's updates again on corrective actions made a few transactions before). A
// round's drain is timed from the first change received: a restarted walsender first re-reads
// the WAL after the slot's restart point (back to the last running-transactions record, up to
// ~15 s), which is a restart's cost, not throughput.
const rounds: Array<{ capture: number; bare: number; cpu: number }> = []
for (let round = 0; round < ROUNDS; round++) {
  actions.length = 0
  for (let i = 0; i < TRANSACTIONS; i++) await writeTxn(10_000_000 + round * TRANSACTIONS + i)
  const target = await marker()
  const roundProfile = new CaptureProfile()
  const c = startCapture(roundProfile)
  while ((roundProfile.ms.get(PHASES.decode) ?? 0) === 0) await new Promise((r) => setTimeout(r, 1))
  const w0 = performance.now()
  const { cpu } = await cpuOf(() => until(c.stats, target))
  const captureRoundMs = performance.now() - w0
  await c.stop()
  rounds.push({ capture: captureRoundMs, bare: await bareSetBased(`w${round}-`), cpu: cpu.node })
}
const median = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50
  )

// ---- 2. latency at 1,000 changes/s ----
const live = startCapture()
await until(live.stats, await marker())
const sent = new Map<string, number>()
const latencies: number[] = []
let lastLsn = "0/0"
const listener = await sql.listen("service_events", async () => {
  const now = performance.now()
  const rows = await sql<{ record_id: string; lsn: string }[]>`
    select record_id::text, commit_lsn::text as lsn from service.events
    where event = 'incident.created' and commit_lsn > ${lastLsn}::pg_lsn order by commit_lsn`
  for (const r of rows) {
    const t = sent.get(r.record_id)
    if (t !== undefined) {
      latencies.push(now - t)
      sent.delete(r.record_id)
    }
    lastLsn = r.lsn
  }
})
const perSecond = 1000 / CHANGES_PER_TXN
const l0 = performance.now()
for (let i = 0; i < perSecond * LATENCY_SECONDS; i++) {
  const due = l0 + (i * 1000) / perSecond
  const wait = due - performance.now()
  if (wait > 0) await new Promise((r) => setTimeout(r, wait))
  const id = randomUUID()
  await writeTxn(TRANSACTIONS + i, id)
  sent.set(id, performance.now())
}
const achieved = (perSecond * LATENCY_SECONDS * CHANGES_PER_TXN) / ((performance.now() - l0) / 1000)
const deadline = Date.now() + 10_000
while (sent.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
await listener.unlisten()
latencies.sort((a, b) => a - b)

// ---- 3. memory for a huge transaction ----
const bigTxn = async (rows: number) => {
  const target0 = await marker()
  await until(live.stats, target0)
  const rssBefore = process.memoryUsage().rss
  peakRss = rssBefore
  const m0 = performance.now()
  await sql.begin(async (tx) => {
    await tx`insert into app.observations (company_id, type, title, description, observed_at, reported_via)
             select ${companyId}, 'unsafe_condition', 'Bulk ' || g, repeat('x', 200), now(), 'app' from generate_series(1, ${rows}) g`
  })
  await until(live.stats, await marker())
  return { rows, ms: performance.now() - m0, rssBefore, peak: peakRss }
}
const small = await bigTxn(20_000)
const big = await bigTxn(200_000)

// ---- 4. memory for a job site renamed with many inspections at it ----
// The rename shows in every inspection's view at the site (its equipment's site name): the
// heap above its level before, at its peak while capture re-shapes them, for two sizes.
let peakHeap = 0
const heapSampler = setInterval(() => (peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed)), 20)
const siteRename = async (inspections: number) => {
  const [site] = await sql<
    { id: string }[]
  >`insert into app.job_sites (company_id, name) values (${companyId}, 'Bench site') returning id::text`
  const eq = await sql<{ id: string }[]>`
    insert into app.equipment (company_id, name, identifier, category, job_site_id)
    select ${companyId}, 'Bench crane ' || g, 'BC-' || g, 'lifting', ${site!.id} from generate_series(1, 4) g returning id::text`
  await sql`
    with i as (
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome, notes)
      select ${companyId}, (${eq.map((e) => e.id)}::uuid[])[1 + g % 4], 'Daily checks', 'Bench', now(), 'pass', repeat('n', 100)
      from generate_series(1, ${inspections}) g returning id)
    insert into app.inspection_items (inspection_id, position, item, result)
    select i.id, p, 'Check ' || p, 'pass' from i, generate_series(1, 4) p`
  await until(live.stats, await marker())
  const heapBefore = process.memoryUsage().heapUsed
  peakHeap = heapBefore
  const r0 = performance.now()
  await sql`update app.job_sites set name = 'Bench site renamed' where id = ${site!.id}`
  await until(live.stats, await marker())
  return { inspections, ms: performance.now() - r0, heapBefore, peak: peakHeap }
}
const renames = [await siteRename(2_000), await siteRename(20_000)]
clearInterval(heapSampler)
await live.stop()
clearInterval(sampler)
const [outbox] = await sql<{ n: number }[]>`select count(*)::int as n from service.events`
const outboxRows = outbox!.n

const mb = (b: number) => `${fmt(b / 1024 / 1024, 0)} MB`
console.log(
  `\nbench/capture: ${TRANSACTIONS} transactions of ${CHANGES_PER_TXN} row changes (${fmt(totalChanges)} changes), written in ${fmt(writeMs / 1000, 1)} s; drained in ${drainBatches} batches; outbox now ${fmt(outboxRows)} events\n`
)
const rate = (ms: number) => fmt(totalChanges / (ms / 1000))
table([
  ["throughput", "row changes/s", "capture / this"],
  ["capture: WAL -> mirror + views + outbox + checkpoint", rate(captureMs), "1.00"],
  ["pg_recvlogical: decoding alone", rate(recvMs), fmt(recvMs / captureMs, 2)],
  ["bare write, set-based (insert..select + upsert..select, 500/txn)", rate(bareMs), fmt(bareMs / captureMs, 2)],
  [
    "bare write, per row, pipelined (insert + upsert statement each, 500/txn)",
    rate(pipelinedMs),
    fmt(pipelinedMs / captureMs, 2)
  ],
  [
    "bare write, per row, one at a time (insert + upsert statement each, 500/txn)",
    rate(perRowMs),
    fmt(perRowMs / captureMs, 2)
  ]
])
console.log("")
table([
  [
    "rounds: the workload again, drained, then written bare",
    "capture, changes/s",
    "its CPU, ms",
    "bare set-based, changes/s",
    "capture / bare"
  ],
  ...rounds.map((w, i) => [`round ${i + 1}`, rate(w.capture), fmt(w.cpu), rate(w.bare), fmt(w.bare / w.capture, 2)]),
  [
    "median (the figure docs/benchmarks.md#capture reports)",
    rate(median(rounds.map((w) => w.capture))),
    fmt(median(rounds.map((w) => w.cpu))),
    rate(median(rounds.map((w) => w.bare))),
    fmt(median(rounds.map((w) => w.bare / w.capture)), 2)
  ]
])
console.log("")
const phases = Object.values(PHASES).map((phase) => [phase, profile.ms.get(phase) ?? 0] as const)
table([
  ["capture draining: time by phase (prepare and write overlap)", "ms", "per 1,000 changes"],
  ["wall time", fmt(captureMs), fmt(captureMs / (totalChanges / 1000), 1)],
  ...phases.map(([phase, ms]) => [phase, fmt(ms), fmt(ms / (totalChanges / 1000), 1)])
])
console.log("")
const cpuRow = (name: string, c: { node: number; walsender: number; backends: number }) => [
  name,
  fmt(c.node),
  postmaster === null ? "-" : fmt(c.walsender),
  postmaster === null ? "-" : fmt(c.backends),
  postmaster === null ? "-" : fmt(c.node + c.walsender + c.backends)
]
table([
  ["CPU time (ms) for the same changes", "this process", "pg walsender", "pg backends", "total"],
  cpuRow("capture (decode, prepare, write)", captureCpu),
  cpuRow("pg_recvlogical: decoding alone", recvCpu),
  cpuRow("bare write, set-based", bareCpu)
])
if (statementTimes.length > 0) {
  console.log("")
  table([
    [
      "capture's statements while draining (server time, pg_stat_statements)",
      "calls",
      "rows",
      "exec ms",
      "plan ms",
      "WAL MB"
    ],
    ...statementTimes.map((r) => [
      r.query.slice(0, 90),
      fmt(r.calls),
      fmt(r.rows),
      fmt(r.ms),
      fmt(r.plan),
      fmt(r.wal / 1024 / 1024, 1)
    ])
  ])
}
console.log("")
table([
  ["latency (commit -> outbox visible)", "value"],
  ["offered load (changes/s)", fmt(achieved)],
  ["transactions measured", fmt(latencies.length)],
  ["p50 (ms)", fmt(percentile(latencies, 50), 1)],
  ["p99 (ms)", fmt(percentile(latencies, 99), 1)],
  ["max (ms)", fmt(latencies[latencies.length - 1] ?? NaN, 1)]
])
console.log("")
table([
  ["memory", "rows", "applied in", "RSS before", "peak RSS"],
  ["capture draining the workload", fmt(totalChanges), `${fmt(captureMs / 1000, 1)} s`, "-", mb(capturePeak)],
  ["one transaction", fmt(small.rows), `${fmt(small.ms / 1000, 1)} s`, mb(small.rssBefore), mb(small.peak)],
  ["one transaction", fmt(big.rows), `${fmt(big.ms / 1000, 1)} s`, mb(big.rssBefore), mb(big.peak)]
])
console.log("")
table([
  [
    "job site renamed (its inspections' views re-shaped)",
    "inspections",
    "applied in",
    "V8 heap before",
    "heap peak above before"
  ],
  ...renames.map((r) => [
    "one rename",
    fmt(r.inspections),
    `${fmt(r.ms / 1000, 1)} s`,
    mb(r.heapBefore),
    mb(r.peak - r.heapBefore)
  ])
])
await db.close()
process.exit(0)
