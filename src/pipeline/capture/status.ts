// Capture status for operators: slot state, checkpoint, server WAL position, lag, retained
// WAL and how much more the slot may hold, and a stall capture could not get over by
// reconnecting. Read from the database, so any process (or the admin CLI) can show it.
import { Effect } from "effect"
import { query } from "../../platform/db/Sql.ts"

export interface CaptureStatus {
  readonly slot: string
  readonly slotExists: boolean
  readonly slotActive: boolean
  /** reserved | extended | unreserved | lost (pg_replication_slots.wal_status) */
  readonly walStatus: string | null
  /** Why PostgreSQL invalidated the slot (17+: wal_removed, rows_removed, ...), or null. */
  readonly invalidationReason: string | null
  readonly checkpointLsn: string | null
  readonly serverLsn: string
  readonly lagBytes: number | null
  /** Seconds since the last applied transaction, while there is WAL not yet confirmed. */
  readonly lagSeconds: number | null
  /** Seconds since capture last applied a transaction (or built the views), whatever the lag. */
  readonly sinceAppliedSeconds: number | null
  readonly retainedWalBytes: number | null
  /** WAL that may still be written before the slot is lost (null: max_slot_wal_keep_size is unlimited). */
  readonly safeWalBytes: number | null
  /** max_slot_wal_keep_size in bytes (null: unlimited, -1). */
  readonly walKeepSizeBytes: number | null
  readonly lastCommitAt: string | null
  readonly appliedAt: string | null
  readonly bootstrappedAt: string | null
  readonly gapAt: string | null
  readonly gapReason: string | null
  /** Capture noticed a stall and has not applied anything since (reconnecting did not help yet). */
  readonly stalledAt: string | null
  readonly stallReason: string | null
  /** Reconnects since the stall began. */
  readonly stallReconnects: number
}

export const captureStatus = Effect.fn("captureStatus")(function* (slot: string) {
  const [r] = yield* query(
    (sql) => sql<Array<Record<string, unknown>>>`
    with s as (select *, ${sql.unsafe("to_jsonb(p)->>'invalidation_reason'")} as invalidation from pg_replication_slots p where slot_name = ${slot}),
         c as (select * from service.capture_state where slot_name = ${slot})
    select
      (select count(*) from s) > 0 as slot_exists,
      coalesce((select active from s), false) as slot_active,
      (select wal_status from s) as wal_status,
      (select invalidation from s) as invalidation,
      (select checkpoint_lsn::text from c) as checkpoint_lsn,
      pg_current_wal_lsn()::text as server_lsn,
      pg_wal_lsn_diff(pg_current_wal_lsn(), (select checkpoint_lsn from c))::float8 as lag_bytes,
      (select extract(epoch from now() - coalesce(applied_at, bootstrapped_at))::float8 from c) as since_applied,
      pg_wal_lsn_diff(pg_current_wal_lsn(), (select restart_lsn from s))::float8 as retained,
      (select safe_wal_size::float8 from s) as safe_wal,
      pg_size_bytes(current_setting('max_slot_wal_keep_size'))::float8 as keep_size,
      (select last_commit_at from c) as last_commit_at,
      (select applied_at from c) as applied_at,
      (select bootstrapped_at from c) as bootstrapped_at,
      (select gap_at from c) as gap_at,
      (select gap_reason from c) as gap_reason,
      (select stalled_at from c) as stalled_at,
      (select stall_reason from c) as stall_reason,
      coalesce((select stall_reconnects from c), 0) as stall_reconnects`
  )
  const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null)
  const lagBytes = r!.lag_bytes === null ? null : Math.max(0, Number(r!.lag_bytes))
  const sinceApplied = r!.since_applied === null ? null : Math.max(0, Number(r!.since_applied))
  const keep = Number(r!.keep_size)
  const status: CaptureStatus = {
    slot,
    slotExists: Boolean(r!.slot_exists),
    slotActive: Boolean(r!.slot_active),
    walStatus: (r!.wal_status as string | null) ?? null,
    invalidationReason: (r!.invalidation as string | null) ?? (r!.wal_status === "lost" ? "wal_removed" : null),
    checkpointLsn: (r!.checkpoint_lsn as string | null) ?? null,
    serverLsn: String(r!.server_lsn),
    lagBytes,
    lagSeconds: lagBytes === null ? null : lagBytes === 0 ? 0 : (sinceApplied ?? 0),
    sinceAppliedSeconds: sinceApplied,
    retainedWalBytes: r!.retained === null ? null : Number(r!.retained),
    safeWalBytes: r!.safe_wal === null ? null : Number(r!.safe_wal),
    walKeepSizeBytes: keep >= 0 ? keep : null,
    lastCommitAt: iso(r!.last_commit_at),
    appliedAt: iso(r!.applied_at),
    bootstrappedAt: iso(r!.bootstrapped_at),
    gapAt: iso(r!.gap_at),
    gapReason: (r!.gap_reason as string | null) ?? null,
    stalledAt: iso(r!.stalled_at),
    stallReason: (r!.stall_reason as string | null) ?? null,
    stallReconnects: Number(r!.stall_reconnects)
  }
  return status
})
