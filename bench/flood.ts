// bench/flood: requests without a valid key, as an attacker who reaches the port sends them,
// against the service as `npm start` runs it (the bundle, its memory flags, every role), beside
// a real key reading at a steady rate. Baseline: the same reader alone, in the same run.
//
// The flood comes from 127.0.0.2 (another client address on loopback), the reader from
// 127.0.0.1. Every flood request has a made-up key of a real key's shape (`mk_` and 43
// characters), in three phases: first each with a Host header of its own (a long host name, under
// a domain no company has), then from 127.0.0.3 at a real company's Host (acme.localhost), then
// at that Host from a new IPv6 /64 each (X-Forwarded-For, TRUST_PROXY=true): a flood from many
// addresses, bounded by AUTH_LOOKUPS_PER_SECOND (run it with that set high for the figures
// without the bound). Prints, for the
// reader alone and beside each phase: the reader's p50/p99, the service's RSS (start, peak,
// end), the database statements it ran (counted by pg_stat_statements, which counts as
// statements end, without the statistics collector's delay) and the statements per 100 flood
// requests after each phase's first second.
//
//   npm run bench:flood                       100,000 flood requests per phase, 64 at a time
//   npm run bench:flood -- --requests 20000 --concurrency 32 --reader-rate 20
//   BENCH_DATABASE_URL=... npm run bench:flood   (a database of its own on that server)
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { Agent, request } from "node:http"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import { freePort } from "../test/support/net.ts"
import { benchDatabase, fmt, percentile, startCommand, table } from "./support.ts"

const USAGE = "usage: npm run bench:flood -- [--requests N] [--concurrency N] [--reader-rate N] [--baseline-seconds N]"
const args = (() => {
  try {
    return parseArgs({
      options: {
        requests: { type: "string", default: "100000" },
        concurrency: { type: "string", default: "64" },
        "reader-rate": { type: "string", default: "20" },
        "baseline-seconds": { type: "string", default: "15" }
      },
      strict: true
    }).values
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`)
    process.exit(2)
  }
})()
const int = (name: keyof typeof args): number => {
  const n = Number(args[name])
  if (!Number.isInteger(n) || n < 1) {
    console.error(`--${name} must be a positive integer, not ${args[name]}\n${USAGE}`)
    process.exit(2)
  }
  return n
}
const REQUESTS = int("requests")
const CONCURRENCY = int("concurrency")
const READER_RATE = int("reader-rate")
const BASELINE_SECONDS = int("baseline-seconds")

const ROOT = fileURLToPath(new URL("..", import.meta.url))

const runCli = (script: string, cliArgs: ReadonlyArray<string>, env: Record<string, string>) =>
  new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, script), ...cliArgs], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => (out += d))
    child.stderr.on("data", (d) => (err += d))
    child.on("exit", (code) => (code === 0 ? resolve(out) : reject(new Error(`${script} exited ${code}: ${err}`))))
  })

const rssMb = (pid: number): number => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
  return m ? Number(m[1]) / 1024 : NaN
}

/** The process's CPU time so far (user and system), in milliseconds. */
const cpuMs = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100 // utime, stime: clock ticks of 1/100 s
}

type Answer = { readonly status: number; readonly ms: number; readonly error?: string }

const get = (
  agent: Agent,
  port: number,
  host: string,
  key: string,
  localAddress: string,
  path = "/api/v1/incidents?limit=20",
  forwardedFor?: string
): Promise<Answer> =>
  new Promise((resolve) => {
    const t0 = performance.now()
    const req = request(
      {
        agent,
        host: "127.0.0.1",
        port,
        path,
        localAddress,
        headers: {
          host,
          authorization: `Bearer ${key}`,
          ...(forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor })
        }
      },
      (res) => {
        // A refusal's error text, with its number of seconds taken out: which limit answered.
        let body = ""
        if (res.statusCode !== 200) res.on("data", (c: Buffer) => void (body += c.toString("utf8")))
        else res.resume()
        res.on("end", () => {
          const error =
            body === "" ? undefined : (JSON.parse(body) as { error?: string }).error?.replace(/\d+ seconds?$/, "<n> s")
          resolve({
            status: res.statusCode ?? 0,
            ms: performance.now() - t0,
            ...(error === undefined ? {} : { error })
          })
        })
      }
    )
    req.on("error", () => resolve({ status: 0, ms: performance.now() - t0 }))
    req.setTimeout(10_000, () => req.destroy())
    req.end()
  })

const db = await benchDatabase({ shared_preload_libraries: "pg_stat_statements" })
const dataDir = mkdtempSync(join(tmpdir(), "srs-flood-data-"))
let service: ReturnType<typeof spawn> | undefined
try {
  await db.sql`create extension if not exists pg_stat_statements`
  const env = { DATABASE_URL: db.url, DATA_DIR: dataDir }
  await runCli("src/faces/cli/seed.ts", [], env)
  const created = JSON.parse(
    await runCli(
      "src/faces/cli/admin.ts",
      [
        "keys",
        "create",
        "--company",
        "acme.localhost",
        "--name",
        "flood bench",
        "--read",
        "all",
        "--as",
        "admin@acme.example",
        "--json"
      ],
      env
    )
  ) as { key: string }
  // The service as package.json's start script runs it (its build step first).
  const command = startCommand()
  for (const step of command.before) await runCli(step[0]!, step.slice(1), {})
  const port = await freePort()
  const opsPort = await freePort()
  service = spawn(process.execPath, command.args, {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      ...command.env,
      PORT: String(port),
      OPS_PORT: String(opsPort),
      LOG_LEVEL: "warn",
      // The reader's steady rate is above the production limit; the flood never has a key.
      API_RATE_LIMIT: "1000000",
      // Phase 3's addresses come as a proxy would pass them on; the others send no header.
      TRUST_PROXY: "true"
    },
    stdio: ["ignore", "inherit", "inherit"]
  })
  const pid = service.pid!
  for (let i = 0; ; i++) {
    const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
      (r) => r.ok,
      () => false
    )
    if (ok) break
    if (i > 600) throw new Error("the service did not start")
    await new Promise((r) => setTimeout(r, 100))
  }

  const statements = async (): Promise<number> => {
    const [r] = await db.sql<{ n: string }[]>`
      select coalesce(sum(calls), 0)::text as n from pg_stat_statements s join pg_database d on d.oid = s.dbid
      where d.datname = current_database() and s.query !~* 'pg_stat_statements'`
    return Number(r!.n)
  }

  /** The real key's reads at READER_RATE until stopped; their latencies. */
  const reader = () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 4 })
    const latencies: number[] = []
    const failures: number[] = []
    let stop = false
    const done = (async () => {
      const every = 1000 / READER_RATE
      let next = performance.now()
      const pending: Promise<void>[] = []
      while (!stop) {
        pending.push(
          get(agent, port, "acme.localhost", created.key, "127.0.0.1").then((a) =>
            a.status === 200 ? void latencies.push(a.ms) : void failures.push(a.status)
          )
        )
        next += every
        await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())))
      }
      await Promise.all(pending)
      agent.destroy()
    })()
    return {
      stop: async () => {
        stop = true
        await done
        return { latencies: latencies.sort((a, b) => a - b), failures }
      }
    }
  }

  /** RSS every 200 ms until stopped. */
  const sampler = () => {
    const samples: number[] = [rssMb(pid)]
    const timer = setInterval(() => samples.push(rssMb(pid)), 200)
    return {
      stop: () => {
        clearInterval(timer)
        samples.push(rssMb(pid))
        return { start: samples[0]!, peak: Math.max(...samples), end: samples.at(-1)! }
      }
    }
  }

  // Warm-up: the reader's key and company are looked up once, connections are open.
  const warm = reader()
  await new Promise((r) => setTimeout(r, 3000))
  await warm.stop()

  // Baseline: the reader alone.
  const aloneRss = sampler()
  const aloneReader = reader()
  const s0 = await statements()
  await new Promise((r) => setTimeout(r, BASELINE_SECONDS * 1000))
  const s1 = await statements()
  const aloneLoad = loadavg()[0]!
  const alone = {
    ...(await aloneReader.stop()),
    rss: aloneRss.stop(),
    statementsPerSecond: (s1 - s0) / BASELINE_SECONDS
  }

  /** One flood beside the reader: REQUESTS requests from `from`, each with a made-up key of a real key's shape. */
  const flood = async (
    name: string,
    from: string,
    hostOf: (i: number) => string,
    forwardedFor?: (i: number) => string
  ) => {
    const rss = sampler()
    const floodReader = reader()
    const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY })
    const statuses = new Map<number, number>()
    const errors = new Map<string, number>()
    let sent = 0
    const s0 = await statements()
    const cpu0 = cpuMs(pid)
    const t0 = performance.now()
    let afterFirstSecond: { at: number; statements: number; sent: number } | undefined
    const marker = setTimeout(async () => {
      const at = performance.now()
      const sentThen = sent
      afterFirstSecond = { at, statements: await statements(), sent: sentThen }
    }, 1000)
    const worker = async () => {
      while (sent < REQUESTS) {
        const i = sent++
        const key = `mk_${randomBytes(32).toString("base64url")}`
        const a = await get(agent, port, hostOf(i), key, from, undefined, forwardedFor?.(i))
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1)
        if (a.error !== undefined) errors.set(a.error, (errors.get(a.error) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, worker))
    clearTimeout(marker)
    const seconds = (performance.now() - t0) / 1000
    const cpu = cpuMs(pid) - cpu0
    const sEnd = await statements()
    agent.destroy()
    const read = await floodReader.stop()
    const mark = afterFirstSecond
    const after1s = mark === undefined ? NaN : REQUESTS - mark.sent
    const secondsAfter = mark === undefined ? NaN : (performance.now() - mark.at) / 1000
    // The reader and the service's own loops run in both phases: their rate, from the baseline, is taken out.
    const own =
      mark === undefined ? NaN : Math.max(0, sEnd - mark.statements - alone.statementsPerSecond * secondsAfter)
    return {
      name,
      ...read,
      rss: rss.stop(),
      seconds,
      statuses,
      errors,
      statementsPerSecond: (sEnd - s0) / seconds,
      after1s,
      perHundred: (own / after1s) * 100,
      own,
      // The reader's requests and the service's own loops are in it too: a few percent at most.
      cpuPerRequestUs: (cpu * 1000) / REQUESTS,
      // What else wanted the machine's cores meanwhile (this bench's client takes one).
      load: loadavg()[0]!
    }
  }

  // 1: a Host of its own per request (about 200 characters, a valid host name: labels of at
  // most 63), under a domain no company has.
  const unique = await flood("unique Hosts", "127.0.0.2", (i) => {
    const hex = randomBytes(90).toString("hex")
    return `${hex.slice(0, 60)}.${hex.slice(60, 120)}.${hex.slice(120, 175)}-${i}.flood.example`
  })
  // 2: a real company's Host, from another address (a limit per address starts afresh).
  const company = await flood("acme.localhost", "127.0.0.3", () => "acme.localhost")
  // 3: a real company's Host, each request from an IPv6 /64 of its own (as a proxy names them):
  // every address within its own allowance, the process's budget of lookups
  // (AUTH_LOOKUPS_PER_SECOND) the only bound.
  const addresses = await flood(
    "many addresses",
    "127.0.0.4",
    () => "acme.localhost",
    (i) => `2001:db8:${((i >> 16) & 0xffff).toString(16)}:${(i & 0xffff).toString(16)}::1`
  )
  await new Promise((r) => setTimeout(r, 3000))
  const settled = rssMb(pid)

  const pct = (l: number[], p: number) => (l.length === 0 ? "-" : `${fmt(percentile(l, p), 1)} ms`)
  const phases = [unique, company, addresses]

  console.log(
    `\nbench:flood  ${new Date().toISOString().slice(0, 10)}  ${fmt(REQUESTS)} flood requests per phase, ${CONCURRENCY} at a time, reader ${READER_RATE}/s\n`
  )
  table([
    ["", "reader alone", ...phases.map((p) => `+ flood, ${p.name}`)],
    ["reader requests", fmt(alone.latencies.length), ...phases.map((p) => fmt(p.latencies.length))],
    ["reader failures", fmt(alone.failures.length), ...phases.map((p) => fmt(p.failures.length))],
    ["reader p50", pct(alone.latencies, 50), ...phases.map((p) => pct(p.latencies, 50))],
    ["reader p99", pct(alone.latencies, 99), ...phases.map((p) => pct(p.latencies, 99))],
    ["RSS start (MB)", fmt(alone.rss.start, 1), ...phases.map((p) => fmt(p.rss.start, 1))],
    ["RSS peak (MB)", fmt(alone.rss.peak, 1), ...phases.map((p) => fmt(p.rss.peak, 1))],
    ["RSS end (MB)", fmt(alone.rss.end, 1), ...phases.map((p) => fmt(p.rss.end, 1))],
    ["statements/s (all)", fmt(alone.statementsPerSecond, 1), ...phases.map((p) => fmt(p.statementsPerSecond, 1))],
    ["service CPU per flood request", "", ...phases.map((p) => `${fmt(p.cpuPerRequestUs)} µs`)],
    ["load average (1 min) after", fmt(aloneLoad, 2), ...phases.map((p) => fmt(p.load, 2))]
  ])
  console.log("")
  for (const p of phases) {
    const answers = [...p.statuses]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s === 0 ? "no answer" : s}: ${fmt(n)}`)
      .join(", ")
    console.log(
      `flood, ${p.name}: ${fmt(REQUESTS)} requests in ${fmt(p.seconds, 1)} s (${fmt(REQUESTS / p.seconds)}/s); answers ${answers}`
    )
    for (const [error, n] of p.errors) console.log(`  ${fmt(n)} x ${error}`)
    console.log(
      `  statements after its first second: ${fmt(p.own)} for ${fmt(p.after1s)} requests = ${fmt(p.perHundred, 2)} per 100 (target <= 1); reader p99 ${pct(p.latencies, 99)} (target < 50 ms)`
    )
  }
  console.log(
    `RSS growth over the reader alone's start: peak ${fmt(Math.max(...phases.map((p) => p.rss.peak)) - alone.rss.start, 1)} MB, settled ${fmt(settled - alone.rss.start, 1)} MB (target within 20 MB)`
  )
} finally {
  service?.kill("SIGTERM")
  await new Promise((r) => (service && service.exitCode === null ? service.once("exit", r) : r(undefined)))
  await db.close()
  rmSync(dataDir, { recursive: true, force: true })
}
