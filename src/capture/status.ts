// Capture status for operators: slot state, checkpoint, server WAL position, lag and
// retained WAL. Read from the database, so any process (or the admin CLI) can show it.
import type { Sql } from "postgres"

export interface CaptureStatus {
  readonly slot: string
  readonly slotExists: boolean
  readonly slotActive: boolean
  /** reserved | extended | unreserved | lost (pg_replication_slots.wal_status) */
  readonly walStatus: string | null
  readonly checkpointLsn: string | null
  readonly serverLsn: string
  readonly lagBytes: number | null
  /** Seconds since the last applied transaction, while there is WAL not yet confirmed. */
  readonly lagSeconds: number | null
  readonly retainedWalBytes: number | null
  readonly safeWalBytes: number | null
  readonly lastCommitAt: string | null
  readonly appliedAt: string | null
  readonly bootstrappedAt: string | null
  readonly gapAt: string | null
  readonly gapReason: string | null
}

export const captureStatus = async (sql: Sql, slot: string): Promise<CaptureStatus> => {
  const [r] = await sql<Array<Record<string, unknown>>>`
    with s as (select * from pg_replication_slots where slot_name = ${slot}),
         c as (select * from service.capture_state where slot_name = ${slot})
    select
      (select count(*) from s) > 0 as slot_exists,
      coalesce((select active from s), false) as slot_active,
      (select wal_status from s) as wal_status,
      (select checkpoint_lsn::text from c) as checkpoint_lsn,
      pg_current_wal_lsn()::text as server_lsn,
      pg_wal_lsn_diff(pg_current_wal_lsn(), (select checkpoint_lsn from c))::float8 as lag_bytes,
      (select extract(epoch from now() - coalesce(applied_at, bootstrapped_at))::float8 from c) as since_applied,
      pg_wal_lsn_diff(pg_current_wal_lsn(), (select restart_lsn from s))::float8 as retained,
      (select safe_wal_size::float8 from s) as safe_wal,
      (select last_commit_at from c) as last_commit_at,
      (select applied_at from c) as applied_at,
      (select bootstrapped_at from c) as bootstrapped_at,
      (select gap_at from c) as gap_at,
      (select gap_reason from c) as gap_reason`
  const iso = (v: unknown) => (v instanceof Date ? v.toISOString() : null)
  const lagBytes = r!.lag_bytes === null ? null : Math.max(0, Number(r!.lag_bytes))
  return {
    slot,
    slotExists: Boolean(r!.slot_exists),
    slotActive: Boolean(r!.slot_active),
    walStatus: (r!.wal_status as string | null) ?? null,
    checkpointLsn: (r!.checkpoint_lsn as string | null) ?? null,
    serverLsn: String(r!.server_lsn),
    lagBytes,
    lagSeconds: lagBytes === null ? null : lagBytes === 0 ? 0 : Math.max(0, Number(r!.since_applied ?? 0)),
    retainedWalBytes: r!.retained === null ? null : Number(r!.retained),
    safeWalBytes: r!.safe_wal === null ? null : Number(r!.safe_wal),
    lastCommitAt: iso(r!.last_commit_at),
    appliedAt: iso(r!.applied_at),
    bootstrappedAt: iso(r!.bootstrapped_at),
    gapAt: iso(r!.gap_at),
    gapReason: (r!.gap_reason as string | null) ?? null
  }
}
