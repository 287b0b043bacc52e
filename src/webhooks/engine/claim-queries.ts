// Claim's SQL: leasing due deliveries (retries, hand-backs, Send Again, replays) in batches,
// fair between receiver origins, holding those whose destination may not receive now; and
// when the next one falls due. Times that drive the schedule come from the engine's Clock.
import type { Sql } from "postgres"
import type { Claimed } from "./item.ts"
import { DELIVERY_JOINS, HOLD_REASON } from "./hold.ts"

/**
 * An endpoint's previous secret while its overlap lasts (docs/events.md#secret-rotation; null otherwise, and for
 * subscriptions). The database's clock decides, as it set the end at the rotation.
 */
const PREVIOUS_SECRET = `case when w.previous_secret_expires_at > now() then w.previous_secret end`

/**
 * Leases up to `free` due deliveries, at most `perOrigin` per receiver origin (`busy` gives
 * what this process already holds), skipping rows other processes hold. Due deliveries whose
 * destination is off are moved to held on the way. `scanned` tells whether more due rows
 * may be waiting.
 */
const CLAIM = `
with d as materialized (
  select * from service.webhook_due($1, $2::text[], $3)
), cand as materialized (
  select d.id, d.event_id, d.next_attempt_at, d.attempts, d.manual, d.event, d.endpoint_id, d.subscription_id, s.key_id,
    coalesce(w.url, s.url) as url, coalesce(w.secret, ks.secret) as secret, ${PREVIOUS_SECRET} as previous_secret, d.origin,
    to_char(ev.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as event_created_at,
    ev.payload, ${HOLD_REASON} as hold_reason
  from d ${DELIVERY_JOINS}
), ranked as (
  select c.id, c.origin, c.next_attempt_at,
    row_number() over (partition by c.origin order by c.next_attempt_at, c.id) as rn
  from cand c where c.hold_reason is null
), picked as (
  select r.id from ranked r
  left join unnest($4::text[], $5::int[]) as b(origin, n) on b.origin = r.origin
  where r.rn <= $6 - coalesce(b.n, 0)
  order by r.next_attempt_at, r.id
  limit $7
), held as (
  update service.webhook_deliveries d set state = 'held', next_attempt_at = null, held_reason = c.hold_reason,
    lease_until = null, leased_by = null
  from cand c where d.id = c.id and c.hold_reason is not null
  returning d.id
), leased as (
  -- Only unindexed columns change, so the row is updated in place (HOT).
  update service.webhook_deliveries d set lease_until = $8, leased_by = $9
  from picked p where d.id = p.id
  returning d.id
)
select c.id::text, c.event_id::text, (l.id is not null) as leased, c.attempts, c.manual, c.event, c.endpoint_id::text,
  c.subscription_id::text, c.key_id::text, c.url, case when l.id is not null then c.secret end as secret,
  case when l.id is not null then c.previous_secret end as previous_secret, c.origin,
  c.event_created_at, case when l.id is not null then c.payload end as payload
from cand c left join leased l on l.id = c.id`

type ClaimRow = {
  id: string
  event_id: string
  leased: boolean
  attempts: number
  manual: boolean
  event: string
  endpoint_id: string | null
  subscription_id: string | null
  key_id: string | null
  url: string
  secret: Buffer | null
  previous_secret: Buffer | null
  origin: string
  event_created_at: string
  payload: string | null
}

export type ClaimInput = {
  readonly now: Date
  readonly free: number
  readonly scan: number
  readonly perOrigin: number
  /** Origins at their limit: not even scanned. */
  readonly saturated: ReadonlyArray<string>
  /** Deliveries this process holds per origin. */
  readonly busy: ReadonlyMap<string, number>
  readonly leaseUntil: Date
  readonly owner: string
}

export const claim = async (
  sql: Sql,
  input: ClaimInput
): Promise<{ claimed: ReadonlyArray<Claimed>; scanned: number }> => {
  const rows = await sql.unsafe<ClaimRow[]>(
    CLAIM,
    [
      input.now,
      [...input.saturated],
      input.scan,
      [...input.busy.keys()],
      [...input.busy.values()],
      input.perOrigin,
      input.free,
      input.leaseUntil,
      input.owner
    ],
    { prepare: true }
  )
  const claimed: Array<Claimed> = []
  for (const r of rows) {
    if (!r.leased) continue
    claimed.push({
      id: r.id,
      eventId: r.event_id,
      attempts: r.attempts,
      manual: r.manual,
      event: r.event,
      endpointId: r.endpoint_id,
      subscriptionId: r.subscription_id,
      keyId: r.key_id,
      url: r.url,
      secret: r.secret!,
      previousSecret: r.previous_secret,
      origin: r.origin,
      eventCreatedAt: r.event_created_at,
      payload: r.payload!
    })
  }
  return { claimed, scanned: rows.length }
}

/** The next time a pending delivery falls due after `now`, if any (leases running out: the poll). */
export const nextDue = async (sql: Sql, now: Date): Promise<number | null> => {
  const [r] = await sql<{ at: Date | null }[]>`
    select min(next_attempt_at) as at from service.webhook_deliveries where state = 'pending' and next_attempt_at > ${now}`
  return r?.at ? r.at.getTime() : null
}
