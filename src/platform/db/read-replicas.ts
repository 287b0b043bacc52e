// Hot standbys of the service's database (READ_DATABASE_URL) that serve the read API's
// queries, and how far behind each one is. Every process that has them writes a heartbeat on
// the primary once a second (service.settings, `read_heartbeat`) and measures each standby
// against it: a standby that does not answer, is not a standby, or is further behind than
// READ_MAX_LAG is skipped until it is back, and reads go to another or to the primary
// (docs/design.md, "Read replicas", says why a heartbeat rather than the replay timestamp).
import { Context, Duration, Effect, Layer, Schedule } from "effect"
import postgres from "postgres"
import { loadReadReplicas, NO_READ_REPLICAS, type ReadReplicaSettings } from "../config.ts"
import { ApiSettingsConfig } from "../api-settings.ts"
import { Database } from "./Database.ts"
import { parseLsn } from "./lsn.ts"

/** How often the heartbeat is written and each standby measured. */
export const HEARTBEAT_INTERVAL_MS = 1_000

/** A standby not measured for this long (its probe hangs, the primary does not answer) is skipped. */
const STALE_AFTER_MS = 5 * HEARTBEAT_INTERVAL_MS

/** A probe that takes longer than this counts as no answer. */
const PROBE_TIMEOUT_MS = 2_000

export const HEARTBEAT_SETTING = "read_heartbeat"

/** A standby as operators see it: /metrics, /readyz, `status`. */
export interface ReplicaReport {
  /** host:port/database, never the user or password. */
  readonly replica: string
  /** Whether reads go to it now. */
  readonly usable: boolean
  /** Seconds behind the primary (0: caught up); null when unknown (no answer, not a standby, no heartbeat yet). */
  readonly lagSeconds: number | null
  /** Why it is skipped, when it is. */
  readonly problem: string | null
}

/** Where a standby is, for people: the URL's host, port and database, without its credentials. */
export const replicaName = (url: string): string => {
  const m = /^postgres(?:ql)?:\/\/(?:[^@/?#]*@)?([^/?#]*)(\/[^?#]*)?/i.exec(url)
  return m === null ? "(not a PostgreSQL URL)" : `${m[1]}${m[2] ?? "/"}`
}

/** What the primary says at one moment: its WAL position, its clock, the newest heartbeat. */
export interface PrimaryPoint {
  readonly lsn: string
  readonly now: Date
}

/** What a standby says: whether it is one, what it has replayed, the newest heartbeat it has. */
export interface StandbyPoint {
  readonly standby: boolean
  readonly replayed: string | null
  readonly heartbeat: string | null
}

export const primaryPoint = async (sql: postgres.Sql): Promise<PrimaryPoint> => {
  const [r] = await sql<
    { lsn: string; now: Date }[]
  >`select pg_current_wal_lsn()::text as lsn, clock_timestamp() as now`
  return r!
}

export const standbyPoint = async (sql: postgres.Sql): Promise<StandbyPoint> => {
  const [r] = await sql<StandbyPoint[]>`
    select pg_is_in_recovery() as standby, pg_last_wal_replay_lsn()::text as replayed,
           (select value from service.settings where name = ${HEARTBEAT_SETTING}) as heartbeat`
  return r!
}

/** The heartbeat: the primary's clock, written where every standby replays it. */
export const writeHeartbeat = (sql: postgres.Sql) =>
  sql`
    insert into service.settings (name, value) values (${HEARTBEAT_SETTING}, to_char(clock_timestamp() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
    on conflict (name) do update set value = excluded.value`

/**
 * A standby's lag from the primary's point (read first) and the standby's (read after). Pure.
 * Replayed up to where the primary was: 0. Else the age, on the primary's clock, of the newest
 * heartbeat it has replayed: at most one heartbeat interval more than the true lag, and never
 * less, so a standby is never kept for being quicker than it is. No heartbeat yet (none written,
 * or the standby of another database): unknown.
 */
export const lagOf = (
  primary: PrimaryPoint,
  standby: StandbyPoint
): { readonly lagSeconds: number | null; readonly problem: string | null } => {
  if (!standby.standby)
    return { lagSeconds: null, problem: "not a standby (pg_is_in_recovery() is false): it is never read from" }
  if (standby.replayed !== null && parseLsn(standby.replayed) >= parseLsn(primary.lsn))
    return { lagSeconds: 0, problem: null }
  const seen = standby.heartbeat === null ? Number.NaN : Date.parse(standby.heartbeat)
  if (Number.isNaN(seen))
    return { lagSeconds: null, problem: "no heartbeat replayed yet: not a standby of this database, or far behind" }
  return { lagSeconds: Math.max(0, (primary.now.getTime() - seen) / 1000), problem: null }
}

/** A standby to read from, and what to say when a read on it failed. */
export interface Replica {
  readonly name: string
  /** Its pool for the read API's statements (generic plans, like the primary's API pool). */
  readonly sql: postgres.Sql
  /** Its pool for statements planned for their parameters (lists filtered by name). */
  readonly planned: postgres.Sql
  /** A read failed here: skipped until its next measure says it answers. */
  readonly failed: () => void
  /**
   * Calls `f` if the standby is found not answering (its probe failed or hung) before the
   * returned function is called: a read still waiting on it then goes to the primary instead
   * of waiting for a dead connection to end. Only reads in flight are held.
   */
  readonly onLost: (f: () => void) => () => void
}

/** Reads counted by where they were served, and why some that went to a standby ended on the primary. */
export interface ReadCounts {
  replica: number
  primary: number
  /** The standby failed (down, a query cancelled by replay). */
  fallbackError: number
  /** The standby did not yet know the key or its company as the primary does. */
  fallbackKey: number
}

export interface ReadReplicasShape {
  /** READ_MAX_LAG in seconds. */
  readonly maxLagSeconds: number
  /** A standby to read from now (round robin over the usable ones), or undefined: read on the primary. */
  readonly pick: () => Replica | undefined
  /** Every standby configured, as measured last. */
  readonly report: () => ReadonlyArray<ReplicaReport>
  readonly counts: ReadCounts
}

const none = (): ReadReplicasShape => ({
  maxLagSeconds: NO_READ_REPLICAS.maxLagMs / 1000,
  pick: () => undefined,
  report: () => [],
  counts: { replica: 0, primary: 0, fallbackError: 0, fallbackKey: 0 }
})

/** The standbys of this process; none unless READ_DATABASE_URL names some (a server composed by hand has none). */
export const ReadReplicas = Context.Reference<ReadReplicasShape>("service/ReadReplicas", { defaultValue: none })

interface Standby {
  readonly url: string
  readonly name: string
  /** Its pools now: replaced whenever it is found not answering (see `reconnect`). */
  replica: Replica
  probe: postgres.Sql
  lagSeconds: number | null
  problem: string | null
  measuredAt: number
  failedAt: number
  /** What reads in flight on it do if it is lost. */
  readonly lost: Set<() => void>
}

const replicaPool = (url: string, max: number, generic: boolean) =>
  postgres(url, {
    max,
    onnotice: () => {},
    // A standby that does not answer is skipped; reads do not wait 30 s for it.
    connect_timeout: 2,
    connection: {
      application_name: "safety-records-service/read",
      ...(generic ? { plan_cache_mode: "force_generic_plan" } : {})
    }
  })

/** Pools open no connection until used: making them costs nothing. */
const openPools = (s: Standby, poolSize: number) => {
  s.replica = {
    name: s.name,
    sql: replicaPool(s.url, poolSize, true),
    planned: replicaPool(s.url, Math.min(poolSize, 3), false),
    failed: () => {
      s.failedAt = Date.now()
    },
    onLost: (f) => {
      s.lost.add(f)
      return () => s.lost.delete(f)
    }
  }
  s.probe = replicaPool(s.url, 1, false)
}

const closePools = (replica: Replica, probe: postgres.Sql, timeout: number) =>
  Promise.all([replica.sql.end({ timeout }), replica.planned.end({ timeout }), probe.end({ timeout })]).then(
    () => {},
    () => {}
  )

/**
 * A standby found not answering gets new pools: connections to it may be dead without knowing
 * it (a network path gone silent), and a read queued on one would wait for TCP to give up, even
 * once the standby answers again on new connections. Reads in flight go to the primary.
 */
const reconnect = (s: Standby, poolSize: number) => {
  const { replica, probe } = s
  openPools(s, poolSize)
  const lost = [...s.lost]
  s.lost.clear()
  for (const f of lost) f()
  void closePools(replica, probe, 0)
}

/**
 * The standbys' pools and the loop that writes the heartbeat and measures them, for as long
 * as the scope lasts. `poolSize`: connections of each standby's pool (the API pool's size).
 */
export const makeReadReplicas = Effect.fn("ReadReplicas.make")(function* (
  settings: ReadReplicaSettings,
  primary: postgres.Sql,
  poolSize: number
) {
  if (settings.urls.length === 0) return none()
  const standbys: Array<Standby> = []
  for (const url of settings.urls) {
    const standby = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const s = {
          url,
          name: replicaName(url),
          lagSeconds: null,
          problem: "not measured yet",
          measuredAt: 0,
          failedAt: 0,
          lost: new Set<() => void>()
        } as unknown as Standby
        openPools(s, poolSize)
        return s
      }),
      (s) => Effect.promise(() => closePools(s.replica, s.probe, 2))
    )
    standbys.push(standby)
  }
  const maxLagSeconds = settings.maxLagMs / 1000
  const usable = (s: Standby, now: number) =>
    s.problem === null &&
    s.lagSeconds !== null &&
    s.lagSeconds <= maxLagSeconds &&
    now - s.measuredAt <= STALE_AFTER_MS &&
    s.failedAt < s.measuredAt

  const measure = Effect.promise(async () => {
    let point: PrimaryPoint
    try {
      point = await primaryPoint(primary)
    } catch {
      return // the primary does not answer: nothing is measured, and standbys go stale
    }
    await Promise.all(
      standbys.map(async (s) => {
        const started = Date.now()
        let timer: ReturnType<typeof setTimeout> | undefined
        try {
          const answer = await Promise.race([
            standbyPoint(s.probe),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS)
            })
          ])
          const lag = lagOf(point, answer)
          s.lagSeconds = lag.lagSeconds
          s.problem = lag.problem
        } catch (e) {
          s.lagSeconds = null
          s.problem = `does not answer: ${e instanceof Error ? e.message : String(e)}`
          reconnect(s, poolSize)
        } finally {
          clearTimeout(timer)
        }
        s.measuredAt = Math.max(started, s.failedAt + 1)
      })
    )
    // Written after measuring, so each standby has had an interval to replay the last one.
    await writeHeartbeat(primary).catch(() => {})
  })
  yield* measure.pipe(Effect.repeat(Schedule.spaced(Duration.millis(HEARTBEAT_INTERVAL_MS))), Effect.forkScoped)

  let next = 0
  const shape: ReadReplicasShape = {
    maxLagSeconds,
    pick: () => {
      const now = Date.now()
      for (let i = 0; i < standbys.length; i++) {
        const s = standbys[(next + i) % standbys.length]!
        if (usable(s, now)) {
          next = (next + i + 1) % standbys.length
          return s.replica
        }
      }
      return undefined
    },
    report: () => {
      const now = Date.now()
      return standbys.map((s) => {
        const ok = usable(s, now)
        const problem =
          s.problem ??
          (now - s.measuredAt > STALE_AFTER_MS
            ? "not measured for a while (the primary or the standby does not answer)"
            : s.failedAt >= s.measuredAt
              ? "a read failed on it: skipped until it answers again"
              : s.lagSeconds !== null && s.lagSeconds > maxLagSeconds
                ? `behind by more than READ_MAX_LAG (${maxLagSeconds} s)`
                : null)
        return { replica: s.name, usable: ok, lagSeconds: s.lagSeconds, problem: ok ? null : problem }
      })
    },
    counts: { replica: 0, primary: 0, fallbackError: 0, fallbackKey: 0 }
  }
  return shape
})

/**
 * The standbys READ_DATABASE_URL names (none: every read on the primary), measured while the
 * service runs; each standby's pool as large as the API's own (API_DATABASE_POOL_SIZE).
 */
export const ReadReplicasLive = Layer.effect(
  ReadReplicas,
  Effect.gen(function* () {
    const settings = yield* loadReadReplicas
    const { poolSize } = yield* ApiSettingsConfig
    const { sql } = yield* Database
    if (settings.urls.length > 0)
      yield* Effect.logInfo("read replicas", {
        replicas: settings.urls.map(replicaName),
        maxLagSeconds: settings.maxLagMs / 1000
      })
    return yield* makeReadReplicas(settings, sql, poolSize)
  })
)

/**
 * Each standby measured once, for `status` (a process of its own, with no heartbeat loop):
 * against the heartbeat the running service writes. Unusable ones say why.
 */
export const measureReplicasOnce = async (
  settings: ReadReplicaSettings,
  primary: postgres.Sql
): Promise<ReadonlyArray<ReplicaReport>> => {
  if (settings.urls.length === 0) return []
  const point = await primaryPoint(primary)
  const maxLagSeconds = settings.maxLagMs / 1000
  return Promise.all(
    settings.urls.map(async (url) => {
      const sql = replicaPool(url, 1, false)
      let timer: ReturnType<typeof setTimeout> | undefined
      try {
        const answer = await Promise.race([
          standbyPoint(sql),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error("no answer within 5 s")), 5_000)
          })
        ])
        const lag = lagOf(point, answer)
        const behind = lag.lagSeconds !== null && lag.lagSeconds > maxLagSeconds
        return {
          replica: replicaName(url),
          usable: lag.problem === null && !behind,
          lagSeconds: lag.lagSeconds,
          problem: lag.problem ?? (behind ? `behind by more than READ_MAX_LAG (${maxLagSeconds} s)` : null)
        }
      } catch (e) {
        return {
          replica: replicaName(url),
          usable: false,
          lagSeconds: null,
          problem: `does not answer: ${e instanceof Error ? e.message : String(e)}`
        }
      } finally {
        clearTimeout(timer)
        await sql.end({ timeout: 1 }).catch(() => {})
      }
    })
  )
}
