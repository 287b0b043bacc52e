// Capture's leadership: one capture process per database holds a session advisory lock;
// the others wait as standbys. Who holds it is read from pg_locks and pg_stat_activity, so a
// standby can say whom it waits for and `status` can name the leader from any process.
import { hostname } from "node:os"
import { Duration, Effect, type Scope } from "effect"
import type { Sql as Pool } from "postgres"
import { connect } from "../../platform/db/Database.ts"
import { query, type Sql } from "../../platform/db/Sql.ts"
import { call, endConnection, log, onPool } from "./effects.ts"
import { type CaptureError, LeaderLockUnreachable } from "./errors.ts"
import { type CaptureOptions, STALL_TIMEOUT_MS } from "./options.ts"

export const LEADER_LOCK = 7_351_009_002 // one capture process per database

// pg_locks shows a bigint advisory lock as its high and low 32 bits (objsubid 1).
const LOCK_HIGH = String(Math.floor(LEADER_LOCK / 2 ** 32))
const LOCK_LOW = String(LEADER_LOCK % 2 ** 32)

/** The leader's lock connection names itself so: pg_stat_activity and `status` say which process leads. */
export const leaderApplicationName = () =>
  `safety-records-service capture leader ${hostname()}:${process.pid}`.slice(0, 63)

export interface LeaderInfo {
  /** The backend holding the lock. */
  readonly pid: number
  /** Its application_name; the service's leader says host:pid of its process. */
  readonly applicationName: string | null
  /** null over a Unix socket, or when the role may not see another role's sessions. */
  readonly clientAddress: string | null
  /** When the lock's connection was made: the leader connects when it finds the lock free. */
  readonly since: string | null
}

/** Who holds the leader lock in this database, or null. */
export const leaderInfo: Effect.Effect<LeaderInfo | null, never, Sql> = Effect.gen(function* () {
  const [r] = yield* query(
    (sql) => sql<
      {
        pid: number
        application_name: string | null
        client_addr: string | null
        client_port: number | null
        backend_start: Date | null
      }[]
    >`
    select l.pid, a.application_name, host(a.client_addr) as client_addr, a.client_port, a.backend_start
    from pg_locks l left join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.database = (select oid from pg_database where datname = current_database())
      and l.classid = ${LOCK_HIGH}::text::oid and l.objid = ${LOCK_LOW}::text::oid and l.objsubid = 1
    limit 1`
  )
  if (!r) return null
  return {
    pid: r.pid,
    applicationName: r.application_name || null,
    clientAddress:
      r.client_addr === null
        ? null
        : r.client_port !== null && r.client_port > 0
          ? `${r.client_addr.includes(":") ? `[${r.client_addr}]` : r.client_addr}:${r.client_port}`
          : r.client_addr,
    since: r.backend_start ? r.backend_start.toISOString() : null
  }
})

/** How often a standby looks whether the leader lock is free. */
const STANDBY_POLL = Duration.seconds(2)

/**
 * One look at the leader lock: a connection of its own is made (and put in the run's scope)
 * and tries it; it is the lock's connection when the lock was taken, else it is ended. Named
 * as it takes the lock, so pg_stat_activity (a standby's log, `status`) tells which process
 * leads. Bounded: postgres.js retries a connection the network cuts while it is made, without end.
 */
const tryLock = (opts: CaptureOptions): Effect.Effect<Pool | null, CaptureError, Scope.Scope> =>
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
export const takeLeadership = (sql: Pool, opts: CaptureOptions) =>
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
