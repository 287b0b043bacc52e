// The capture loop: leadership, publication, slot health (bootstrap or loud rebuild), then
// the stream applied in batches. Each batch commits views, outbox and checkpoint together;
// only then is the checkpoint acknowledged to the server. The app's database (its slot, its
// catalog, its WAL's messages) and the service's own (the lock, the checkpoint, everything
// written) are two when SERVICE_DATABASE_URL is set (`opts.app`), one otherwise.
//
// The run is an Effect: its connections (the leader lock's, the replication stream) live in
// its scope, the heartbeat and the stall watch are fibers on a Schedule raced against the
// batcher, and every way it ends is a typed error (errors.ts). The batcher itself (consume,
// below), pgoutput decoding and a batch's prepare and SQL stay plain async functions: they
// are capture's measured hot path (tens of thousands of messages a second, a batch prepared
// while the one before is written), where an effect per message would cost throughput.
import { Cause, Duration, Effect, Exit, Schedule, type Scope } from "effect"
import type { Sql } from "postgres"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { connect } from "../../platform/db/Database.ts"
import { appSqlLayer, Sql as SqlService } from "../../platform/db/Sql.ts"
import { prepareBatch } from "./batch.ts"
import { bootstrap } from "./bootstrap.ts"
import { advanceCheckpoint, behindSlotProblem, CheckpointMoved, confirmCheckpoint, readState } from "./checkpoint.ts"
import { decodeChange } from "./decode.ts"
import {
  CaptureFailed,
  CaptureStalled,
  LeaderLockUnreachable,
  LeaderLost,
  toCaptureError,
  type CaptureError
} from "./errors.ts"
import { LargeTransaction } from "./large.ts"
import { LEADER_LOCK, leaderApplicationName, leaderInfo } from "./leader.ts"
import { formatLsn, parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import { ensurePublication, followOwnPublication } from "./publication.ts"
import { setSlotFailover, slotInfo } from "./slot.ts"
import { ReplicationStream } from "./stream.ts"
import type { SpanRunner } from "../../platform/tracing.ts"
// The same rebuild operators run (rebuild-views), here when the shapes' version changed.
import { rebuildViews } from "./rebuild.ts"
import { PROJECTION_VERSION, storedProjectionVersion } from "../projection/version.ts"
import { TABLES } from "../projection/tables.ts"
import type { RowChange, Txn } from "./txn.ts"
import { mirroredKeys, type Store } from "../projection/store.ts"
import { PHASES, type CaptureProfile } from "./profile.ts"
import { contractNow, relationProblems } from "./quarantine/contract.ts"
import {
  CONTRACT_PREFIX,
  contractMarkerOf,
  markerOf,
  QUARANTINE_PREFIX,
  type QuarantineMarker
} from "./quarantine/markers.ts"
import { CaptureQuarantine, deltaIsEmpty, type QuarantineDelta } from "./quarantine/state.ts"
import { Resync, RESYNC_PREFIX } from "./resync.ts"
import { APP_COLUMNS } from "../../domain/records/columns.ts"

export interface CaptureOptions {
  /** The service's own database: the leader lock's connections. */
  readonly url: string
  /**
   * The app's database when it is not the service's (SERVICE_DATABASE_URL): its URL (the
   * replication stream, the slot's snapshot) and a pool (its catalog, the slot, the messages
   * capture writes into its WAL). Absent: `url` and the pool capture runs on.
   */
  readonly app?: { readonly url: string; readonly sql: Sql }
  readonly slot: string
  readonly publication: string
  /** Create (or mark) the slot with `failover`, so standbys that sync slots keep it (17+). */
  readonly failover?: boolean
  /** Row changes applied together in one database transaction, at most. */
  readonly batchChanges: number
  /** A transaction with more changes than this is applied as it streams. */
  readonly largeTransaction?: number
  readonly heartbeatMs: number
  /** Nothing from the server this long while WAL waits in the slot: the stream is stalled (default 60 s). */
  readonly stallTimeoutMs?: number
  /** Runs each applied batch in a trace span (when tracing is on). */
  readonly span?: SpanRunner
  /** Adds where capture's time goes, by phase (bench/capture prints it). */
  readonly profile?: CaptureProfile
  /** How often the app tables' fit is read from the catalog (default: the heartbeat's interval). */
  readonly contractCheckMs?: number
  /** Held keys kept in memory, at most (quarantine/state.ts; tests lower it). */
  readonly heldInMemory?: number
  /** Keys re-read from an app table per chunk (resync.ts; tests lower it). */
  readonly resyncChunk?: number
  /** Tests only: runs between a re-read chunk's read and its high watermark. */
  readonly resyncAfterRead?: (table: string, keys: ReadonlyArray<string>) => Promise<void>
}

/** Counters the status and metrics read. */
export class CaptureStats {
  /** leader: this process holds the leader lock; standby: it waits for it (or retries after an error). */
  role: "leader" | "standby" = "standby"
  leaderSince: Date | null = null
  running = false
  streaming = false
  checkpoint: Lsn = 0n
  lastAppliedAt: Date | null = null
  lastError: string | null = null
  /** Runs that failed (each retried with backoff). */
  errors = 0
  /** Stalls this process noticed (each ended its run: it reconnects). */
  stalls = 0
  changes = 0
  batches = 0
  /** Records capture held in quarantine in this process (each time one was held, or held again). */
  quarantined = 0
  readonly events = new Map<string, number>()
  countEvents(kinds: Iterable<[string, number]>) {
    for (const [k, n] of kinds) this.events.set(k, (this.events.get(k) ?? 0) + n)
  }
}

/** pgoutput commit times are microseconds since the Unix epoch. */
const commitDate = (t: unknown) => new Date(Number((t as bigint) / 1000n))

export { LEADER_LOCK } from "./leader.ts"

/** How often a standby looks whether the leader lock is free. */
const STANDBY_POLL = Duration.seconds(2)

export const STALL_TIMEOUT_MS = 60_000

/** Messages taken from the stream between two turns of the event loop while a batch is written. */
const TURN_EVERY = 200
/** Row changes of a large transaction written to the mirror at a time (two in memory: one written, one decoded). */
const LARGE_CHUNK = 2000

/** The prefix of the transactional messages the heartbeat and the stall watch write into the WAL. */
const HEARTBEAT_PREFIX = "safety-records-heartbeat"

/** A call into the database (or the plain code), its rejection a capture error. */
const call = <A>(f: () => Promise<A>): Effect.Effect<A, CaptureError> =>
  Effect.tryPromise({ try: f, catch: toCaptureError })

/** A step written over `Sql` (the publication, the slot, the leader, a rebuild), on capture's
 *  pool (and `app`, the app's database's, when it has its own: AppSql); a database failure (a
 *  defect there) ends the run as any other failure does. */
export const onPool = <A, E extends CaptureError>(
  sql: Sql,
  effect: Effect.Effect<A, E, SqlService>,
  app?: Sql
): Effect.Effect<A, CaptureError> =>
  effect.pipe(
    Effect.provide(SqlService.fromPool(sql)),
    Effect.provide(appSqlLayer(app !== undefined && app !== sql ? app : undefined)),
    Effect.catchDefect((defect) => Effect.fail(toCaptureError(defect)))
  )

/** The app's pool and URL for these options (the service's own when both are one database). */
const appOf = (sql: Sql, opts: CaptureOptions) => opts.app ?? { url: opts.url, sql }

type Tell = (level: "info" | "warn" | "error", message: string, fields: Record<string, unknown>) => void

/** A log line: its text is the contract (docs/operations.md), its fields are annotations. */
const log = (level: "info" | "warn" | "error", message: string, fields: Record<string, unknown> = {}) =>
  (level === "info"
    ? Effect.logInfo(message)
    : level === "warn"
      ? Effect.logWarning(message)
      : Effect.logError(message)
  ).pipe(Effect.annotateLogs(fields))

/** Ends a connection; ending it releases its session's advisory lock, also when its server went away. */
const endConnection = (conn: Sql, timeout: number) => Effect.promise(() => conn.end({ timeout }).catch(() => {}))

/**
 * One look at the leader lock: a connection of its own is made (and put in the run's scope)
 * and tries it; it is the lock's connection when the lock was taken, else it is ended. Named
 * as it takes the lock, so pg_stat_activity (a standby's log, `status`) tells which process
 * leads. Bounded: postgres.js retries a connection the network cuts while it is made, without end.
 */
const tryLock = (opts: CaptureOptions): Effect.Effect<Sql | null, CaptureError, Scope.Scope> =>
  Effect.gen(function* () {
    const limit = opts.stallTimeoutMs ?? STALL_TIMEOUT_MS
    const lock = yield* Effect.acquireRelease(
      Effect.sync(() => connect(opts.url, 1, { keepForever: true, arrays: false })),
      (lock) => endConnection(lock, 1)
    )
    const rows = yield* call(
      () => lock<{ ok: boolean }[]>`
        select ok, case when ok then set_config('application_name', ${leaderApplicationName()}, false) end as name
        from (select pg_try_advisory_lock(${LEADER_LOCK}) as ok) t`
    ).pipe(
      Effect.timeoutOrElse({
        duration: limit,
        orElse: () =>
          Effect.fail(
            new LeaderLockUnreachable({
              message: `capture could not reach the database for its leader lock within ${Math.round(limit / 1000)} s`
            })
          )
      }),
      Effect.tapError(() => endConnection(lock, 0))
    )
    if (rows[0]?.ok) return lock
    // Another process took it first.
    yield* endConnection(lock, 1)
    return null
  })

/**
 * Waits as a standby until this process holds the leader lock, and returns the lock's
 * connection, which the run's scope ends. The lock lives on a connection of its own (not
 * sql.reserve(): postgres.js 3.4.9 can throw an uncatchable error when a reserved
 * connection's server goes away), made only when the lock looks free: a standby holds no
 * connection of its own, and the leader's connection start says since when it leads.
 */
const takeLeadership = (sql: Sql, opts: CaptureOptions) =>
  Effect.gen(function* () {
    const t0 = Date.now()
    let logged: number | null | undefined
    for (;;) {
      let holder = yield* onPool(sql, leaderInfo)
      if (holder === null) {
        const lock = yield* tryLock(opts)
        if (lock !== null) {
          yield* log(
            "info",
            "capture leader: took over",
            logged === undefined ? {} : { waitedSeconds: Math.round((Date.now() - t0) / 1000) }
          )
          return lock
        }
        holder = yield* onPool(sql, leaderInfo)
      }
      // Once, and again only when another process leads.
      if (logged === undefined || (holder !== null && holder.pid !== logged)) {
        logged = holder?.pid ?? null
        yield* log("info", "capture standby: waiting for the leader lock", {
          leader:
            holder === null
              ? null
              : {
                  pid: holder.pid,
                  applicationName: holder.applicationName,
                  clientAddress: holder.clientAddress,
                  since: holder.since
                }
        })
      }
      yield* Effect.sleep(STANDBY_POLL)
    }
  })

/**
 * Watches a stream for a stall: a connection that hangs (a dead network path, a walsender
 * gone without a word) sends nothing and fails nothing. A live server says something at
 * least every wal_sender_timeout / 2 (keepalives) and carries the heartbeat. After half the
 * timeout without a word, a probe is written into the WAL (a transactional message the slot
 * must deliver); nothing arriving for the whole timeout after that is a stall. Messages
 * still waiting to be applied (capture busy, e.g. behind rebuild-views) are not one.
 * Fails with CaptureStalled; never ends otherwise.
 */
const watchStall = (sql: Sql, stream: ReplicationStream, timeoutMs: number): Effect.Effect<void, CaptureStalled> => {
  let probedAt: number | null = null
  const look = Effect.suspend((): Effect.Effect<void, CaptureStalled> => {
    const now = Date.now()
    const quiet = stream.pending > 0 ? 0 : now - stream.lastReceivedAt
    if (quiet < timeoutMs / 2) {
      probedAt = null
    } else if (probedAt === null || stream.lastReceivedAt > probedAt) {
      probedAt = now
      // The database itself is unreachable: the stream fails on its own, not a stall. (`sql`:
      // the app's database, whose WAL the stream reads.)
      return call(() => sql`select pg_logical_emit_message(true, ${HEARTBEAT_PREFIX}, 'probe')`).pipe(Effect.ignore)
    } else if (quiet >= timeoutMs && now - probedAt >= timeoutMs / 4) {
      return Effect.fail(
        new CaptureStalled({
          message: `capture stalled: nothing received from the replication stream for ${Math.round(quiet / 1000)} s while WAL waits in the slot (a probe written ${Math.round((now - probedAt) / 1000)} s ago never arrived)`
        })
      )
    }
    return Effect.void
  })
  return Effect.schedule(look, Schedule.spaced(Math.max(50, Math.min(1000, timeoutMs / 4)))).pipe(Effect.asVoid)
}

/**
 * An idle database still moves the slot: a tiny transactional message every interval, into the
 * app's WAL (`sql`: the app's database). The lock belongs to its session: should that
 * connection be gone or replaced (postgres.js reconnects silently), another process may lead
 * by now, so this one steps down (LeaderLost).
 * A beat that gets no answer within the interval is let go: the next one asks again.
 */
const heartbeat = (sql: Sql, lock: Sql, lockPid: number, intervalMs: number): Effect.Effect<void, LeaderLost> => {
  const lost = (why: string) => new LeaderLost({ message: `capture lost its leader lock (${why}); stepping down` })
  const emit = call(() => sql`select pg_logical_emit_message(true, ${HEARTBEAT_PREFIX}, '')`).pipe(Effect.ignore)
  const check = call(() => lock<{ pid: number }[]>`select pg_backend_pid() as pid`).pipe(
    Effect.mapError(() => lost("its connection failed")),
    Effect.flatMap(([r]) => (r?.pid === lockPid ? Effect.void : Effect.fail(lost("its connection was replaced"))))
  )
  const beat = Effect.all([emit, check], { concurrency: "unbounded", discard: true }).pipe(
    Effect.timeoutOption(intervalMs)
  )
  return Effect.schedule(beat, Schedule.spaced(intervalMs)).pipe(Effect.asVoid)
}

/**
 * The contract watch: the catalog's view of every followed app table (in the publication, its
 * columns and their types) against what capture stored. A table that changed is written into
 * the WAL as a contract message, which capture meets in stream order, as it meets a Relation
 * message: a table that left the publication sends none (its changes stop coming), so without
 * this nothing would tell. Each finding is written once (again only when it changes).
 */
const watchContract = (sql: Sql, app: Sql, publication: string, intervalMs: number): Effect.Effect<void> => {
  const sent = new Map<string, string>()
  const look = call(async () => {
    // A publication the service made follows the app's tables first (publication.ts).
    await followOwnPublication(app, publication)
    const now = await contractNow(app, publication)
    const stored = new Map(
      (await sql<{ tbl: string; problems: string[] }[]>`select tbl, problems from service.capture_contract`).map(
        (r) => [r.tbl, r.problems.join("\n")] as const
      )
    )
    for (const table of Object.keys(APP_COLUMNS)) {
      const problems = now.get(table) ?? null
      const want = problems?.join("\n") ?? ""
      if (want === (stored.get(table) ?? "")) {
        sent.delete(table)
        continue
      }
      if (sent.get(table) === want) continue
      await app`select pg_logical_emit_message(true, ${CONTRACT_PREFIX}, ${JSON.stringify({ table, problems })})`
      sent.set(table, want)
    }
  }).pipe(Effect.ignore)
  return Effect.repeat(look, Schedule.spaced(intervalMs)).pipe(Effect.asVoid)
}

/**
 * After a stall: the server may still hold this run's walsender (the slot stays active, so
 * no new stream could start) and its leader lock session (so no process could lead, until
 * TCP keepalives give up hours later). Both are ended from the pool, which still answers.
 */
const releaseStalledSessions = async (sql: Sql, app: Sql, slot: string, lockPid: number) => {
  await app`
    select pg_terminate_backend(active_pid) from pg_replication_slots
    where slot_name = ${slot} and active_pid is not null and active_pid <> pg_backend_pid()`
  await sql`
    select pg_terminate_backend(pid) from pg_stat_activity
    where pid = ${lockPid} and application_name = ${leaderApplicationName()}`
}

/** A stall: said once, in the log and in the database (status, metrics); the old sessions are ended so a new run can start. */
const stalledRun = (
  sql: Sql,
  opts: CaptureOptions,
  stats: CaptureStats,
  stream: ReplicationStream,
  lockPid: number,
  stall: CaptureStalled
) =>
  Effect.gen(function* () {
    stats.stalls++
    yield* Effect.promise(() => stream.close())
    const reconnects = yield* call(async () => {
      await releaseStalledSessions(sql, appOf(sql, opts).sql, opts.slot, lockPid)
      const [r] = await sql<{ reconnects: number }[]>`
        update service.capture_state
        set stalled_at = coalesce(stalled_at, now()), stall_reason = ${stall.message}, stall_reconnects = stall_reconnects + 1
        where slot_name = ${opts.slot} returning stall_reconnects as reconnects`
      return r?.reconnects ?? 1
    }).pipe(
      // The database does not answer either: the next run's errors tell.
      Effect.orElseSucceed(() => 1)
    )
    yield* log("warn", "capture stalled: reconnecting", {
      slot: opts.slot,
      why: stall.message,
      checkpoint: formatLsn(stats.checkpoint),
      reconnects
    })
  })

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
      stats.checkpoint = from
      const applied = yield* stallOver(sql, opts)
      // Held records and broken tables as the checkpoint left them (quarantine/).
      const quarantine = yield* call(() => CaptureQuarantine.load(sql, opts.heldInMemory))
      const resync = new Resync(opts.resyncChunk, opts.resyncAfterRead)
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
        // The batcher, until its stream fails or a heartbeat finds the lock lost; beside it the
        // re-reads of app rows (resync.ts) and the contract watch, which never end on their own.
        yield* Effect.raceFirst(
          Effect.raceFirst(
            plain(
              (signal) => consume(sql, stream, from, opts, signal, stats, applied, quarantine, tell, resync),
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

/**
 * A stall noticed before (by this process or one that went away) is over at the first apply:
 * returns what consume calls after each batch (plain code: it runs this run's log line through
 * the run's own services).
 */
const stallOver = (sql: Sql, opts: CaptureOptions) =>
  Effect.gen(function* () {
    let stallMarked =
      (yield* call(
        () => sql<{ stalled: boolean }[]>`
      select stalled_at is not null as stalled from service.capture_state where slot_name = ${opts.slot}`
      ))[0]?.stalled ?? false
    const services = yield* Effect.context<never>()
    const over = call(
      () => sql<{ seconds: number; reconnects: number }[]>`
        with before as (
          select stalled_at, stall_reconnects from service.capture_state
          where slot_name = ${opts.slot} and stalled_at is not null for update)
        update service.capture_state c set stalled_at = null, stall_reason = null, stall_reconnects = 0
        from before where c.slot_name = ${opts.slot}
        returning extract(epoch from now() - before.stalled_at)::float8 as seconds, before.stall_reconnects as reconnects`
    ).pipe(
      Effect.flatMap(([r]) =>
        r
          ? log("info", "capture stall over: applying again", {
              slot: opts.slot,
              stalledSeconds: Math.round(r.seconds),
              reconnects: r.reconnects
            })
          : Effect.void
      ),
      Effect.catch(() =>
        Effect.sync(() => {
          stallMarked = true // told at the next apply instead
        })
      )
    )
    return async (): Promise<void> => {
      if (!stallMarked) return
      stallMarked = false
      await Effect.runPromiseWith(services)(over)
    }
  })

/** The followed app tables a TRUNCATE message names. */
const truncatedTables = (msg: Message & { tag: "truncate" }): ReadonlyArray<string> =>
  msg.relations.filter((rel) => rel.schema === "app" && rel.name in TABLES).map((rel) => rel.name)

/** The ids of the events the given transactions wrote (for a batch's trace span: at most 100; none if the read fails). */
const eventIdsOf = async (sql: Sql, commitLsns: ReadonlyArray<Lsn>): Promise<string[]> =>
  sql<{ id: string }[]>`
    select id::text from service.events where commit_lsn = any(${commitLsns.map(formatLsn)}::pg_lsn[]) order by commit_lsn, seq limit 100`.then(
    (rows) => rows.map((r) => r.id),
    () => []
  )

/** Runs `f` in a span when tracing is on. */
const traced = <A>(
  span: SpanRunner | undefined,
  name: string,
  attributes: Readonly<Record<string, unknown>>,
  f: (annotate: (key: string, value: unknown) => void) => Promise<A>
) => (span === undefined ? f(() => {}) : span(name, attributes, f))

/**
 * The batcher: takes the stream's messages into transactions and batches, pipelined (a batch
 * prepared while the one before is written). Plain async code on purpose: it runs once per
 * message, tens of thousands a second, where an effect per message costs throughput. It runs
 * until its stream fails (the run then ends with that error) or `signal` aborts.
 */
const consume = async (
  sql: Sql,
  stream: ReplicationStream,
  start: Lsn,
  opts: CaptureOptions,
  signal: AbortSignal,
  stats: CaptureStats,
  applied: () => Promise<void>,
  quarantine: CaptureQuarantine = new CaptureQuarantine(),
  tell: Tell = () => {},
  resync: Resync = new Resync()
) => {
  const large = opts.largeTransaction ?? 10_000
  const profile = opts.profile
  const app = appOf(sql, opts).sql
  /** The last commit taken into a batch: later commits only are new. */
  let accepted = start
  /** The stored checkpoint: where the last batch written left it. */
  let committed = start
  let pending: Txn[] = []
  let pendingChanges = 0
  let current: { xid: number; changes: RowChange[]; markers?: QuarantineMarker[] } | null = null
  // Tables whose contract a Relation message found broken (or the stored state did): a later
  // Relation that fits again is passed on. Others that fit are not (most batches meet none).
  const seenBroken = new Set(quarantine.broken.keys())
  const mark = (m: QuarantineMarker) => {
    if (current === null) return
    ;(current.markers ??= []).push(m)
  }
  let busy = false
  // The batch being written, at most one: the next one is prepared meanwhile, reading its
  // final state where the database may not show it yet (src/pipeline/projection/store.ts).
  // A confirmed stretch of WAL (below) is written the same way, with no store.
  let writing: { readonly store: Store | null; readonly done: Promise<void> } | null = null
  stream.idle = () => !busy && current === null && pending.length === 0 && stream.pending === 0 && writing === null

  // A keepalive the server wants answered. With everything received applied, nothing for
  // capture lies between the checkpoint and what the server sent: that position is stored as
  // the checkpoint first, then confirmed, so the slot never confirms what the service's
  // database does not hold (checkpoint.ts, behindSlotProblem). Confirming it matters: a
  // walsender waits for it before its PostgreSQL can shut down. If the store fails with one
  // database (that server is shutting down), it is confirmed anyway, as before: nothing can be
  // behind the slot there; with two, the slot waits for the next answer.
  stream.onKeepalive = (sent) => {
    if (!stream.idle() || sent <= committed) {
      void stream.ack(committed)
      return
    }
    const from = committed
    if (sent > accepted) accepted = sent
    const w = {
      store: null,
      done: confirmCheckpoint(sql, opts.slot, from, sent).then(
        async () => {
          if (committed === from) committed = sent
          stats.checkpoint = committed
          await stream.ack(committed)
        },
        async (e: unknown) => {
          if (opts.app !== undefined || e instanceof CheckpointMoved) throw e
          await stream.ack(sent)
        }
      )
    }
    writing = w
    w.done.then(
      () => {
        if (writing === w) writing = null
      },
      (e: unknown) => stream.fail(e instanceof Error ? e : new Error(String(e)))
    )
  }

  /** Waits until the batch being written is stored; throws its error. */
  const settle = async () => {
    const w = writing
    if (w === null) return
    await w.done
    if (writing === w) writing = null
  }

  /** Prepares the pending transactions as a batch and starts writing it once the batch before is stored. */
  const flush = async () => {
    if (pending.length === 0) return
    const batch = pending
    pending = []
    pendingChanges = 0
    const last = batch[batch.length - 1]!
    const t0 = performance.now()
    const prepared = await prepareBatch(sql, batch, writing?.store ?? null, quarantine)
    const t1 = performance.now()
    profile?.add(PHASES.prepare, t1 - t0)
    if (writing !== null) {
      await settle()
      profile?.add(PHASES.waiting, performance.now() - t1)
    }
    const from = committed
    const w = {
      store: prepared.store,
      done: traced(
        opts.span,
        "capture.batch",
        {
          "capture.slot": opts.slot,
          "capture.transactions": batch.length,
          "capture.checkpoint": formatLsn(last.endLsn)
        },
        async (annotate) => {
          const begun = performance.now()
          let opened = 0
          let answered = 0
          await sql.begin(async (tx) => {
            opened = performance.now()
            // The checkpoint first: it fails the transaction, before anything is written, when
            // another process moved it. All statements go out at once, answered in order.
            await Promise.all([
              advanceCheckpoint(tx, opts.slot, from, last.endLsn, last.commitTime),
              ...prepared.write(tx)
            ])
            await prepared.reshape(tx)
            answered = performance.now()
          })
          if (profile) {
            const end = performance.now()
            profile.add(PHASES.write, end - begun)
            profile.add(PHASES.begin, opened - begun)
            profile.add(PHASES.statements, answered - opened)
            profile.add(PHASES.commit, end - answered)
          }
          committed = last.endLsn
          reread(prepared.store.incomplete)
          await told(prepared.quarantine)
          annotate("capture.changes", prepared.changes)
          annotate("capture.events", prepared.events.length)
          // Read only for a span: the next batch's write waits behind this.
          if (opts.span !== undefined && prepared.events.length > 0)
            annotate("event.ids", await eventIdsOf(sql, [...new Set(prepared.events.map((e) => e.commitLsn))]))
          await stream.ack(committed)
          stats.checkpoint = committed
          stats.lastAppliedAt = new Date()
          stats.changes += prepared.changes
          stats.batches++
          const tally = new Map<string, number>()
          for (const e of prepared.events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
          stats.countEvents(tally)
          await applied()
        }
      )
    }
    writing = w
    // Done: the next batch reads the database alone. Failed: the run ends with its error
    // (the stream is failed so the loop hears of it even while it waits for messages).
    w.done.then(
      () => {
        if (writing === w) writing = null
      },
      (e: unknown) => stream.fail(e instanceof Error ? e : new Error(String(e)))
    )
  }

  /** Rows a batch applied that lack values the mirror does not have either: read again from the app (resync.ts). */
  const reread = (rows: ReadonlyArray<readonly [string, string]>) => {
    if (rows.length === 0) return
    quarantine.rereads.push(...rows)
    resync.kick()
  }

  /** After a batch commits: what it held and released, said in the log once; the quarantine's work goes on. */
  const told = async (delta: QuarantineDelta) => {
    resync.applied(committed)
    // Retries queued past this batch's share: a request makes the next batch, without waiting for traffic.
    if (quarantine.retriesQueued)
      await app`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, '{"op":"continue"}')`
    if (quarantine.rereads.length > 0) resync.kick()
    if (deltaIsEmpty(delta)) return
    quarantine.settled(delta)
    if (delta.resync.length > 0) resync.kick()
    stats.quarantined += delta.held.length
    for (const c of delta.contract) {
      if (c.problems === null) tell("info", "capture contract: app table fits again", { table: `app.${c.table}` })
      else
        tell("error", "capture contract: app table no longer fits what the service reads; its records are held", {
          table: `app.${c.table}`,
          problems: c.problems
        })
    }
    // One line per record held (the first 20 of a batch: a broken table can hold many at once).
    for (const h of delta.held.slice(0, 20))
      tell("warn", "capture quarantine: record held", {
        table: h.table,
        key: h.ref.id,
        companyId: h.companyId,
        lsn: formatLsn(h.lsn),
        error: h.error,
        blockedBy: h.info.blockedBy
      })
    if (delta.held.length > 20)
      tell("warn", "capture quarantine: more records held", { records: delta.held.length - 20 })
    if (delta.released.length > 0)
      tell("info", "capture quarantine: records released", { records: delta.released.length })
    for (const r of delta.resync) {
      if (r.after === "") tell("info", "capture resync: re-reading app table", { table: `app.${r.table}` })
      else if (r.after === null) tell("info", "capture resync: app table re-read", { table: `app.${r.table}` })
    }
  }

  /** Keys of a table's range in the mirror, everything taken so far written (a resync's high watermark). */
  const mirrored = async (table: string, from: string, to: string | null) => {
    await drain()
    return mirroredKeys(sql, table, { from, to })
  }

  /** Everything taken so far is written: before the mirror is read or written outside a batch. */
  const drain = async () => {
    await flush()
    await settle()
  }

  // Streams the rest of an oversized transaction into one open database transaction.
  const applyLarge = async (first: RowChange[]) => {
    await drain()
    let buffered: RowChange[] = first
    let total = 0
    const applyLargeTransaction = () =>
      sql.begin(async (tx) => {
        const big = new LargeTransaction(tx, quarantine)
        // A chunk is written while the next one is decoded: at most one in flight, so memory
        // holds two chunks. Each chunk reads the mirror as the one before left it (the
        // transaction's statements run in order).
        let inflight: Promise<void> | null = null
        const settled = async () => {
          if (inflight === null) return
          const p = inflight
          inflight = null
          await p
        }
        for (;;) {
          if (buffered.length >= LARGE_CHUNK) {
            await settled()
            const p = big.add(buffered)
            p.catch(() => {}) // awaited by settled(); a failure must not go unhandled meanwhile
            inflight = p
            total += buffered.length
            buffered = []
          }
          const msg = await stream.next()
          if (msg.tag === "insert" || msg.tag === "update" || msg.tag === "delete") {
            const cs = decodeChange(msg)
            if (resync.open > 0) for (const c of cs) resync.note(c.table, c.key)
            buffered.push(...cs)
          } else if (msg.tag === "commit") {
            await settled()
            if (buffered.length > 0) await big.add(buffered)
            total += buffered.length
            const endLsn = parseLsn(msg.commitEndLsn!)
            const commitTime = commitDate(msg.commitTime)
            if (endLsn <= accepted) throw new Error("large transaction at or below the checkpoint")
            const { tally, quarantine: delta } = await big.finish(endLsn, commitTime)
            await advanceCheckpoint(tx, opts.slot, committed, endLsn, commitTime)
            return { endLsn, tally, delta, incomplete: big.incomplete }
          } else if (msg.tag === "relation") {
            if (msg.schema !== "app" || !(msg.name in TABLES)) continue
            await settled()
            if (buffered.length > 0) await big.add(buffered)
            total += buffered.length
            buffered = []
            const problems = relationProblems(msg.name, msg.columns)
            if (problems.length > 0) {
              seenBroken.add(msg.name)
              big.mark({ kind: "contract", table: msg.name, problems })
            } else if (seenBroken.delete(msg.name)) big.mark({ kind: "contract", table: msg.name, problems: null })
          } else if (msg.tag === "truncate") {
            // What this transaction wrote so far is in the mirror already (in this database
            // transaction): every mirrored row of the tables goes, in chunks.
            await settled()
            if (buffered.length > 0) await big.add(buffered)
            total += buffered.length
            buffered = []
            for (const table of truncatedTables(msg)) {
              resync.truncated(table)
              const keys = await mirroredKeys(tx, table, null, true)
              for (let i = 0; i < keys.length; i += 1000) {
                const chunk = keys.slice(i, i + 1000).map((key): RowChange => ({ table, key, data: null }))
                await big.add(chunk)
                total += chunk.length
              }
            }
          }
        }
      })
    const done = await traced(
      opts.span,
      "capture.batch",
      { "capture.slot": opts.slot, "capture.transactions": 1, "capture.large": true },
      async (annotate) => {
        const c = await applyLargeTransaction()
        annotate("capture.checkpoint", formatLsn(c.endLsn))
        annotate("capture.changes", total)
        const events = [...c.tally.values()].reduce((a, b) => a + b, 0)
        annotate("capture.events", events)
        if (opts.span !== undefined && events > 0) annotate("event.ids", await eventIdsOf(sql, [c.endLsn]))
        return c
      }
    )
    accepted = committed = done.endLsn
    reread(done.incomplete)
    await told(done.delta)
    await stream.ack(committed)
    stats.checkpoint = committed
    stats.lastAppliedAt = new Date()
    stats.changes += total
    stats.batches++
    stats.countEvents(done.tally)
    await applied()
  }

  // A transaction grown past what memory should hold goes on as a large one, applied as it streams.
  const spillIfLarge = async () => {
    if (current === null || current.changes.length <= large) return
    const first = current.changes
    current = null
    await applyLarge(first)
  }

  let taken = 0
  try {
    while (!signal.aborted) {
      busy = false
      // Messages already received are taken without the event loop turning: while a batch is
      // being written, let it turn now and then, so its answers and its commit are not kept
      // waiting behind the decoding of the next one.
      if (++taken % TURN_EVERY === 0 && writing !== null) await new Promise<void>((resolve) => setImmediate(resolve))
      const tw = profile && stream.pending === 0 ? performance.now() : 0
      const msg: Message = await stream.next()
      if (profile && tw > 0) profile.add(PHASES.stream, performance.now() - tw)
      busy = true
      switch (msg.tag) {
        case "begin":
          current = { xid: msg.xid, changes: [] }
          break
        case "insert":
        case "update":
        case "delete": {
          if (!current) break
          const td = profile ? performance.now() : 0
          const cs = decodeChange(msg)
          for (let i = 0; i < cs.length; i++) current.changes.push(cs[i]!)
          if (resync.open > 0) for (const c of cs) resync.note(c.table, c.key)
          if (profile) profile.add(PHASES.decode, performance.now() - td)
          await spillIfLarge()
          break
        }
        case "truncate": {
          // Every row of the truncated tables goes, as deletes in this transaction, in order:
          // those mirrored before it, and those this transaction wrote before the TRUNCATE.
          await drain()
          if (!current) break
          for (const table of truncatedTables(msg)) {
            resync.truncated(table)
            const keys = new Set(await mirroredKeys(sql, table))
            for (const c of current.changes) if (c.table === table) keys.add(c.key)
            for (const key of keys) current.changes.push({ table, key, data: null })
          }
          await spillIfLarge()
          break
        }
        case "commit": {
          const endLsn = parseLsn(msg.commitEndLsn!)
          if (current && endLsn > accepted) {
            pending.push({
              xid: current.xid,
              endLsn,
              commitTime: commitDate(msg.commitTime),
              changes: current.changes,
              ...(current.markers ? { markers: current.markers } : {})
            })
            pendingChanges += current.changes.length + (current.markers?.length ?? 0)
            accepted = endLsn
          }
          current = null
          // Flush when the batch is full, or when nothing else is waiting (latency over batching).
          if (pendingChanges >= opts.batchChanges || stream.pending === 0) await flush()
          break
        }
        case "relation": {
          // The app changed a table under the service (or the publication changed): a column
          // it reads gone or retyped breaks that table's contract; its records are held until
          // a later Relation message shows it fits again (quarantine/).
          if (msg.schema !== "app" || !(msg.name in TABLES)) break
          const problems = relationProblems(msg.name, msg.columns)
          if (problems.length > 0) {
            seenBroken.add(msg.name)
            mark({ kind: "contract", table: msg.name, problems })
          } else if (seenBroken.delete(msg.name)) mark({ kind: "contract", table: msg.name, problems: null })
          break
        }
        case "message": {
          // An operator's retry or discard, the contract watch's finding, a resync's watermark:
          // met in stream order (quarantine/, resync.ts).
          if (!msg.transactional) break
          if (msg.prefix === QUARANTINE_PREFIX) {
            const m = markerOf(Buffer.from(msg.content).toString("utf8"))
            if (m !== null) mark(m)
          } else if (msg.prefix === CONTRACT_PREFIX) {
            const m = contractMarkerOf(Buffer.from(msg.content).toString("utf8"))
            if (m !== null) mark(m)
          } else if (msg.prefix === RESYNC_PREFIX && current !== null) {
            const w = resync.message(Buffer.from(msg.content).toString("utf8"))
            if (w === null) break
            const chunk = await resync.high(w.id, mirrored)
            if (chunk === null || current === null) break
            for (const c of chunk.changes) current.changes.push(c)
            if (chunk.marker !== null) mark(chunk.marker)
          }
          break
        }
        default:
          break
      }
    }
  } finally {
    // A batch still being written finishes (or fails) before the run lets go of its lock.
    await settle().catch(() => {})
  }
}
