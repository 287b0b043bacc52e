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
  /** The re-read windows open at the checkpoint (resync.ts), as stored with it, or null. */
  readonly openWindows: unknown
}

export const readState = async (sql: Sql, slot: string): Promise<CaptureState | null> => {
  const [row] = await sql<
    {
      checkpoint_lsn: string
      last_commit_at: Date | null
      bootstrapped_at: Date | null
      gap_at: Date | null
      gap_reason: string | null
      open_windows: unknown
    }[]
  >`
    select checkpoint_lsn::text, last_commit_at, bootstrapped_at, gap_at, gap_reason, open_windows
    from service.capture_state where slot_name = ${slot}`
  return row
    ? {
        checkpoint: parseLsn(row.checkpoint_lsn),
        lastCommitAt: row.last_commit_at,
        bootstrappedAt: row.bootstrapped_at,
        gapAt: row.gap_at,
        gapReason: row.gap_reason,
        openWindows: row.open_windows
      }
    : null
}

/** The stored checkpoint is not the one this process applied from: another process applied changes meanwhile. */
export class CheckpointMoved extends Data.TaggedError("CheckpointMoved")<{ readonly message: string }> {}

/** The SQLSTATE advanceCheckpoint's statement fails with when the checkpoint is elsewhere (division_by_zero). */
const CHECKPOINT_ELSEWHERE = "22012"

/**
 * Moves the checkpoint from `from` (where this process's last batch left it) to `lsn`, and
 * fails the database transaction when it is elsewhere: a second capture process (a leader
 * that lost its lock and has not noticed yet) cannot apply the same changes again, and
 * every event is written once. Issued first in a batch's transaction, so the row lock
 * orders two such processes and the loser fails before writing. The statement itself fails
 * (one over no row moved), not only its caller: a batch whose COMMIT is sent with its
 * statements, before any answer (pipelined.ts), is then rolled back by that COMMIT. `windows`:
 * the re-read windows open at `lsn` (Resync.snapshot), stored with it.
 */
export const advanceCheckpoint = (
  tx: TransactionSql<Record<string, unknown>>,
  slot: string,
  from: Lsn,
  lsn: Lsn,
  commitTime: Date,
  windows: string | null
): Promise<void> =>
  tx`
    with moved as (
      update service.capture_state
      set checkpoint_lsn = ${formatLsn(lsn)}::pg_lsn, last_commit_at = ${commitTime}, applied_at = now(),
          open_windows = ${windows}::text::jsonb
      where slot_name = ${slot} and checkpoint_lsn = ${formatLsn(from)}::pg_lsn
      returning 1
    )
    select 1 / count(*)::int from moved`
    .execute()
    .then(
      () => {},
      (e: unknown) => {
        if ((e as { code?: unknown }).code === CHECKPOINT_ELSEWHERE) mustHaveMoved(0, slot, from)
        throw e
      }
    )

/** One row moved, or another capture process moved the checkpoint meanwhile: stop without writing. */
const mustHaveMoved = (count: number, slot: string, from: Lsn): void => {
  if (count !== 1) {
    throw new CheckpointMoved({
      message: `capture's checkpoint for slot ${slot} is no longer ${formatLsn(from)}, where this process left it: another capture process applied changes meanwhile; this run stops without writing`
    })
  }
}

/**
 * Moves the checkpoint past a stretch of WAL that held nothing for capture (the server says it
 * sent up to `lsn` and everything received is applied), keeping the last commit's time. Stored
 * before the slot is told (run.ts), so the slot never confirms what the service's database
 * does not have. Fails as advanceCheckpoint does when another process moved it. Re-read windows
 * stored with `from` stand at `lsn` too: nothing between them was for capture.
 */
export const confirmCheckpoint = (sql: Sql, slot: string, from: Lsn, lsn: Lsn): Promise<void> =>
  sql`
    update service.capture_state set checkpoint_lsn = ${formatLsn(lsn)}::pg_lsn, applied_at = now(),
      open_windows = case when open_windows ->> 'at' = ${formatLsn(from)}
                          then jsonb_set(open_windows, '{at}', to_jsonb(${formatLsn(lsn)}::text)) end
    where slot_name = ${slot} and checkpoint_lsn = ${formatLsn(from)}::pg_lsn`
    .execute()
    .then((r) => mustHaveMoved(r.count, slot, from))

/** What the fix is, said the same way wherever the service's database is found behind the slot. */
export const FRESH_SNAPSHOT_FIX =
  "npm run admin -- rebuild-views --fresh-snapshot rebuilds every view from a fresh snapshot of the app's tables (a new slot); events for changes in that range will not fire. Or restore a newer backup of the service's database."

/**
 * Why capture must not stream from this checkpoint, or null. Capture stores its checkpoint
 * before it confirms a position to the slot, so a slot that confirmed more than the service's
 * database holds means that database lost what it stored: restored from an older backup (or
 * another service database follows the same slot). The changes in between were applied and
 * their events written, and the stream cannot send them again: going on would skip them
 * silently. A slot with no checkpoint at all is the same, from the start. Pure.
 */
export const behindSlotProblem = (p: {
  readonly slot: string
  readonly checkpoint: Lsn | null
  readonly confirmed: Lsn | null
  readonly lastCommitAt: Date | null
}): string | null => {
  if (p.confirmed === null) return null
  if (p.checkpoint === null)
    return (
      `Replication slot ${p.slot} in the app's database has confirmed changes up to ${formatLsn(p.confirmed)}, but the service's database has no checkpoint for it: ` +
      `it is a new database (the service's state was elsewhere before: move its schema service here, docs/deployment.md#one-database-or-two), or one restored from before capture first ran. ` +
      `Capture refuses rather than skip what the slot already confirmed. ${FRESH_SNAPSHOT_FIX}`
    )
  if (p.checkpoint >= p.confirmed) return null
  return (
    `The service's database is behind replication slot ${p.slot}: its checkpoint is ${formatLsn(p.checkpoint)}, but the slot in the app's database has confirmed ${formatLsn(p.confirmed)}. ` +
    `It was restored from a backup older than the slot (or another service database follows this slot): the app's changes committed in that WAL range` +
    `${p.lastCommitAt === null ? "" : ` (after ${p.lastCommitAt.toISOString()})`}, their views and their events, are no longer in it, and the slot cannot send them again. ` +
    `Capture refuses rather than skip them silently. ${FRESH_SNAPSHOT_FIX}`
  )
}
