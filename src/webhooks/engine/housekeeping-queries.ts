// Housekeeping's SQL: held deliveries whose destination can receive again, and retention.
import type { Sql } from "postgres"
import { pruneDeletions } from "../../pipeline/projection/write.ts"
import { pruneRecordChanges } from "../../pipeline/projection/record-changes.ts"
import { DELIVERY_FROM, HOLD_REASON } from "./hold.ts"

/** Held deliveries whose destination is eligible again become due now. */
export const releaseHeld = async (sql: Sql, now: Date): Promise<number> => {
  const rows = await sql.unsafe(
    `with ok as (
       select d.id from ${DELIVERY_FROM} where d.state = 'held' and (${HOLD_REASON}) is null
       limit 10000 for update of d skip locked
     )
     update service.webhook_deliveries d set state = 'pending', next_attempt_at = $1, held_reason = null
     from ok where d.id = ok.id returning 1`,
    [now],
    { prepare: true }
  )
  return rows.length
}

/**
 * Deletes deliveries (with their attempts), attempts, outbox events and tombstones of
 * deleted records older than `before`, in chunks. An event goes only once fan-out has passed
 * it and no delivery still points at it (a replay's, or one being attempted right now): the
 * events feed and replays cover the same 30 days as the delivery log.
 */
export const purgeOld = async (
  sql: Sql,
  before: Date,
  chunk = 5_000
): Promise<{ deliveries: number; attempts: number; events: number }> => {
  let deliveries = 0
  let attempts = 0
  for (;;) {
    const r = await sql`
      delete from service.webhook_deliveries d using (
        select id from service.webhook_deliveries where created_at < ${before} and (lease_until is null or lease_until < ${before})
        limit ${chunk}
      ) old where d.id = old.id returning 1`
    deliveries += r.length
    if (r.length < chunk) break
  }
  for (;;) {
    const r = await sql`
      delete from service.webhook_earlier_attempts a using (
        select id from service.webhook_earlier_attempts where started_at < ${before} limit ${chunk}
      ) old where a.id = old.id returning 1`
    attempts += r.length
    if (r.length < chunk) break
  }
  let events = 0
  for (;;) {
    const r = await sql`
      delete from service.events e using (
        select ev.id from service.events ev, service.webhook_fanout f
        where ev.created_at < ${before} and (ev.commit_lsn, ev.seq) <= (f.commit_lsn, f.seq)
          and not exists (select 1 from service.webhook_deliveries d where d.event_id = ev.id)
        limit ${chunk}
      ) old where e.id = old.id returning 1`
    events += r.length
    if (r.length < chunk) break
  }
  // Tombstones of deleted records (GET /api/v1/deletions) cover the same 30 days.
  await pruneDeletions(sql, before, chunk)
  // So do the record changes followers read (GET /api/v1/stream).
  await pruneRecordChanges(sql, before, chunk)
  return { deliveries, attempts, events }
}
