// What watches a capture run beside its batcher, each a fiber on a Schedule: the stall watch
// (a stream that says nothing while WAL waits), the heartbeat (an idle database still moves the
// slot; the leader lock is still this process's), and the contract watch (the catalog's view of
// the app's tables). The first to fail ends the run (run.ts).
import { Effect, Schedule } from "effect"
import type { Sql } from "postgres"
import { APP_COLUMNS } from "../../domain/records/columns.ts"
import { formatLsn } from "../../platform/db/lsn.ts"
import { call, log } from "./effects.ts"
import { CaptureStalled, LeaderLost } from "./errors.ts"
import { leaderApplicationName } from "./leader.ts"
import { appOf, type CaptureOptions, type CaptureStats } from "./options.ts"
import { followOwnPublication } from "./publication.ts"
import { contractNow } from "./quarantine/contract.ts"
import { CONTRACT_PREFIX } from "./quarantine/markers.ts"
import type { ReplicationStream } from "./stream.ts"

/** The prefix of the transactional messages the heartbeat and the stall watch write into the WAL. */
const HEARTBEAT_PREFIX = "safety-records-heartbeat"

/**
 * Watches a stream for a stall: a connection that hangs (a dead network path, a walsender
 * gone without a word) sends nothing and fails nothing. A live server says something at
 * least every wal_sender_timeout / 2 (keepalives) and carries the heartbeat. After half the
 * timeout without a word, a probe is written into the WAL (a transactional message the slot
 * must deliver); nothing arriving for the whole timeout after that is a stall. Messages
 * still waiting to be applied (capture busy, e.g. behind rebuild-views) are not one.
 * Fails with CaptureStalled; never ends otherwise.
 */
export const watchStall = (
  sql: Sql,
  stream: ReplicationStream,
  timeoutMs: number
): Effect.Effect<void, CaptureStalled> => {
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
export const heartbeat = (
  sql: Sql,
  lock: Sql,
  lockPid: number,
  intervalMs: number
): Effect.Effect<void, LeaderLost> => {
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
export const watchContract = (sql: Sql, app: Sql, publication: string, intervalMs: number): Effect.Effect<void> => {
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
export const stalledRun = (
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
 * A stall noticed before (by this process or one that went away) is over at the first apply:
 * returns what the batcher calls after each batch (plain code: it runs this run's log line through
 * the run's own services).
 */
export const stallOver = (sql: Sql, opts: CaptureOptions) =>
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
