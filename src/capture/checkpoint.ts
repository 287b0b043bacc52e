// The checkpoint: the commit end LSN of the last applied transaction, per slot. Written in
// the same database transaction as everything derived from the changes it covers.
import type { Sql, TransactionSql } from "postgres"
import { formatLsn, parseLsn, type Lsn } from "./lsn.ts"

export interface CaptureState {
  readonly checkpoint: Lsn
  readonly lastCommitAt: Date | null
  readonly bootstrappedAt: Date | null
  readonly gapAt: Date | null
  readonly gapReason: string | null
}

export const readState = async (sql: Sql, slot: string): Promise<CaptureState | null> => {
  const [row] = await sql<{ checkpoint_lsn: string; last_commit_at: Date | null; bootstrapped_at: Date | null; gap_at: Date | null; gap_reason: string | null }[]>`
    select checkpoint_lsn::text, last_commit_at, bootstrapped_at, gap_at, gap_reason
    from service.capture_state where slot_name = ${slot}`
  return row
    ? {
        checkpoint: parseLsn(row.checkpoint_lsn),
        lastCommitAt: row.last_commit_at,
        bootstrappedAt: row.bootstrapped_at,
        gapAt: row.gap_at,
        gapReason: row.gap_reason
      }
    : null
}

export const writeCheckpoint = async (tx: TransactionSql<Record<string, unknown>>, slot: string, lsn: Lsn, commitTime: Date) => {
  await tx`
    update service.capture_state
    set checkpoint_lsn = ${formatLsn(lsn)}::pg_lsn, last_commit_at = ${commitTime}, applied_at = now()
    where slot_name = ${slot}`
}
