// Capture's leadership: one capture process per database holds a session advisory lock;
// the others wait as standbys. Who holds it is read from pg_locks and pg_stat_activity, so a
// standby can say whom it waits for and `status` can name the leader from any process.
import { hostname } from "node:os"
import { Effect } from "effect"
import { query, type Sql } from "../../platform/db/Sql.ts"

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
