// bench/stream: GET /api/v1/stream's waiting requests against the real service (node src/main.ts,
// every role, on an embedded PostgreSQL or BENCH_DATABASE_URL). Two parts:
//
// 1. Commit → waiting client: a writer commits one incident every 5 ms (200 changes/s) for
//    BENCH_SECONDS (15); 20 followers long-poll the stream (wait=30) and note when each change
//    reaches them. Latency is from the writer's COMMIT returning to the follower's answer: it holds
//    capture's own delay (the WAL decoded, the batch applied) and the wake.
// 2. BENCH_CLIENTS (10,000) long-polls waiting at once on the one process, from after=now: the
//    service's RSS, the transactions the service's database runs in 10 s while nothing changes
//    (with none waiting, then with all waiting: the difference is the waiting's cost), and one
//    commit: how long until every client has its answer (p50, p99, max).
//
// Each part runs for each layout of BENCH_LAYOUTS (default `one,split`), side by side: `one`, the
// service as `npm start` runs it (every role in one process); `split`, the same bundle as two
// processes, SERVICE_ROLES=api (the stream's clients, measured) and capture,delivery (docs/
// deployment.md): capture's batches then do not wait behind the API's answers on one event loop.
//
//   npm run bench:stream
//   BENCH_SECONDS=15 BENCH_CLIENTS=10000 BENCH_FOLLOWERS=20 BENCH_LAYOUTS=one,split (defaults;
//   BENCH_CLIENTS=0 runs part 1 alone; BENCH_SPLIT_ROLES="capture|delivery" runs the split
//   layout's second process as one process per role, to see each one's share; BENCH_STATEMENTS=1
//   prints the statements part 1 ran most, with their counts; BENCH_RATE=200 the changes a second;
//   BENCH_BARE=0 leaves out part 1's floor, bench/bare-follower.ts: the same changes followed
//   from a slot of its own by a process that only passes each commit's ids to a waiting client;
//   BENCH_BARE=write has it store each commit first, one asynchronously committed insert)
import { spawn, spawnSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { Agent, request as httpRequest } from "node:http"
import { fileURLToPath } from "node:url"
import { Effect, Layer } from "effect"
import { createKey } from "../src/access/keys/store.ts"
import { Database } from "../src/platform/db/Database.ts"
import { Sql } from "../src/platform/db/Sql.ts"
import { freePort } from "../test/support/net.ts"
import { createCompany } from "../test/support/views.ts"
import { benchDatabase, fmt, percentile, startCommand, table } from "./support.ts"

const SECONDS = Number(process.env.BENCH_SECONDS ?? 15)
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 10_000)
const RATE = Number(process.env.BENCH_RATE ?? 200)
const FOLLOWERS = Number(process.env.BENCH_FOLLOWERS ?? 20)
const ROOT = fileURLToPath(new URL("..", import.meta.url))
const BARE = process.env.BENCH_BARE !== "0"
const BARE_NAME = process.env.BENCH_BARE === "write" ? "bare follower storing" : "bare follower"
const PUBLICATION = "safety_records_service" // the service's default
const LAYOUTS = (process.env.BENCH_LAYOUTS ?? "one,split").split(",").map((l) => l.trim())
if (LAYOUTS.some((l) => l !== "one" && l !== "split")) throw new Error("BENCH_LAYOUTS lists one, split or both")

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY })

// biome-ignore lint/suspicious/noExplicitAny: the API's JSON answers, read as the bench needs them
type Json = any

const get = (port: number, path: string, key: string, via: Agent = agent): Promise<{ status: number; json: Json }> =>
  new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: "127.0.0.1", port, path, agent: via, headers: { authorization: `Bearer ${key}` } },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c) => (text += c))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: text === "" ? undefined : JSON.parse(text) }))
        res.on("error", reject)
      }
    )
    req.on("error", reject)
    req.end()
  })

/** The service's V8 heap in use (its operations port's nodejs_heap_used_bytes), in MB. */
const heapMb = async (opsPort: number) => {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text()
  const m = /^nodejs_heap_used_bytes (\d+(?:\.\d+)?(?:e\+\d+)?)/m.exec(text)
  return m === null ? Number.NaN : Number(m[1]) / 1024 / 1024
}

/** The stream's waiting requests as the service counts them (srs_stream_waiting). */
const waitingGauge = async (opsPort: number) => {
  const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text()
  const m = /^srs_stream_waiting (\d+)/m.exec(text)
  return m === null ? Number.NaN : Number(m[1])
}

const rssMb = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m === null ? Number.NaN : Number(m[1]) / 1024
}

const main = async (layout: "one" | "split") => {
  const db = await benchDatabase({ shared_preload_libraries: "pg_stat_statements" })
  await db.sql`create extension if not exists pg_stat_statements`
  const company = await createCompany(db.sql, { name: "Stream Bench", mirrored: false })
  const port = await freePort()
  const opsPort = await freePort()
  // The service as `npm start` runs it (the bundle).
  const command = startCommand()
  for (const step of command.before) spawnSync(process.execPath, step, { cwd: ROOT, stdio: "ignore" })
  const secretsKey = randomBytes(32).toString("base64")
  const run = async (roles: string, env: Record<string, string>) =>
    spawn(process.execPath, command.args, {
      cwd: ROOT,
      env: {
        ...process.env,
        ...command.env,
        DATABASE_URL: db.url,
        SERVICE_ROLES: roles,
        SEED_DEMO: "false",
        SECRETS_KEY: secretsKey,
        API_RATE_LIMIT: "10000000",
        HTTP_MAX_CONNECTIONS: String(CLIENTS + 1000),
        STREAM_WAITERS: String(CLIENTS + 1000),
        STREAM_WAITERS_PER_KEY: String(CLIENTS + 1000),
        LOG_LEVEL: "Warning",
        ...env
      },
      stdio: ["ignore", "inherit", "inherit"]
    })
  // The clients' process: every role, or the API alone beside a process that captures and delivers.
  const child = await run(layout === "one" ? "api,capture,delivery" : "api", {
    PORT: String(port),
    OPS_PORT: String(opsPort)
  })
  const children = [child]
  if (layout === "split")
    for (const roles of (process.env.BENCH_SPLIT_ROLES ?? "capture,delivery").split("|"))
      children.push(await run(roles, { PORT: String(await freePort()), OPS_PORT: String(await freePort()) }))
  try {
    // Ready once the company is mirrored (capture runs) and the API answers.
    for (let i = 0; ; i++) {
      const found = await db.sql`select 1 from service.companies where id = ${company.id}`
      const up = await get(port, "/healthz", "").catch(() => undefined)
      if (found.length > 0 && up?.status === 200) break
      if (i > 600) throw new Error("the service did not start")
      await sleep(100)
    }
    const layer = Layer.merge(
      Layer.succeed(Database, { sql: db.sql, url: db.url, embedded: false }),
      Sql.fromPool(db.sql)
    )
    const { key } = await Effect.runPromise(
      createKey(
        { userId: company.adminId, email: company.adminEmail, name: "Bench", companyId: company.id },
        { companyId: company.id, name: "bench", scopes: ["incidents"], webhooks: false, expires: "never" }
      ).pipe(Effect.provide(layer))
    )
    const now = async () => (await get(port, "/api/v1/stream?after=now", key)).json.nextOffset as string
    // The floor: its own slot on the service's publication (made by capture at its start).
    const barePort = await freePort()
    if (BARE) {
      await db.sql`select pg_create_logical_replication_slot('bench_bare', 'pgoutput')`
      children.push(
        spawn(
          process.execPath,
          [
            fileURLToPath(new URL("bare-follower.ts", import.meta.url)),
            db.url,
            "bench_bare",
            PUBLICATION,
            String(barePort)
          ],
          { cwd: ROOT, stdio: ["ignore", "inherit", "inherit"] }
        )
      )
      for (
        let i = 0;
        !(await fetch(`http://127.0.0.1:${barePort}/?after=-1`).then(
          (r) => r.ok,
          () => false
        ));
        i++
      ) {
        if (i > 100) throw new Error("the bare follower did not start")
        await sleep(100)
      }
    }

    // ---- 1. commit → waiting client at 200 changes/s
    const committedAt = new Map<string, number>()
    // When capture's commits were seen (its notification at each batch's commit), to tell the
    // wake (capture's commit → the client) from capture's own delay.
    const notified: Array<number> = []
    const listener = await db.sql.listen("service_record_changes", () => void notified.push(performance.now()))
    const lastNotificationBefore = (t: number) => {
      let lo = 0
      let hi = notified.length - 1
      let found = Number.NaN
      while (lo <= hi) {
        const mid = (lo + hi) >> 1
        if (notified[mid]! <= t) {
          found = notified[mid]!
          lo = mid + 1
        } else hi = mid - 1
      }
      return found
    }
    let stopping = false
    // What each follower got and when; latencies are taken once the run is over, so that an
    // answer the bench's event loop read before its writer's COMMIT returned still counts.
    const seen: Array<{ id: string; at: number; stamp: number }> = []
    const follower = async (start: string) => {
      let after = start
      while (!stopping) {
        const a = await get(port, `/api/v1/stream?wait=30&limit=1000&after=${encodeURIComponent(after)}`, key)
        const at = performance.now()
        for (const item of a.json.data) seen.push({ id: item.id, at, stamp: Date.now() - Date.parse(item.committedAt) })
        after = a.json.nextOffset
      }
    }
    const bareSeen: Array<{ id: string; at: number; stamp: number }> = []
    const bareFollower = async () => {
      let after = 0
      while (!stopping) {
        const a = await get(barePort, `/?after=${after}`, "")
        const at = performance.now()
        for (const item of a.json.items) bareSeen.push({ id: item.id, at, stamp: Date.now() - item.committedAt })
        after = a.json.next
      }
    }
    const start = await now()
    const followers = Array.from({ length: FOLLOWERS }, () => follower(start))
    if (BARE) followers.push(bareFollower())
    await sleep(500)
    const writer = db.sql
    const total = SECONDS * RATE
    const t0 = performance.now()
    for (let i = 0; i < total; i++) {
      const due = t0 + (i * 1000) / RATE
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      const [r] = await writer<{ id: string }[]>`
        insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
        values (${company.id}, ${`B-${i}`}, 'injury', 'Bench', now(), 'minor') returning id::text`
      committedAt.set(r!.id, performance.now())
    }
    const expected = total * FOLLOWERS
    const arrived = () => seen.reduce((n, x) => n + (committedAt.has(x.id) ? 1 : 0), 0)
    for (let i = 0; arrived() < expected && i < 300; i++) await sleep(100)
    stopping = true
    // The followers end with their next answer (a change, or their wait).
    await writer`insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
                 values (${company.id}, 'B-end', 'injury', 'End', now(), 'minor')`
    await Promise.race([Promise.all(followers), sleep(35_000)])
    await listener.unlisten()
    const latencies: Array<number> = []
    // From each change's committedAt as the stream gives it (the app's commit time, PostgreSQL's
    // clock, the same machine's): the start taken apart from the bench's own event loop.
    const fromStamp: Array<number> = []
    const wakes: Array<number> = []
    const captured = new Map<string, number>()
    for (const x of seen) {
      const c = committedAt.get(x.id)
      if (c === undefined) continue
      latencies.push(x.at - c)
      fromStamp.push(x.stamp)
      const n = lastNotificationBefore(x.at)
      if (n >= c) {
        wakes.push(x.at - n)
        // Capture's own delay, once per change: its commit is the last before the first follower had it.
        if (!captured.has(x.id)) captured.set(x.id, n - c)
      }
    }
    const delays = [...captured.values()]
    const ofBench = bareSeen.filter((x) => committedAt.has(x.id))

    console.log(
      `\nbench:stream ${new Date().toISOString().slice(0, 10)}, node ${process.version}, layout ${layout}` +
        (layout === "one"
          ? " (every role in one process)"
          : ` (api | ${process.env.BENCH_SPLIT_ROLES ?? "capture,delivery"})`) +
        "\n"
    )
    console.log(`1. commit → waiting client, ${RATE} changes/s for ${SECONDS} s, ${FOLLOWERS} long-poll followers`)
    /** A row of the table: how many were seen, from where, and their p50, p99 and max. */
    const spread = (seen: string, from: string, xs: Array<number>) => {
      xs.sort((a, b) => a - b)
      return [seen, from, fmt(percentile(xs, 50), 1), fmt(percentile(xs, 99), 1), fmt(xs.at(-1) ?? Number.NaN, 1)]
    }
    table([
      ["changes seen", "from", "p50 ms", "p99 ms", "max ms"],
      spread(`${latencies.length}/${expected}`, "the app's commit", latencies),
      spread(`${fromStamp.length}`, "the change's committedAt", fromStamp),
      spread(`${wakes.length}`, "capture's commit", wakes),
      spread(`${delays.length}`, "app's → capture's commit", delays),
      ...(BARE
        ? [
            spread(
              `${ofBench.length}/${total}`,
              `the app's commit, ${BARE_NAME}`,
              ofBench.map((x) => x.at - committedAt.get(x.id)!)
            ),
            spread(
              `${ofBench.length}`,
              `committedAt, ${BARE_NAME}`,
              ofBench.map((x) => x.stamp)
            )
          ]
        : [])
    ])
    // What each change costs the database, statement by statement (capture's, the wake's, the reads').
    if (process.env.BENCH_STATEMENTS === "1") {
      const top = await db.sql<{ calls: string; ms: string; query: string }[]>`
        select s.calls::text, round(s.total_exec_time)::text as ms, left(s.query, 300) as query
          from pg_stat_statements s join pg_database d on d.oid = s.dbid
         where d.datname = current_database() order by s.calls desc limit 40`
      for (const r of top)
        console.log(r.calls.padStart(8), r.ms.padStart(7), r.query.replace(/\s+/g, " ").slice(0, 120))
    }
    if (CLIENTS === 0) return

    // ---- 2. 10,000 waiting clients
    // Statements the service's database runs in 10 s: all of them (capture's heartbeat, the
    // engine's polls...), and the stream's own (those that read service.record_changes).
    const idleStatements = async () => {
      const q = async () =>
        (
          await db.sql<{ all: string; stream: string }[]>`
            select coalesce(sum(calls), 0)::text as all,
                   coalesce(sum(calls) filter (where s.query ~ 'record_changes' and s.query !~ '^\\s*(insert|with)'), 0)::text as stream
              from pg_stat_statements s join pg_database d on d.oid = s.dbid
             where d.datname = current_database() and s.query !~* 'pg_stat_statements'`
        )[0]!
      const before = await q()
      await sleep(10_000)
      const after = await q()
      return { all: Number(after.all) - Number(before.all), stream: Number(after.stream) - Number(before.stream) }
    }
    await sleep(2000)
    const idleNone = await idleStatements()
    const rssBefore = rssMb(child.pid!)
    const heapBefore = await heapMb(opsPort)
    const here = await now()
    // A connection per client, none kept: none is reused after the server closed it.
    const once = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY })
    const woken: Array<number> = []
    let commitAt = 0 // 0 until the commit is made
    let failed = 0
    const reasons = new Map<string, number>()
    const waiting: Array<Promise<void>> = []
    for (let i = 0; i < CLIENTS; i++) {
      waiting.push(
        get(port, `/api/v1/stream?wait=60&after=${encodeURIComponent(here)}`, key, once).then(
          (a) => {
            if (a.status === 200 && a.json.data.length > 0) woken.push(performance.now() - commitAt)
            else {
              failed++
              const why = `${a.status}${a.status === 200 ? " empty" : ""}`
              reasons.set(why, (reasons.get(why) ?? 0) + 1)
            }
          },
          (e: NodeJS.ErrnoException) => {
            failed++
            const why = `${e.code ?? e.message} ${commitAt === 0 ? "before" : "after"} the commit`
            reasons.set(why, (reasons.get(why) ?? 0) + 1)
          }
        )
      )
      if (i % 100 === 99) await sleep(100)
    }
    // All registered: the stream's statements (their first reads) have stopped for 3 s.
    const streamCalls = async () =>
      Number(
        (
          await db.sql<{ n: string }[]>`
            select coalesce(sum(calls), 0)::text as n from pg_stat_statements s join pg_database d on d.oid = s.dbid
             where d.datname = current_database() and s.query ~ 'record_changes' and s.query !~ '^\\s*(insert|with)'`
        )[0]!.n
      )
    for (let last = -1, still = 0; still < 6; ) {
      await sleep(500)
      const n = await streamCalls()
      still = n === last ? still + 1 : 0
      last = n
    }
    const rssWaiting = rssMb(child.pid!)
    const heapWaiting = await heapMb(opsPort)
    const counted = await waitingGauge(opsPort)
    const idleWaiting = await idleStatements()
    commitAt = performance.now()
    await writer`insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
                 values (${company.id}, 'WAKE', 'injury', 'Wake them all', now(), 'minor')`
    commitAt = performance.now()
    await Promise.race([Promise.all(waiting), sleep(30_000)])
    woken.sort((a, b) => a - b)

    console.log(`\n2. ${CLIENTS} long-polls waiting on one process (${layout === "one" ? "every role" : "api"})`)
    table([
      [
        "RSS (heap) before MB",
        "RSS (heap) waiting MB",
        "srs_stream_waiting",
        "statements/10 s idle (stream's): none waiting",
        "all waiting",
        "woken",
        "p50 ms",
        "p99 ms",
        "max ms"
      ],
      [
        `${fmt(rssBefore, 0)} (${fmt(heapBefore, 0)})`,
        `${fmt(rssWaiting, 0)} (${fmt(heapWaiting, 0)})`,
        `${counted}`,
        `${idleNone.all} (${idleNone.stream})`,
        `${idleWaiting.all} (${idleWaiting.stream})`,
        `${woken.length}/${CLIENTS}${failed > 0 ? ` (${failed} failed)` : ""}`,
        fmt(percentile(woken, 50), 0),
        fmt(percentile(woken, 99), 0),
        fmt(woken.at(-1) ?? Number.NaN, 0)
      ]
    ])
    if (reasons.size > 0) console.log(`not woken: ${[...reasons].map(([k, n]) => `${k} ×${n}`).join(", ")}`)
  } finally {
    for (const c of children) {
      c.kill("SIGTERM")
      if (c.exitCode === null && c.signalCode === null) await new Promise((r) => c.once("exit", r))
    }
    if (BARE)
      await db.sql`select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = 'bench_bare'`
    await db.close()
  }
}

for (const layout of LAYOUTS) await main(layout as "one" | "split")
agent.destroy()
