// Capture as an Effect service: runs (captureRun) one after another as the supervisor's
// "capture" loop, each after a failure with backoff (a new replication connection each time,
// resuming from the checkpoint). The supervisor's stop interrupts the run, which ends its
// connections, then says where the checkpoint stands.
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { CaptureConfig } from "../../platform/config.ts"
import { Database } from "../../platform/db/Database.ts"
import { currentSupervisor } from "../../platform/supervisor.ts"
import { spanRunner } from "../../platform/tracing.ts"
import { formatLsn } from "../../platform/db/lsn.ts"
import { checkCaptureStart } from "./publication.ts"
import { captureRun, CaptureStats, onPool } from "./run.ts"

export class Capture extends Context.Service<Capture, { readonly stats: CaptureStats; readonly slot: string }>()(
  "service/Capture"
) {}

/** Between failed runs: 0.5 s, doubling, at most 30 s. */
const backoff = Schedule.min([Schedule.exponential("500 millis", 2), Schedule.spaced("30 seconds")])

export const CaptureLive = Layer.effect(
  Capture,
  Effect.gen(function* () {
    const db = yield* Database
    const config = yield* CaptureConfig
    // Refused here, before the loop starts (exit 1): a publication that carries NEVER columns
    // or lacks what capture reads, or a failover slot asked of a server that has none.
    yield* onPool(db.sql, checkCaptureStart(config))
    const stats = new CaptureStats()
    const opts = {
      url: db.url,
      slot: config.slot,
      publication: config.publication,
      failover: config.failover,
      batchChanges: config.batchChanges,
      heartbeatMs: Duration.toMillis(config.heartbeat),
      stallTimeoutMs: Duration.toMillis(config.stallTimeout),
      span: yield* spanRunner
    }
    const once = captureRun(db.sql, opts, stats).pipe(
      Effect.tapError((e) =>
        Effect.gen(function* () {
          stats.lastError = e.message
          stats.errors++
          // A stall said so itself ("capture stalled: reconnecting"), with what it did about it.
          if (e._tag !== "CaptureStalled")
            yield* Effect.logWarning("capture stopped; reconnecting").pipe(Effect.annotateLogs({ error: e.message }))
        })
      )
    )
    const supervisor = yield* currentSupervisor
    // Stopped in reverse: the run first, then this line with the checkpoint it stored.
    yield* supervisor.onStop(
      "capture",
      Effect.suspend(() =>
        Effect.logInfo("capture stopped").pipe(Effect.annotateLogs({ checkpoint: formatLsn(stats.checkpoint) }))
      )
    )
    yield* supervisor.run("capture", once, { restart: backoff })
    return { stats, slot: config.slot }
  })
)
