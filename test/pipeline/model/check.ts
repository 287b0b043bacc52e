// npm run check:model -- --runs N [--seed S] [--steps M] [--path P]; --history FILE replays one
// history (a failure's Counterexample object); MODEL_KEEP=1 keeps a failed history's database.
// Runs N random histories against the real pipeline, each checked by the oracle; a failure is
// shrunk to a short history (--no-shrink: the first failure as it came) and printed with its
// seed and path, which replay it exactly.
import { parseArgs } from "node:util"
import fc from "fast-check"
import { runHistory } from "./run.ts"
import { describeHistory, type History, history } from "./steps.ts"
import { readFileSync } from "node:fs"
import { ModelWorld } from "./world.ts"

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "20" },
    seed: { type: "string" },
    steps: { type: "string", default: "20" },
    path: { type: "string" },
    history: { type: "string" },
    verbose: { type: "boolean", default: false },
    "no-shrink": { type: "boolean", default: false }
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

const server = await ModelWorld.start()
// Interrupted (Ctrl-C, a timeout's SIGTERM): the clusters are stopped, not left running.
for (const signal of ["SIGINT", "SIGTERM"] as const)
  process.once(signal, () => void server.stop().finally(() => process.exit(130)))
if (values.history !== undefined) {
  // One history, as a failure printed it (its Counterexample's object, in a file).
  const h = JSON.parse(readFileSync(values.history, "utf8")) as History
  const v = await runHistory(server, h)
  process.stdout.write(`${describeHistory(h)}\n${v.ok ? "ok" : v.problems.map((p) => `  - ${p}`).join("\n")}\n`)
  if (values.verbose)
    process.stdout.write(`stats ${JSON.stringify(v.stats)}\ncapture's last lines:\n${v.logs.join("\n")}\n`)
  if (!v.ok && process.env.MODEL_KEEP === "1") await new Promise(() => {})
  await server.stop()
  process.exit(v.ok ? 0 : 1)
}
process.stdout.write(`model: ${runs} histories, seed ${seed}\n`)
let ran = 0
let events = 0
let kills = 0
let splits = 0
let serviceCrashes = 0
let lostCheckpoints = 0
let lostRead = 0
const started = Date.now()
let exitCode = 0
try {
  await fc.assert(
    fc.asyncProperty(history(Number(values.steps)), async (h) => {
      const v = await runHistory(server, h)
      ran++
      events += v.stats.events
      kills += v.stats.kills
      if (h.config.layout === "split") splits++
      serviceCrashes += v.stats.serviceCrashes
      lostCheckpoints += v.stats.lostCheckpoints
      lostRead += v.stats.lostRead
      if (values.verbose || !v.ok)
        process.stdout.write(
          `  history ${ran}: ${v.ok ? "ok" : "FAILED"} (${h.config.layout ?? "one"}, ${h.steps.length} steps, ${v.stats.events} events, ${v.stats.kills} kills, ${v.stats.serviceCrashes} service crashes, ${v.stats.ms} ms)\n`
        )
      if (!v.ok) {
        process.stdout.write(`${describeHistory(h)}\n${v.problems.map((p) => `  - ${p}`).join("\n")}\n`)
        // Stuck: what capture was doing says whether it was slow or wedged.
        if (values.verbose || v.problems.some((p) => p.startsWith("capture stuck")))
          process.stdout.write(`capture's last lines:\n${v.logs.slice(values.verbose ? 0 : -40).join("\n")}\n`)
      }
      return v.ok
    }),
    { numRuns: runs, seed, ...(values.path ? { path: values.path } : {}), endOnFailure: values["no-shrink"] }
  )
  process.stdout.write(
    `model: ${ran} histories passed in ${Math.round((Date.now() - started) / 1000)} s (${splits} split, ${events} events, ${kills} kills of capture, ${serviceCrashes} crashes of the service's database alone, ${lostCheckpoints} seen to lose its checkpoint, ${lostRead} taking changes the follower had read)\n`
  )
} catch (e) {
  exitCode = 1
  process.stdout.write(`${e instanceof Error ? e.message : String(e)}\n`)
  process.stdout.write(
    `model: ${ran} histories ran (${splits} split, ${serviceCrashes} crashes of the service's database alone, ${lostCheckpoints} seen to lose its checkpoint, ${lostRead} taking changes the follower had read)\n`
  )
  // A history that threw (rather than found a difference): what it threw.
  const cause = e instanceof Error ? (e.cause as { stack?: string } | undefined) : undefined
  if (cause !== undefined) process.stdout.write(`caused by: ${cause.stack ?? String(cause)}\n`)
} finally {
  // MODEL_KEEP=1: the server stays up for a look at the kept databases (Ctrl-C ends it).
  if (process.env.MODEL_KEEP === "1" && exitCode !== 0) {
    process.stdout.write("MODEL_KEEP: the server is kept running; Ctrl-C stops it\n")
    await new Promise(() => {})
  }
  await server.stop()
}
process.exit(exitCode)
