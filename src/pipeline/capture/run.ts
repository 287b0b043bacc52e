// The capture loop: leadership, publication, slot health (bootstrap or loud rebuild), then
// the stream applied in batches. Each batch commits views, outbox and checkpoint together;
// only then is the checkpoint acknowledged to the server. The app's database (its slot, its
// catalog, its WAL's messages) and the service's own (the lock, the checkpoint, everything
// written) are two when SERVICE_DATABASE_URL is set (`opts.app`), one otherwise.
//
// The run is an Effect: its connections (the leader lock's, the replication stream) live in
// its scope, the heartbeat, the stall watch and the contract watch (watch.ts) are fibers raced
// against the batcher (batcher.ts), and every way it ends is a typed error (errors.ts). The
// batcher itself is plain async code: capture's measured hot path.
import { Cause, type Duration, Effect, Exit } from "effect"
import type { Sql } from "postgres"
import { formatLsn, parseLsn } from "../../platform/db/lsn.ts"
import { PROJECTION_VERSION, storedProjectionVersion } from "../projection/version.ts"
import { Batcher, commitsAsynchronously } from "./batcher.ts"
import { bootstrap } from "./bootstrap.ts"
import { behindSlotProblem, readState } from "./checkpoint.ts"
import { call, endConnection, log, onPool } from "./effects.ts"
import { type CaptureError, CaptureFailed, toCaptureError } from "./errors.ts"
import { takeLeadership } from "./leader.ts"
import { appOf, type CaptureOptions, type CaptureStats, STALL_TIMEOUT_MS, type Tell } from "./options.ts"
import { ensurePublication } from "./publication.ts"
import { askToContinue } from "./quarantine/markers.ts"
import { CaptureQuarantine } from "./quarantine/state.ts"
// The same rebuild operators run (rebuild-views), here when the shapes' version changed.
import { rebuildViews } from "./rebuild.ts"
import { Resync } from "./resync.ts"
import { setSlotFailover, slotInfo } from "./slot.ts"
import { ReplicationStream } from "./stream.ts"
import { heartbeat, stalledRun, stallOver, watchContract, watchStall } from "./watch.ts"

export { type CaptureOptions, CaptureStats, STALL_TIMEOUT_MS } from "./options.ts"
export { LEADER_LOCK } from "./leader.ts"
export { onPool } from "./effects.ts"

/**
 * Plain async code as an effect. Interrupted (the run stops, or another of its fibers
 * failed), the code's signal aborts and `stop` is called; the effect then waits up to `grace`
 * for the code to finish, so a batch being written ends before the run lets go of its lock.
 */
const plain = <A>(
  f: (signal: AbortSignal) => Promise<A>,
  stop: () => void,
  grace: Duration.Input
): Effect.Effect<A, CaptureError> =>
  Effect.callback<A, CaptureError>((resume) => {
    const ac = new AbortController()
    const running = f(ac.signal)
    running.then(
      (a) => resume(Effect.succeed(a)),
      (e: unknown) => resume(Effect.fail(toCaptureError(e)))
    )
    return Effect.promise(() => {
      ac.abort()
      stop()
      return running.then(
        () => {},
        () => {}
      )
    }).pipe(Effect.timeoutOption(grace), Effect.asVoid)
  })

/** Why a run ended, for its last line: its error's text, or "stopping". */
const outcomeOf = (exit: Exit.Exit<unknown, unknown>) => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return "stopping"
  const e = Cause.squash(exit.cause)
  return e instanceof Error ? e.message : String(e)
}

/**
 * One run: waits for the leader lock, prepares the slot and the views, then streams until it
 * fails (the caller retries) or is interrupted. Its connections are ended when it ends.
 */
export const captureRun = (sql: Sql, opts: CaptureOptions, stats: CaptureStats): Effect.Effect<void, CaptureError> =>
  Effect.scoped(
    Effect.gen(function* () {
      // Taken interruptibly (a standby waits until stopped); the lock's connection is in the scope.
      const lock = yield* takeLeadership(sql, opts)
      const lockPid = (yield* call(() => lock<{ pid: number }[]>`select pg_backend_pid() as pid`))[0]!.pid
      stats.role = "leader"
      stats.leaderSince = new Date()
      stats.running = true
      // Runs before the lock's connection is ended (finalizers run last-added first).
      yield* Effect.addFinalizer((exit) =>
        Effect.gen(function* () {
          stats.streaming = false
          stats.running = false
          stats.role = "standby"
          stats.leaderSince = null
          // Ending the lock's connection releases the lock, also when its server went away.
          yield* endConnection(lock, 1)
          yield* log("info", "capture leader: stepped down", { reason: outcomeOf(exit) })
        })
      )
      const app = appOf(sql, opts)
      const separate = opts.app !== undefined
      yield* onPool(sql, ensurePublication(opts.publication), app.sql)
      // The slot before the checkpoint: the checkpoint is stored before the slot is told, so
      // read in this order it is never behind the slot unless the service's database lost it.
      const slot = yield* onPool(sql, slotInfo(opts.slot), app.sql)
      let state = yield* call(() => readState(sql, opts.slot))
      // A row whose bootstrap never finished (killed midway) asks for it again, with its gap.
      const bootstrapped = state !== null && state.bootstrappedAt !== null
      if (separate && slot.exists && !slot.invalidation && (state === null || bootstrapped)) {
        const behind = behindSlotProblem({
          slot: opts.slot,
          checkpoint: state?.checkpoint ?? null,
          confirmed: slot.confirmedFlush,
          lastCommitAt: state?.lastCommitAt ?? null
        })
        if (behind !== null) return yield* new CaptureFailed({ message: behind })
      }
      if (!state || !bootstrapped || !slot.exists || slot.invalidation) {
        const gap =
          state && bootstrapped
            ? slot.exists
              ? `replication slot ${opts.slot} was invalidated (${slot.invalidation})`
              : `replication slot ${opts.slot} was lost`
            : null
        if (gap) {
          yield* log("error", "capture slot lost: recreating it and rebuilding every view from the app tables", {
            slot: opts.slot,
            reason: gap,
            checkpoint: formatLsn(state!.checkpoint),
            consequence: `events for changes after checkpoint ${formatLsn(state!.checkpoint)} and before the rebuild could not be derived and will not be sent`
          })
        }
        const t0 = Date.now()
        // Not interrupted halfway: the lock is held until the slot and the views are made.
        const result = yield* Effect.uninterruptible(
          onPool(sql, bootstrap(app.url, opts.slot, gap, opts.failover ?? false, opts.publication), app.sql)
        )
        yield* log(
          "info",
          gap ? "views rebuilt after slot loss" : "initial views built from existing rows (no events for them)",
          {
            slot: opts.slot,
            rows: result.rows,
            views: result.views,
            consistentPoint: formatLsn(result.consistentPoint),
            ms: Date.now() - t0
          }
        )
        state = yield* call(() => readState(sql, opts.slot))
        if (!state) return yield* new CaptureFailed({ message: "bootstrap left no capture state" })
      } else if (opts.failover && slot.failover === false) {
        yield* call(() => setSlotFailover(app.url, opts.slot, true))
        yield* log("info", "replication slot marked for failover", { slot: opts.slot })
      }
      // Views stored in older shapes are rebuilt from the mirror before streaming resumes.
      const stored = yield* onPool(sql, storedProjectionVersion)
      if (stored !== PROJECTION_VERSION) {
        const t0 = Date.now()
        const r = yield* Effect.uninterruptible(onPool(sql, rebuildViews(), app.sql))
        yield* log("info", "record shapes changed: every view rebuilt from the mirror", {
          from: stored,
          to: PROJECTION_VERSION,
          views: r.views,
          changed: r.changed,
          ms: Date.now() - t0
        })
      }
      const from = state.checkpoint
      const lastCommitAt = state.lastCommitAt
      stats.checkpoint = from
      const applied = yield* stallOver(sql, opts)
      // Held records and broken tables as the checkpoint left them (quarantine/).
      const quarantine = yield* call(() => CaptureQuarantine.load(sql, opts.heldInMemory))
      const asyncCommit = yield* call(() => commitsAsynchronously(sql))
      const resync = new Resync(opts.slot, opts.resyncChunk, opts.resyncAfterRead)
      // Chunks between their watermarks at the checkpoint, as the last stored batch left them.
      const [walEnd] = yield* call(() => app.sql<{ lsn: string }[]>`select pg_current_wal_insert_lsn()::text as lsn`)
      resync.restore(state.openWindows, from, parseLsn(walEnd!.lsn))
      const services = yield* Effect.context<never>()
      const tell: Tell = (level, message, fields) => void Effect.runPromiseWith(services)(log(level, message, fields))
      const stream = yield* Effect.acquireRelease(
        Effect.sync(() => new ReplicationStream(app.url, opts.slot, opts.publication, from)),
        (s) => Effect.promise(() => s.close())
      )
      const streaming = Effect.gen(function* () {
        yield* call(() => stream.start(from))
        stats.streaming = true
        stats.lastError = null // streaming again: what stopped it is over
        yield* log("info", "capture streaming", { slot: opts.slot, from: formatLsn(from) })
        // Retries a run before this one queued and stored (quarantine/state.ts): they go on now,
        // without waiting for a request or traffic.
        if (quarantine.retriesQueued) yield* call(() => askToContinue(app.sql))
        // The batcher, until its stream fails or a heartbeat finds the lock lost; beside it the
        // re-reads of app rows (resync.ts) and the contract watch, which never end on their own.
        yield* Effect.raceFirst(
          Effect.raceFirst(
            plain(
              (signal) =>
                new Batcher(
                  { sql, stream, opts, stats, quarantine, resync, tell, applied, asyncCommit },
                  from,
                  lastCommitAt
                ).run(signal),
              () => void stream.close(),
              opts.stallTimeoutMs ?? STALL_TIMEOUT_MS
            ),
            heartbeat(app.sql, lock, lockPid, opts.heartbeatMs)
          ),
          Effect.raceFirst(
            plain(
              (signal) =>
                resync.run(sql, app.sql, quarantine, signal, (e) =>
                  tell("warn", "capture resync: reading the app table failed; trying again", {
                    error: e instanceof Error ? e.message : String(e)
                  })
                ),
              () => {},
              opts.stallTimeoutMs ?? STALL_TIMEOUT_MS
            ),
            watchContract(sql, app.sql, opts.publication, opts.contractCheckMs ?? opts.heartbeatMs)
          ).pipe(Effect.andThen(Effect.never))
        )
      })
      // Watched from before it starts: a connection that hangs may never even start.
      yield* Effect.raceFirst(streaming, watchStall(app.sql, stream, opts.stallTimeoutMs ?? STALL_TIMEOUT_MS)).pipe(
        Effect.tapError((e) =>
          e._tag === "CaptureStalled" ? stalledRun(sql, opts, stats, stream, lockPid, e) : Effect.void
        )
      )
    })
  ).pipe(
    // A bug's throw ends the run like any failure (and is retried), rather than ending capture.
    Effect.catchDefect((defect) => Effect.fail(toCaptureError(defect)))
  )
