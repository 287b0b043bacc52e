// rebuild-views --fresh-snapshot: the views rebuilt from a fresh snapshot of the app's tables
// (a new slot, as a first start builds them), for a service database that fell behind its slot
// (restored from an older backup: checkpoint.ts, behindSlotProblem) or any time the mirror is
// not to be trusted. Capture must not run meanwhile: this holds capture's leader lock for the
// whole of it, so every capture process waits as a standby, and the next leader streams from
// the new slot's consistent point.
import { Effect } from "effect"
import { AppDatabase, connect, Database } from "../../platform/db/Database.ts"
import { formatLsn } from "../../platform/db/lsn.ts"
import { conflict } from "../../domain/errors.ts"
import { bootstrap } from "./bootstrap.ts"
import { readState } from "./checkpoint.ts"
import { LEADER_LOCK } from "./leader.ts"
import { slotInfo } from "./slot.ts"

export interface FreshSnapshotResult {
  readonly slot: string
  /** Where the new slot begins: capture streams from here. */
  readonly consistentPoint: string
  readonly rows: number
  readonly views: number
  /**
   * The WAL between the old checkpoint and the new slot: changes committed there have no
   * events, and never will (their records' views are current again). Null: there was no
   * checkpoint.
   */
  readonly lost: { readonly from: string; readonly to: string } | null
  /** What the old slot had confirmed, when the service's database was behind it (restored from an older backup), else null. */
  readonly behindSlot: string | null
  readonly ms: number
}

/** How long to try for the leader lock (a refusing capture takes it for a moment between retries). */
const LOCK_WAIT_MS = 10_000

interface FreshConfig {
  readonly slot: string
  readonly publication: string
  readonly failover: boolean
}

/** The fresh snapshot, the leader lock's connection ended when it is done. */
export const freshSnapshot = (config: FreshConfig) => Effect.scoped(rebuildFromSnapshot(config))

const rebuildFromSnapshot = Effect.fn("freshSnapshot")(function* (config: FreshConfig) {
  const started = Date.now()
  const db = yield* Database
  const app = yield* AppDatabase
  const lock = yield* Effect.acquireRelease(
    Effect.sync(() => connect(db.url, 1, { keepForever: true, arrays: false })),
    (lock) => Effect.promise(() => lock.end({ timeout: 1 }).catch(() => {}))
  )
  for (;;) {
    const [r] = yield* Effect.promise(
      () => lock<{ ok: boolean }[]>`
        select ok, case when ok then set_config('application_name', 'safety-records-service rebuild-views --fresh-snapshot', false) end
        from (select pg_try_advisory_lock(${LEADER_LOCK}) as ok) t`
    )
    if (r?.ok) break
    if (Date.now() - started > LOCK_WAIT_MS)
      return yield* conflict(
        "a capture leader is running (see status): stop capture first (the service, or every process with the capture role), then run rebuild-views --fresh-snapshot again"
      )
    yield* Effect.sleep(200)
  }
  const slot = yield* slotInfo(config.slot)
  const state = yield* Effect.promise(() => readState(db.sql, config.slot))
  const behind =
    state !== null && slot.confirmedFlush !== null && slot.confirmedFlush > state.checkpoint
      ? slot.confirmedFlush
      : null
  const gap =
    state === null
      ? null
      : `views rebuilt from a fresh snapshot of the app's tables (rebuild-views --fresh-snapshot)${
          behind === null
            ? ""
            : `: the service's database was behind replication slot ${config.slot} (checkpoint ${formatLsn(state.checkpoint)}, the slot had confirmed ${formatLsn(behind)})`
        }; events for changes after checkpoint ${formatLsn(state.checkpoint)} could not be derived and will not be sent`
  const result = yield* bootstrap(app.url, config.slot, gap, config.failover, config.publication)
  const answer: FreshSnapshotResult = {
    slot: config.slot,
    consistentPoint: formatLsn(result.consistentPoint),
    rows: result.rows,
    views: result.views,
    lost: state === null ? null : { from: formatLsn(state.checkpoint), to: formatLsn(result.consistentPoint) },
    behindSlot: behind === null ? null : formatLsn(behind),
    ms: Date.now() - started
  }
  return answer
})
