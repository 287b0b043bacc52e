// Capture as an Effect service: the loop runs in a scoped fiber, restarting with backoff
// after a failure (a new replication connection each time, resuming from the checkpoint).
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { CaptureConfig } from "../../platform/config.ts"
import { Database } from "../../platform/db/Database.ts"
import { writeLog } from "../../platform/logging.ts"
import { spanRunner } from "../../platform/tracing.ts"
import { formatLsn } from "../../platform/db/lsn.ts"
import { checkCaptureStart } from "./publication.ts"
import { CaptureStalled, CaptureStats, runCapture } from "./run.ts"

export class Capture extends Context.Service<Capture, { readonly stats: CaptureStats; readonly slot: string }>()("service/Capture") {}

export const CaptureLive = Layer.effect(
  Capture,
  Effect.gen(function* () {
    const db = yield* Database
    const config = yield* CaptureConfig
    // Refused here, before the loop starts (exit 1): a publication that carries NEVER columns
    // or lacks what capture reads, or a failover slot asked of a server that has none.
    yield* Effect.tryPromise({ try: () => checkCaptureStart(db.sql, config), catch: (e) => e })
    const stats = new CaptureStats()
    const ac = new AbortController()
    const opts = {
      url: db.url,
      slot: config.slot,
      publication: config.publication,
      failover: config.failover,
      batchChanges: config.batchChanges,
      heartbeatMs: Duration.toMillis(config.heartbeat),
      stallTimeoutMs: Duration.toMillis(config.stallTimeout),
      span: yield* spanRunner,
      log: writeLog
    }
    let running: Promise<void> = Promise.resolve()
    const once = Effect.tryPromise({
      try: () => (running = runCapture(db.sql, opts, ac.signal, stats)),
      catch: (e) => (e instanceof Error ? e : new Error(String(e)))
    }).pipe(
      Effect.tapError((e) =>
        Effect.sync(() => {
          stats.lastError = e.message
          stats.errors++
          // A stall said so itself ("capture stalled: reconnecting"), with what it did about it.
          if (!(e instanceof CaptureStalled)) writeLog("warn", "capture stopped; reconnecting", { error: e.message })
        })
      )
    )
    const backoff = Schedule.min([Schedule.exponential("500 millis", 2), Schedule.spaced("30 seconds")])
    yield* Effect.forkScoped(Effect.retry(once, backoff))
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        ac.abort()
        await running.catch(() => {})
        writeLog("info", "capture stopped", { checkpoint: formatLsn(stats.checkpoint) })
      })
    )
    return { stats, slot: config.slot }
  })
)
