// npm run simulate -- --rate 5 [--duration 60s] [--company acme.localhost]: plays the app
// at a steady rate until stopped (Ctrl-C, SIGTERM) or the duration ends.
import { parseArgs } from "node:util"
import { openDatabase } from "../../seed/database.ts"
import { simulate, type SimulationProgress } from "../../seed/simulate.ts"

const USAGE = `Usage: npm run simulate -- [--rate 5] [--duration 60s] [--company acme.localhost]
                        [--concurrency 1] [--seed N] [--json]
Writes app records like the app would, --rate operations per second, until Ctrl-C or
--duration (ms, s, m or h; a bare number is seconds). Progress every 5 s; totals at the
end (--json: the totals as JSON on stdout, progress on stderr).`

const fail = (message: string): never => {
  process.stderr.write(`${message}\n${USAGE}\n`)
  process.exit(2)
}

const durationMs = (text: string): number => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  if (!m) return fail(`--duration must look like 500ms, 30s, 5m or 1h, not "${text}".`)
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] ?? "s"]!
  return Number(m[1]) * unit
}

const positive = (name: string, text: string, integer: boolean): number => {
  const n = Number(text)
  if (!(n > 0) || !Number.isFinite(n) || (integer && !Number.isInteger(n))) {
    return fail(`--${name} must be a ${integer ? "whole " : ""}number above 0, not "${text}".`)
  }
  return n
}

const args = (() => {
  try {
    const parsed = parseArgs({
      options: {
        rate: { type: "string", default: "5" },
        duration: { type: "string" },
        company: { type: "string", default: "acme.localhost" },
        concurrency: { type: "string", default: "1" },
        seed: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" }
      },
      strict: true,
      tokens: true
    })
    // A flag given twice is a mistake (which one was meant?), not "the last one wins".
    const seen = new Set<string>()
    for (const t of parsed.tokens) {
      if (t.kind !== "option") continue
      if (seen.has(t.name)) return fail(`--${t.name} is given more than once.`)
      seen.add(t.name)
    }
    return parsed.values
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e))
  }
})()
if (args.help) {
  process.stdout.write(USAGE + "\n")
  process.exit(0)
}
const rate = positive("rate", args.rate, false)
const duration = args.duration === undefined ? undefined : durationMs(args.duration)
const concurrency = positive("concurrency", args.concurrency, true)
const seed = args.seed === undefined ? undefined : positive("seed", args.seed, true)
const out = args.json ? process.stderr : process.stdout

const line = (p: SimulationProgress) => {
  const done = Object.entries(p.operations).filter(([, n]) => n > 0)
  const total = done.reduce((s, [, n]) => s + n, 0)
  const events = Object.values(p.events).reduce((s, n) => s + n, 0)
  return (
    `${(p.elapsedMs / 1000).toFixed(1)}s: ${total} operations, ${events} events expected` +
    (p.skipped ? `, ${p.skipped} skipped` : "") +
    (p.failed ? `, ${p.failed} FAILED` : "") +
    ` | ${done.map(([k, n]) => `${k} ${n}`).join(", ")}`
  )
}

const main = async () => {
  const stop = new AbortController()
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(130) // a second Ctrl-C: leave now
    out.write(`${signal}: finishing the operation in flight…\n`)
    stop.abort()
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  const db = await openDatabase(concurrency + 1)
  try {
    out.write(
      `Simulating ${args.company} at ${rate}/s${duration === undefined ? " until stopped (Ctrl-C)" : ` for ${duration / 1000}s`}…\n`
    )
    const result = await simulate(db.sql, {
      rate,
      company: args.company,
      concurrency,
      signal: stop.signal,
      onProgress: (p) => out.write(line(p) + "\n"),
      ...(duration === undefined ? {} : { durationMs: duration }),
      ...(seed === undefined ? {} : { seed })
    })
    if (args.json) process.stdout.write(JSON.stringify(result) + "\n")
    out.write(`Done. ${line(result)}\n`)
    const events = Object.entries(result.events).filter(([, n]) => n > 0)
    out.write(`Events expected: ${events.map(([k, n]) => `${k} ${n}`).join(", ") || "none"}\n`)
    for (const e of result.errors) out.write(`  failure: ${e}\n`)
    if (result.failed > 0) process.exitCode = 1
  } finally {
    await db.close()
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`Simulation failed: ${e instanceof Error ? e.message : String(e)}\n`)
  process.exitCode = 1
})
