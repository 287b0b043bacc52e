// Capture status for operators: slot state, checkpoint, server WAL position, lag, retained
// WAL and how much more the slot may hold, and a stall capture could not get over by
// reconnecting. Read from the databases, so any process (or the admin CLI) can show it: the
// slot and the WAL position from the app's, the checkpoint from the service's own.
import { Effect } from "effect"
import { formatLsn, parseLsn } from "../../platform/db/lsn.ts"
import { appQuery, appSeparate, query } from "../../platform/db/Sql.ts"

export interface CaptureStatus {
  readonly slot: string
  readonly slotExists: boolean
  readonly slotActive: boolean
  /** reserved | extended | unreserved | lost (pg_replication_slots.wal_status) */
  readonly walStatus: string | null
  /** Why PostgreSQL invalidated the slot (17+: wal_removed, rows_removed, ...), or null. */
  readonly invalidationReason: string | null
  readonly checkpointLsn: string | null
  /** What the slot has confirmed (pg_replication_slots.confirmed_flush_lsn), or null. */
  readonly confirmedLsn: string | null
  /**
   * The service's own database is behind the slot (its checkpoint before the slot's confirmed
   * position: restored from an older backup): changes in between are lost to it, and capture
   * refuses to go on until `rebuild-views --fresh-snapshot` (docs/operations.md).
   */
  readonly behindSlot: boolean
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
  // The slot first: capture stores its checkpoint before it confirms, so a checkpoint read
  // after the slot is never behind it unless the service's database lost what it stored.
  const [a] = yield* appQuery(
    (sql) => sql<Array<Record<string, unknown>>>`
    with s as (select *, ${sql.unsafe("to_jsonb(p)->>'invalidation_reason'")} as invalidation from pg_replication_slots p where slot_name = ${slot})
    select
      (select count(*) from s) > 0 as slot_exists,
      coalesce((select active from s), false) as slot_active,
      (select wal_status from s) as wal_status,
      (select invalidation from s) as invalidation,
      (select confirmed_flush_lsn::text from s) as confirmed_lsn,
      pg_current_wal_lsn()::text as server_lsn,
      pg_wal_lsn_diff(pg_current_wal_lsn(), (select restart_lsn from s))::float8 as retained,
      (select safe_wal_size::float8 from s) as safe_wal,
      pg_size_bytes(current_setting('max_slot_wal_keep_size'))::float8 as keep_size`
  )
  const [c] = yield* query(
    (sql) => sql<Array<Record<string, unknown>>>`
    select checkpoint_lsn::text as checkpoint_lsn,
      extract(epoch from now() - coalesce(applied_at, bootstrapped_at))::float8 as since_applied,
      last_commit_at, applied_at, bootstrapped_at, gap_at, gap_reason, stalled_at, stall_reason, stall_reconnects
    from service.capture_state where slot_name = ${slot}`
  )
  const separate = yield* appSeparate
  const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null)
  const checkpoint = typeof c?.checkpoint_lsn === "string" ? parseLsn(c.checkpoint_lsn) : null
  const confirmed = typeof a!.confirmed_lsn === "string" ? parseLsn(a!.confirmed_lsn) : null
  const server = parseLsn(String(a!.server_lsn))
  const lagBytes = checkpoint === null ? null : Math.max(0, Number(server - checkpoint))
  const sinceApplied = c?.since_applied == null ? null : Math.max(0, Number(c.since_applied))
  const keep = Number(a!.keep_size)
  const status: CaptureStatus = {
    slot,
    slotExists: Boolean(a!.slot_exists),
    slotActive: Boolean(a!.slot_active),
    walStatus: (a!.wal_status as string | null) ?? null,
    invalidationReason: (a!.invalidation as string | null) ?? (a!.wal_status === "lost" ? "wal_removed" : null),
    checkpointLsn: checkpoint === null ? null : formatLsn(checkpoint),
    confirmedLsn: confirmed === null ? null : formatLsn(confirmed),
    behindSlot: separate && checkpoint !== null && confirmed !== null && confirmed > checkpoint,
    serverLsn: formatLsn(server),
    lagBytes,
    lagSeconds: lagBytes === null ? null : lagBytes === 0 ? 0 : (sinceApplied ?? 0),
    sinceAppliedSeconds: sinceApplied,
    retainedWalBytes: a!.retained === null ? null : Number(a!.retained),
    safeWalBytes: a!.safe_wal === null ? null : Number(a!.safe_wal),
    walKeepSizeBytes: keep >= 0 ? keep : null,
    lastCommitAt: iso(c?.last_commit_at),
    appliedAt: iso(c?.applied_at),
    bootstrappedAt: iso(c?.bootstrapped_at),
    gapAt: iso(c?.gap_at),
    gapReason: (c?.gap_reason as string | null) ?? null,
    stalledAt: iso(c?.stalled_at),
    stallReason: (c?.stall_reason as string | null) ?? null,
    stallReconnects: Number(c?.stall_reconnects ?? 0)
  }
  return status
})
