// Capture as an Effect service: runs (captureRun) one after another as the supervisor's
// "capture" loop, each after a failure with backoff (a new replication connection each time,
// resuming from the checkpoint). The supervisor's stop interrupts the run, which ends its
// connections, then says where the checkpoint stands.
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import { CaptureConfig } from "../../platform/config.ts"
import { AppDatabase, Database } from "../../platform/db/Database.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { currentSupervisor } from "../../platform/supervisor.ts"
import { spanRunner } from "../../platform/tracing.ts"
import { formatLsn } from "../../platform/db/lsn.ts"
import { behindSlotProblem, readState } from "./checkpoint.ts"
import { checkCaptureStart } from "./publication.ts"
import { captureRun, CaptureStats, onPool } from "./run.ts"
import { slotInfo } from "./slot.ts"

export class Capture extends Context.Service<Capture, { readonly stats: CaptureStats; readonly slot: string }>()(
  "service/Capture"
) {}

/** Between failed runs: 0.5 s, doubling, at most 30 s; from 0.5 s again after a run that lived a minute. */
const backoff = Schedule.min([Schedule.exponential("500 millis", 2), Schedule.spaced("30 seconds")])

export const CaptureLive = Layer.effect(
  Capture,
  Effect.gen(function* () {
    const db = yield* Database
    const app = yield* AppDatabase
    const config = yield* CaptureConfig
    // Refused here, before the loop starts (exit 1): a publication that carries NEVER columns
    // or lacks what capture reads, or a failover slot asked of a server that has none.
    yield* onPool(db.sql, checkCaptureStart(config), app.sql)
    // And a service database behind the slot (restored from an older backup): what it lost
    // cannot be streamed again, so no process starts on it (each run checks it too).
    if (app.separate) {
      const slot = yield* onPool(db.sql, slotInfo(config.slot), app.sql)
      const state = yield* Effect.promise(() => readState(db.sql, config.slot))
      const behind =
        !slot.exists || slot.invalidation !== null || (state !== null && state.bootstrappedAt === null)
          ? null
          : behindSlotProblem({
              slot: config.slot,
              checkpoint: state?.checkpoint ?? null,
              confirmed: slot.confirmedFlush,
              lastCommitAt: state?.lastCommitAt ?? null
            })
      if (behind !== null) return yield* new StartRefused({ message: behind })
    }
    const stats = new CaptureStats()
    const opts = {
      url: db.url,
      ...(app.separate ? { app: { url: app.url, sql: app.sql } } : {}),
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
          if (e._tag !== "CaptureStalled" && e._tag !== "CaptureFenced")
            yield* Effect.logWarning("capture stopped; reconnecting").pipe(Effect.annotateLogs({ error: e.message }))
        })
      ),
      // Fenced out: the run has let its leader lock go; this process captures nothing more (a
      // newer release leads), said once. It does not take the lock again, to keep out of its way.
      Effect.catchTag("CaptureFenced", (e) =>
        Effect.logError("capture stopped: the schema fence takes writes from a newer release only").pipe(
          Effect.annotateLogs({ error: e.message }),
          Effect.andThen(Effect.never)
        )
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
    yield* supervisor.run("capture", once, { restart: backoff, resetAfter: "1 minute" })
    return { stats, slot: config.slot }
  })
)
