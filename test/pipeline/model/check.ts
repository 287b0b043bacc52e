// npm run check:model -- --runs N [--seed S] [--steps M] [--path P]
// Runs N random histories against the real pipeline, each checked by the oracle; a failure is
// shrunk to a short history and printed with its seed and path, which replay it exactly.
import { parseArgs } from "node:util"
import fc from "fast-check"
import { runHistory } from "./run.ts"
import { describeHistory, history } from "./steps.ts"
import { ModelServer } from "./world.ts"

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    seed: { type: "string" },
    steps: { type: "string", default: "25" },
    path: { type: "string" },
    verbose: { type: "boolean", default: false }
  }
})
const runs = Number(values.runs)
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed)
if (!Number.isInteger(runs) || runs < 1) {
  process.stderr.write("--runs takes a whole number of histories, 1 or more\n")
  process.exit(2)
}
if (!Number.isInteger(seed)) {
  process.stderr.write("--seed takes a whole number\n")
  process.exit(2)
}

process.stdout.write(`model: ${runs} histories, seed ${seed}\n`)
const server = await ModelServer.start()
let ran = 0
let events = 0
let kills = 0
const started = Date.now()
let exitCode = 0
try {
  await fc.assert(
    fc.asyncProperty(history(Number(values.steps)), async (h) => {
      const v = await runHistory(server, h)
      ran++
      events += v.stats.events
      kills += v.stats.kills
      if (values.verbose || !v.ok)
        process.stdout.write(
          `  history ${ran}: ${v.ok ? "ok" : "FAILED"} (${h.steps.length} steps, ${v.stats.events} events, ${v.stats.kills} kills, ${v.stats.ms} ms)\n`
        )
      if (!v.ok) {
        process.stdout.write(`${describeHistory(h)}\n${v.problems.map((p) => `  - ${p}`).join("\n")}\n`)
        if (values.verbose) process.stdout.write(`capture's last lines:\n${v.logs.join("\n")}\n`)
      }
      return v.ok
    }),
    { numRuns: runs, seed, ...(values.path ? { path: values.path } : {}), endOnFailure: false }
  )
  process.stdout.write(
    `model: ${ran} histories passed in ${Math.round((Date.now() - started) / 1000)} s (${events} events, ${kills} kills of capture)\n`
  )
} catch (e) {
  exitCode = 1
  process.stdout.write(`${e instanceof Error ? e.message : String(e)}\n`)
} finally {
  await server.stop()
}
process.exit(exitCode)
