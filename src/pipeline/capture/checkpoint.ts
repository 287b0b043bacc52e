// The checkpoint: the commit end LSN of the last applied transaction, per slot. Written in
// the same database transaction as everything derived from the changes it covers.
import { Data } from "effect"
import type { Sql, TransactionSql } from "postgres"
import { formatLsn, parseLsn, type Lsn } from "../../platform/db/lsn.ts"

export interface CaptureState {
  readonly checkpoint: Lsn
  readonly lastCommitAt: Date | null
  readonly bootstrappedAt: Date | null
  readonly gapAt: Date | null
  readonly gapReason: string | null
}

export const readState = async (sql: Sql, slot: string): Promise<CaptureState | null> => {
  const [row] = await sql<
    {
      checkpoint_lsn: string
      last_commit_at: Date | null
      bootstrapped_at: Date | null
      gap_at: Date | null
      gap_reason: string | null
    }[]
  >`
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

/** The stored checkpoint is not the one this process applied from: another process applied changes meanwhile. */
export class CheckpointMoved extends Data.TaggedError("CheckpointMoved")<{ readonly message: string }> {}

/**
 * Moves the checkpoint from `from` (where this process's last batch left it) to `lsn`, and
 * fails the database transaction when it is elsewhere: a second capture process (a leader
 * that lost its lock and has not noticed yet) cannot apply the same changes again, and
 * every event is written once. Issued first in a batch's transaction, so the row lock
 * orders two such processes and the loser fails before writing.
 */
export const advanceCheckpoint = (
  tx: TransactionSql<Record<string, unknown>>,
  slot: string,
  from: Lsn,
  lsn: Lsn,
  commitTime: Date
): Promise<void> =>
  tx`
    update service.capture_state
    set checkpoint_lsn = ${formatLsn(lsn)}::pg_lsn, last_commit_at = ${commitTime}, applied_at = now()
    where slot_name = ${slot} and checkpoint_lsn = ${formatLsn(from)}::pg_lsn`
    .execute()
    .then((r) => {
      if (r.count !== 1) {
        throw new CheckpointMoved({
          message: `capture's checkpoint for slot ${slot} is no longer ${formatLsn(from)}, where this process left it: another capture process applied changes meanwhile; this run stops without writing`
        })
      }
    })
