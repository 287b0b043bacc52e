// A capture process for crash tests and the model (test/pipeline/model): runs the real loop
// against CAPTURE_URL (and, with two databases, the app's at CAPTURE_APP_URL) until killed.
// Its knobs come from the environment, so a test can make batches, large transactions,
// re-read chunks and the held keys kept in memory small.
import { connect } from "../../src/platform/db/Database.ts"
import { Effect, Fiber, Logger, Schedule } from "effect"
import { captureRun, CaptureStats } from "../../src/pipeline/capture/run.ts"
import { lineLogger } from "../../src/platform/logging.ts"

const url = process.env.CAPTURE_URL!
const slot = process.env.CAPTURE_SLOT!
const sql = connect(url, 4)
const appUrl = process.env.CAPTURE_APP_URL
const app = appUrl ? { url: appUrl, sql: connect(appUrl, 4) } : undefined
const stats = new CaptureStats()
const number = (name: string) => (process.env[name] === undefined ? undefined : Number(process.env[name]))
const line = (level: string, message: string, fields?: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ level, message, ...(fields ? { fields } : {}) })}\n`)
const contractCheckMs = number("CAPTURE_CONTRACT_MS")
const heldInMemory = number("CAPTURE_HELD_MEMORY")
const resyncChunk = number("CAPTURE_RESYNC_CHUNK")
const run = Effect.runFork(
  captureRun(
    sql,
    {
      url,
      ...(app ? { app } : {}),
      slot,
      publication: process.env.CAPTURE_PUBLICATION ?? "safety_records_service",
      batchChanges: number("CAPTURE_BATCH") ?? 500,
      largeTransaction: number("CAPTURE_LARGE") ?? 10_000,
      heartbeatMs: number("CAPTURE_HEARTBEAT_MS") ?? 60_000,
      ...(contractCheckMs !== undefined ? { contractCheckMs } : {}),
      ...(heldInMemory !== undefined ? { heldInMemory } : {}),
      ...(resyncChunk !== undefined ? { resyncChunk } : {})
    },
    stats
  ).pipe(
    Effect.tapError((e) => Effect.sync(() => line("retry", String(e)))),
    Effect.retry(Schedule.spaced("200 millis")),
    Effect.provide(Logger.layer([lineLogger(line)]))
  )
)
process.on("SIGTERM", () => void Effect.runPromise(Fiber.interrupt(run)))
await Effect.runPromise(Fiber.await(run))
await sql.end()
await app?.sql.end()
