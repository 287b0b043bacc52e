// bench:scale: one big company, as the operator of a large customer meets it. The app imports N
// corrective actions and N/5 workers (or --workers) in import-sized transactions (50,000 rows
// each) into a database that also holds the demo's small companies; the service, as `npm start`
// runs it, captures them. Then, for --rounds rounds: changes in small transactions, and one
// import-sized transaction, each written while capture's mirror writes wait behind a lock and
// timed from its release (capture's drain alone, with the CPU the service and PostgreSQL spent
// on it): the import's rate against the small transactions' in the same run. Then the read API,
// one request at a time, right after the import and again a minute later: each list filter (a
// created-date window, status, name, and names common in the company that none of its newest
// 5,000 workers has), sort=updatedAt with updatedAfter, a deep keyset walk, a get by id and the
// deletions feed.
// Prints capture time and rate, the service's and the app's bytes per record (tables and
// indexes, each schema in its own database), the service's RSS, and p50/p99 per query.
//
//   npm run bench:scale                          1,000,000 records (and 200,000 workers)
//   npm run bench:scale -- --records 100000 --batch 50000 --requests 100
//   npm run bench:scale -- --records 200000 --workers 200000   the name filter at 200,000 workers
//   BENCH_DATABASE_URL=... npm run bench:scale   on that server (a database of its own, dropped after)
// At a million records use a server of your own: the embedded one keeps at most 4 GB of WAL for
// a slot that lags (src/platform/db/embedded.ts), its WAL carries the service's own writes too
// (both databases on one server), and an import that size passes that while capture catches
// up: the slot is lost and capture rebuilds the views (without their events), as it says.
import { type ChildProcess, spawn } from "node:child_process"
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import postgres from "postgres"
import { databaseUrl as serviceDatabaseUrl, EMBEDDED_SERVICE_DATABASE } from "../src/platform/db/Database.ts"
import { embeddedUrl } from "../src/platform/db/embedded.ts"
import { freePort } from "../test/support/net.ts"
import { fmt, percentile, startCommand, table } from "./support.ts"

const USAGE =
  "usage: npm run bench:scale -- [--records N] [--workers N] [--batch N] [--requests N] [--small-changes N] [--settle-seconds N] [--rounds N] [--in-order]"
const args = (() => {
  try {
    return parseArgs({
      options: {
        records: { type: "string", default: "1000000" },
        workers: { type: "string" },
        batch: { type: "string", default: "50000" },
        requests: { type: "string", default: "200" },
        "small-changes": { type: "string", default: "50000" },
        "settle-seconds": { type: "string", default: "60" },
        "in-order": { type: "boolean", default: false },
        rounds: { type: "string", default: "3" }
      },
      strict: true
    }).values
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`)
    process.exit(2)
  }
})()
const int = (name: keyof typeof args, min = 1, fallback?: number): number => {
  if (args[name] === undefined && fallback !== undefined) return fallback
  const n = Number(args[name])
  if (!Number.isInteger(n) || n < min) {
    console.error(`--${name} must be an integer of at least ${min}, not ${args[name]}\n${USAGE}`)
    process.exit(2)
  }
  return n
}
const RECORDS = int("records", 1000)
const BATCH = int("batch", 100)
const REQUESTS = int("requests", 10)
const SMALL_CHANGES = int("small-changes", 1000)
const SETTLE_SECONDS = int("settle-seconds", 0)
const ROUNDS = int("rounds", 1)
// Records created in time order, as an app creating them live does (each 30 s after the one
// before), rather than spread over two years in a sawtooth as a backfilled import might be.
const IN_ORDER = args["in-order"] === true
const WORKERS = int("workers", 1000, Math.floor(RECORDS / 5))
const SMALL_TXN_ROWS = 10
const HOST = "big.localhost"

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`)

const children = new Set<ChildProcess>()
const run = (file: string, argv: ReadonlyArray<string>, env: NodeJS.ProcessEnv) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [file, ...argv], { cwd: ROOT, env, stdio: ["ignore", "pipe", "pipe"] })
    children.add(child)
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("exit", (code) => {
      children.delete(child)
      code === 0 ? resolve(out) : reject(new Error(`${file} ${argv.join(" ")} exited ${code}: ${err}${out}`))
    })
  })

const rssMb = (pid: number): number => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) / 1024 : NaN
  } catch {
    return NaN
  }
}

/** Fields of /proc/<pid>/stat after the command's name (state, ppid, ... utime at 11, stime at 12), or null. */
const procStat = (pid: number): string[] | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  } catch {
    return null
  }
}

const caughtUp = async (lsn: string) => {
  for (;;) {
    const [r] = await own!<{ done: boolean }[]>`
      select coalesce(bool_and(checkpoint_lsn >= ${lsn}::pg_lsn), false) as done from service.capture_state`
    if (r!.done) return
    await new Promise((r) => setTimeout(r, 200))
  }
}
const currentLsn = async () => (await sql!<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)[0]!.lsn

const dir = mkdtempSync(join(tmpdir(), "srs-scale-"))
chmodSync(dir, 0o755)
let service: ChildProcess | undefined
let sql: postgres.Sql | undefined
/** The service's own database (the embedded server's beside the app's; the same database on BENCH_DATABASE_URL). */
let own: postgres.Sql | undefined
let dropDatabase: (() => Promise<void>) | undefined
try {
  const httpPort = await freePort()
  const opsPort = await freePort()
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: dir,
    PORT: String(httpPort),
    OPS_PORT: String(opsPort),
    LOG_LEVEL: "warn"
  }
  delete env.NODE_OPTIONS
  // A database of the run's own on BENCH_DATABASE_URL's server, or the embedded one under DATA_DIR.
  let databaseUrl: string
  if (process.env.BENCH_DATABASE_URL) {
    const admin = postgres(process.env.BENCH_DATABASE_URL, { max: 1, onnotice: () => {} })
    const name = `srs_scale_${process.pid}`
    await admin.unsafe(`create database ${name}`)
    const url = new URL(process.env.BENCH_DATABASE_URL)
    url.pathname = `/${name}`
    databaseUrl = url.toString()
    env.DATABASE_URL = databaseUrl
    env.REPLICATION_SLOT = name
    dropDatabase = async () => {
      await admin`select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = ${name}`
      await admin.unsafe(`drop database if exists ${name} with (force)`)
      await admin.end()
    }
  } else {
    const pgPort = await freePort()
    env.EMBEDDED_PG_PORT = String(pgPort)
    delete env.DATABASE_URL
    databaseUrl = ""
  }

  log("seeding the demo's small companies (node src/faces/cli/seed.ts)...")
  await run("src/faces/cli/seed.ts", [], env)

  const command = startCommand()
  for (const step of command.before) await run(step[0]!, step.slice(1), env)
  log(`starting the service (node ${command.args.join(" ")})...`)
  service = spawn(process.execPath, command.args, {
    cwd: ROOT,
    env: { ...env, ...command.env, API_RATE_LIMIT: "1000000" },
    stdio: ["ignore", "inherit", "inherit"]
  })
  children.add(service)
  const pid = service.pid!
  const base = `http://127.0.0.1:${httpPort}`
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://127.0.0.1:${opsPort}/readyz`, { signal: AbortSignal.timeout(2000) }).then(
      async (r) => r.ok && ((await r.json()) as { capture?: { streaming?: boolean } }).capture?.streaming === true,
      () => false
    )
    if (ok) break
    if (i > 1200) throw new Error("the service did not become ready")
    await new Promise((r) => setTimeout(r, 100))
  }
  // The embedded server runs under the service now.
  if (databaseUrl === "")
    databaseUrl = embeddedUrl(readFileSync(join(dir, "pg-password"), "utf8").trim(), Number(env.EMBEDDED_PG_PORT))
  sql = postgres(databaseUrl, { max: 4, onnotice: () => {} })
  own = process.env.BENCH_DATABASE_URL
    ? sql
    : postgres(serviceDatabaseUrl(databaseUrl, EMBEDDED_SERVICE_DATABASE), { max: 2, onnotice: () => {} })
  // The big company, every module on, an admin to make its key.
  const [company] = await sql<{ id: string }[]>`
    insert into app.companies (name, host, tier, api_enabled) values ('Big Co', ${HOST}, 'company', true) returning id::text`
  const companyId = company!.id
  await sql`
    insert into app.company_modules (company_id, module, enabled)
    select ${companyId}, m, true from unnest(array['incidents', 'observations', 'corrective-actions', 'audits',
      'inspections', 'training-records', 'workers', 'job-sites', 'changes', 'permits', 'policies', 'sds',
      'risk-assessments', 'subcontractors']) m`
  await sql`insert into app.users (company_id, name, email, role) values (${companyId}, 'Admin', 'admin@big.example', 'admin')`

  await caughtUp(await currentLsn())
  const created = JSON.parse(
    await run(
      "src/faces/cli/admin.ts",
      [
        "keys",
        "create",
        "--company",
        HOST,
        "--name",
        "scale bench",
        "--read",
        "all",
        "--as",
        "admin@big.example"
      ].concat("--json"),
      env
    )
  ) as { key: string }

  // RSS, sampled every 500 ms for the whole run.
  const rss: number[] = []
  const sampler = setInterval(() => rss.push(rssMb(pid)), 500)

  // Rows as the app writes them: values spread so filters select a realistic share.
  const createdAt = (tx: postgres.TransactionSql | postgres.Sql) =>
    IN_ORDER
      ? tx`timestamptz '2024-01-01' + i * interval '30 seconds'`
      : tx`timestamptz '2024-01-01' + (i % 700) * interval '1 day' + (i % 86400) * interval '1 second'`
  const insertWorkers = (tx: postgres.TransactionSql, from: number, count: number) => tx`
    insert into app.workers (company_id, name, job_title, employer, status, created_at, updated_at)
    select ${companyId}, (array['Ann','Bo','Chen','Dara','Eli','Fay','Gus','Hana','Ivo','Jun'])[1 + i % 10] || ' ' ||
             (array['Smith','Okafor','Larsen','Moreau','Tanaka','Silva','Novak','Haddad'])[1 + (i / 10) % 8] || ' ' || i,
           'Operator', 'Big Co', case when i % 7 = 0 then 'inactive' else 'active' end,
           ${createdAt(tx)}, ${createdAt(tx)}
    from generate_series(${from}::int, ${from + count - 1}::int) i`
  const insertActions = (tx: postgres.TransactionSql | postgres.Sql, from: number, count: number) => tx`
    insert into app.corrective_actions (company_id, title, description, source, status, priority, due_date,
      completed_at, owner, created_at, updated_at)
    select ${companyId}, 'Action ' || i, 'Fix the guard rail on level ' || (i % 40),
           (array['incident','observation','audit','inspection','change','maturity_gap','gap_analysis_import','manual','assistant'])[1 + i % 9],
           (array['open','in_progress','completed','verified'])[1 + i % 4],
           (array['low','medium','high','critical'])[1 + (i / 4) % 4],
           timestamptz '2024-02-01' + (i % 700) * interval '1 day',
           case when i % 4 >= 2 then timestamptz '2024-03-01' + (i % 700) * interval '1 day' end,
           'Owner ' || (i % 300),
           ${createdAt(tx)}, ${createdAt(tx)}
    from generate_series(${from}::int, ${from + count - 1}::int) i`

  // With the CPU the service's process and PostgreSQL's spent meanwhile (Linux): on a machine
  // shared with other work, CPU per change says more than a rate.
  const [backend] = await own!<{ pid: number }[]>`select pg_backend_pid() as pid`
  const postmaster = procStat(backend!.pid)?.[1] ?? null
  const cpuMs = () => {
    let total = 0
    for (const p of readdirSync("/proc")) {
      if (!/^\d+$/.test(p)) continue
      const f = procStat(Number(p))
      if (f !== null && (Number(p) === pid || f[1] === postmaster)) total += (Number(f[11]) + Number(f[12])) * 10
    }
    return total
  }
  // 1. The import.
  log(`importing ${fmt(WORKERS)} workers and ${fmt(RECORDS)} corrective actions, ${fmt(BATCH)} rows a transaction...`)
  const importStart = performance.now()
  const importCpu0 = cpuMs()
  for (let from = 0; from < WORKERS; from += BATCH)
    await sql.begin((tx) => insertWorkers(tx, from, Math.min(BATCH, WORKERS - from)))
  for (let from = 0; from < RECORDS; from += BATCH)
    await sql.begin((tx) => insertActions(tx, from, Math.min(BATCH, RECORDS - from)))
  const importWritten = performance.now()
  await caughtUp(await currentLsn())
  const importCaptured = performance.now()
  const importCpu = cpuMs() - importCpu0
  const importChanges = RECORDS + WORKERS
  log(
    `written in ${fmt((importWritten - importStart) / 1000, 1)} s; captured in ${fmt((importCaptured - importStart) / 1000, 1)} s`
  )

  // 2. Small transactions against one import-sized transaction, each drained alone, same run.
  // Capture waits behind a lock while the app writes, so what is timed, from the lock's release
  // to the checkpoint past the last commit, is capture's drain alone (timed with the writes,
  // small transactions would measure the writers). The lock keeps even reads of the mirror out:
  // a batch and a large transaction both read it first (an import of new records writes none).
  const drained = async (write: () => Promise<void>) => {
    const hold = await own!.reserve()
    try {
      await hold`begin`
      await hold`lock table service.rows in access exclusive mode`
      await write()
      const lsn = await currentLsn()
      const cpu0 = cpuMs()
      const t0 = performance.now()
      await hold`commit`
      await caughtUp(lsn)
      return { seconds: (performance.now() - t0) / 1000, cpu: cpuMs() - cpu0 }
    } finally {
      hold.release()
    }
  }
  log(
    `${ROUNDS} rounds: ${fmt(SMALL_CHANGES)} changes in transactions of ${SMALL_TXN_ROWS}, then one transaction of ${fmt(BATCH)}, each drained alone...`
  )
  const writers = 4
  let next = RECORDS
  const rounds: Array<{ small: number; big: number; smallCpu: number; bigCpu: number }> = []
  for (let round = 0; round < ROUNDS; round++) {
    const end = next + SMALL_CHANGES
    const { seconds: small, cpu: smallCpu } = await drained(async () => {
      await Promise.all(
        Array.from({ length: writers }, async () => {
          for (;;) {
            const from = next
            if (from >= end) return
            next += Math.min(SMALL_TXN_ROWS, end - from)
            await insertActions(sql!, from, Math.min(SMALL_TXN_ROWS, end - from))
          }
        })
      )
    })
    const from = next
    next += BATCH
    const { seconds: big, cpu: bigCpu } = await drained(async () => {
      await sql!.begin((tx) => insertActions(tx, from, BATCH))
    })
    rounds.push({ small, big, smallCpu, bigCpu })
    log(
      `round ${round + 1}: small ${fmt(SMALL_CHANGES / small)}/s, one transaction ${fmt(BATCH / big)}/s, ratio ${fmt(BATCH / big / (SMALL_CHANGES / small), 2)}`
    )
  }
  // Deletions for the deletions feed: 1% of the actions, a few hundred at a time.
  const deleteCount = Math.max(100, Math.floor(RECORDS / 100))
  for (let done = 0; done < deleteCount; done += 500)
    await sql`
      delete from app.corrective_actions where id in (
        select id from app.corrective_actions where company_id = ${companyId} and title like 'Action %'
        order by id limit ${Math.min(500, deleteCount - done)})`
  await caughtUp(await currentLsn())
  const capturedAt = performance.now()

  // 3. Sizes: the service's schema against the app's tables.
  // Each schema in its own database (the service's and the app's are apart by default).
  const sizesOf = (db: postgres.Sql, schema: string) => db<
    { schema: string; rel: string; table_bytes: string; index_bytes: string }[]
  >`
    select n.nspname as schema, c.relname as rel, pg_table_size(c.oid)::text as table_bytes,
           pg_indexes_size(c.oid)::text as index_bytes
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = ${schema} and c.relkind in ('r', 'p')`
  const sizes = [...(await sizesOf(own!, "service")), ...(await sizesOf(sql, "app"))]
  // Each index of the service's schema: where the index bytes go, and how full its leaf pages
  // are (pgstattuple, in this throwaway database; a B-tree fed at one end of a key range keeps
  // its pages full, one fed in random places about 70% full, at the wrong end half).
  const density = await own!`create extension if not exists pgstattuple`.then(
    () => true,
    () => false
  )
  const indexSizes = await own!<{ rel: string; bytes: string; density: number | null }[]>`
    select c.relname as rel, pg_relation_size(c.oid)::text as bytes,
           ${density ? own!`case when am.amname = 'btree' then (pgstatindex(c.oid::regclass)).avg_leaf_density end` : own!`null::float8`} as density
    from pg_class c join pg_namespace n on n.oid = c.relnamespace join pg_am am on am.oid = c.relam
    where n.nspname = 'service' and c.relkind = 'i'
    order by pg_relation_size(c.oid) desc limit 12`
  const records = next - deleteCount + WORKERS
  const sum = (schema: string, column: "table_bytes" | "index_bytes") =>
    sizes.filter((s) => s.schema === schema).reduce((n, s) => n + Number(s[column]), 0)
  const perRecord = (bytes: number) => `${fmt(bytes / records)} B`

  // 4. The read API, one request at a time.
  const headers = { host: HOST, authorization: `Bearer ${created.key}` }
  const timed = async (path: string) => {
    const t0 = performance.now()
    const r = await fetch(`${base}${path}`, { headers })
    const body = await r.text()
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${body.slice(0, 300)}`)
    return { ms: performance.now() - t0, body }
  }
  const ids = (
    await sql<{ id: string }[]>`
      select id::text from app.corrective_actions where company_id = ${companyId} order by random() limit ${REQUESTS}`
  ).map((r) => r.id)
  // Names common in the company (each at least a thousand workers' and a thousandth of them)
  // that none of its newest 5,000 workers has, the name filter's costly case (docs/design.md,
  // "A list's plan does not wait for statistics"): the names follow the creation date, so
  // which ones they are depends on the data's size and order, and is looked up here.
  const firsts = ["ann", "bo", "chen", "dara", "eli", "fay", "gus", "hana", "ivo", "jun"]
  const lasts = ["smith", "okafor", "larsen", "moreau", "tanaka", "silva", "novak", "haddad"]
  const candidates = [
    ...firsts.flatMap((f) => lasts.map((l) => `${f} ${l}`)),
    ...lasts.flatMap((l) => Array.from({ length: 9 }, (_, d) => `${l} ${d + 1}`))
  ]
  const absent = (
    await sql<{ p: string }[]>`
      with newest as (
        select lower(name) as name from app.workers where company_id = ${companyId}
         order by created_at desc, id desc limit 5000),
      counts as (
        select c.p, count(*) as n from unnest(${candidates}::text[]) c(p)
          join app.workers w on w.company_id = ${companyId} and lower(w.name) like '%' || c.p || '%'
         group by c.p)
      select p from counts
       where n >= greatest(1000, ${WORKERS} / 1000)
         and not exists (select 1 from newest where newest.name like '%' || counts.p || '%')
       order by p`
  ).map((r) => r.p)
  log(`common names none of the newest 5,000 workers has: ${absent.length === 0 ? "none" : absent.join(", ")}`)
  const day = (i: number) => new Date(Date.UTC(2024, 0, 1) + (i % 700) * 86_400_000).toISOString().slice(0, 10)
  const queries: Array<[string, (i: number) => string]> = [
    [
      "created-date window",
      (i) => `/api/v1/corrective-actions?createdAfter=${day(i * 7)}&createdBefore=${day(i * 7 + 30)}`
    ],
    ["status=open", () => "/api/v1/corrective-actions?status=open"],
    ["status=closed", () => "/api/v1/corrective-actions?status=closed"],
    ["status=verified", () => "/api/v1/corrective-actions?status=verified"],
    ["workers name=", (i) => `/api/v1/workers?name=${["ann", "okafor", "chen s", "fay", "novak 1"][i % 5]}`],
    ...(absent.length === 0
      ? []
      : [
          [
            "workers name= (common, not among the newest 5,000)",
            (i: number) => `/api/v1/workers?name=${encodeURIComponent(absent[i % absent.length]!)}`
          ] as [string, (i: number) => string]
        ]),
    ["sort=updatedAt&updatedAfter", (i) => `/api/v1/corrective-actions?sort=updatedAt&updatedAfter=${day(i * 3)}`],
    ["get by id", (i) => `/api/v1/corrective-actions/${ids[i % ids.length]}`],
    ["deletions feed", () => "/api/v1/deletions?limit=200"]
  ]
  // The queries take turns, request by request, so that a burst of the machine's other work
  // falls on all of them alike; the first line, the key check alone, is the run's floor.
  const measure = async () => {
    const all: Array<[string, (i: number) => string]> = [
      ["floor: GET /api/v1 (the key check alone)", () => "/api/v1"],
      ...queries
    ]
    const ms = all.map((): number[] => [])
    // A deep keyset walk: page after page of 200, newest first (from the top again at the end).
    const walk: number[] = []
    let cursor: string | null = null
    for (let i = 0; i < REQUESTS; i++) {
      for (let q = 0; q < all.length; q++) ms[q]!.push((await timed(all[q]![1](i))).ms)
      const r = await timed(
        `/api/v1/corrective-actions?limit=200${cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`}`
      )
      walk.push(r.ms)
      cursor = (JSON.parse(r.body) as { nextCursor: string | null }).nextCursor
    }
    const rows: Array<[string, number[]]> = all.map(([name], q) => [name, ms[q]!.sort((a, b) => a - b)])
    rows.push([`keyset walk (${walk.length} pages of 200)`, walk.sort((a, b) => a - b)])
    return rows
  }
  log("the read API right after the import...")
  const right = await measure()
  log(`again ${SETTLE_SECONDS} s later...`)
  await new Promise((r) => setTimeout(r, SETTLE_SECONDS * 1000))
  const later = await measure()
  clearInterval(sampler)

  const importRate = importChanges / ((importCaptured - importStart) / 1000)
  console.log(
    `\nbench:scale  ${new Date().toISOString().slice(0, 10)}  ${fmt(RECORDS)} corrective actions + ${fmt(WORKERS)} workers in one company, ${fmt(BATCH)} rows a transaction\n`
  )
  table([
    ["capture", "changes", "seconds", "changes/s", "CPU ms per 1,000 (service + PostgreSQL)"],
    [
      "the import (written and captured)",
      fmt(importChanges),
      fmt((importCaptured - importStart) / 1000, 1),
      fmt(importRate),
      `${fmt((importCpu / importChanges) * 1000)} (the app's writes too)`
    ],
    ...rounds.flatMap((r, i) => [
      [
        `round ${i + 1}: small transactions (${SMALL_TXN_ROWS} rows), drained`,
        fmt(SMALL_CHANGES),
        fmt(r.small, 1),
        fmt(SMALL_CHANGES / r.small),
        fmt((r.smallCpu / SMALL_CHANGES) * 1000)
      ],
      [
        `round ${i + 1}: one transaction of ${fmt(BATCH)}, drained`,
        fmt(BATCH),
        fmt(r.big, 1),
        fmt(BATCH / r.big),
        fmt((r.bigCpu / BATCH) * 1000)
      ]
    ])
  ])
  const cpuRatios = rounds.map((r) => r.smallCpu / SMALL_CHANGES / (r.bigCpu / BATCH)).sort((a, b) => a - b)
  console.log(
    `CPU per change, small transactions / one import-sized transaction, each round (sorted): ${cpuRatios.map((r) => fmt(r, 2)).join(", ")}`
  )
  const ratios = rounds.map((r) => BATCH / r.big / (SMALL_CHANGES / r.small)).sort((a, b) => a - b)
  console.log(
    `one import-sized transaction / small transactions, each round (sorted): ${ratios.map((r) => fmt(r, 2)).join(", ")}; median ${fmt(percentile(ratios, 50), 2)} (target >= 0.8)\n`
  )
  table([
    ["bytes per record", "tables", "indexes", "total"],
    [
      "service",
      perRecord(sum("service", "table_bytes")),
      perRecord(sum("service", "index_bytes")),
      perRecord(sum("service", "table_bytes") + sum("service", "index_bytes"))
    ],
    [
      "app",
      perRecord(sum("app", "table_bytes")),
      perRecord(sum("app", "index_bytes")),
      perRecord(sum("app", "table_bytes") + sum("app", "index_bytes"))
    ]
  ])
  console.log("")
  table([
    ["service's largest tables", "table", "indexes", "per record"],
    ...sizes
      .filter((s) => s.schema === "service")
      .sort((a, b) => Number(b.table_bytes) + Number(b.index_bytes) - Number(a.table_bytes) - Number(a.index_bytes))
      .slice(0, 8)
      .map((s) => [
        s.rel,
        `${fmt(Number(s.table_bytes) / 1048576)} MB`,
        `${fmt(Number(s.index_bytes) / 1048576)} MB`,
        perRecord(Number(s.table_bytes) + Number(s.index_bytes))
      ])
  ])
  console.log("")
  table([
    ["service's largest indexes", "size", "per record", "leaf pages full"],
    ...indexSizes.map((s) => [
      s.rel,
      `${fmt(Number(s.bytes) / 1048576)} MB`,
      perRecord(Number(s.bytes)),
      s.density === null ? "" : `${fmt(Number(s.density))}%`
    ])
  ])
  const finite = rss.filter(Number.isFinite)
  console.log(
    `\nservice RSS: peak ${fmt(Math.max(...finite), 1)} MB, at the end ${fmt(finite.at(-1) ?? NaN, 1)} MB; capture done ${fmt((capturedAt - importStart) / 1000, 1)} s after the import began\n`
  )
  const ms = (l: number[], p: number) => `${fmt(percentile(l, p), 1)}`
  table([
    [
      "read API (ms)",
      "p50 right after",
      "p99 right after",
      `p50 ${SETTLE_SECONDS}s later`,
      `p99 ${SETTLE_SECONDS}s later`
    ],
    ...right.map(([name, l], i) => [name, ms(l, 50), ms(l, 99), ms(later[i]![1], 50), ms(later[i]![1], 99)])
  ])
  console.log("\ntarget: every p99 < 50 ms, right after the import and a minute later")
} finally {
  if (service && service.exitCode === null) {
    service.kill("SIGTERM")
    await new Promise((r) => service!.once("exit", r))
  }
  for (const c of children) c.kill("SIGKILL")
  if (own !== sql) await own?.end({ timeout: 2 })
  await sql?.end({ timeout: 2 })
  await dropDatabase?.()
  // The embedded PostgreSQL stops with the service; its files go.
  rmSync(dir, { recursive: true, force: true })
}
