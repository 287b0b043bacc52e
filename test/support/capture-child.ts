// A capture process for crash tests: runs the real loop against CAPTURE_URL (and, with two
// databases, the app's at CAPTURE_APP_URL) until killed.
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
const line = (level: string, message: string) => process.stdout.write(`${JSON.stringify({ level, message })}\n`)
const run = Effect.runFork(
  captureRun(
    sql,
    {
      url,
      ...(app ? { app } : {}),
      slot,
      publication: "safety_records_service",
      batchChanges: Number(process.env.CAPTURE_BATCH ?? 500),
      largeTransaction: Number(process.env.CAPTURE_LARGE ?? 10_000),
      heartbeatMs: 60_000
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
