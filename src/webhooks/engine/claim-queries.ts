// Claim's SQL: leasing due deliveries (retries, hand-backs, Send Again, replays) in batches,
// fair between receiver origins, holding those whose destination may not receive now; and
// when the next one falls due. Times that drive the schedule come from the engine's Clock.
import type { Sql } from "postgres"
import { eventPayload } from "../../pipeline/outbox/events.ts"
import type { Claimed } from "./item.ts"
import { DELIVERY_JOINS, HOLD_REASON } from "./hold.ts"
import { thinData } from "../net/body.ts"
import { ALERT_RESOURCE } from "../../domain/event-kinds.ts"

/**
 * An endpoint's previous secret while its overlap lasts (docs/events.md#secret-rotation; null otherwise, and for
 * subscriptions). The database's clock decides, as it set the end at the rotation.
 */
const PREVIOUS_SECRET = `case when w.previous_secret_expires_at > now() then w.previous_secret end`

/**
 * Leases up to `free` due deliveries, each destination's at most the room this process has
 * for it (`rooms`; a destination new here: its origin's, else `defaultRoom`, and its rate's
 * share), skipping rows other processes hold and destinations and origins with no room. Due
 * deliveries whose destination is off are moved to held on the way. A delivery ordered by
 * record waits while an earlier one of its record to its destination is pending (it is moved
 * to when that one is due: `blocked` 'record'), and while fan-out has not passed its event
 * everywhere (`blocked` 'fan-out': an earlier event of the record may have no row yet).
 * `scanned` tells whether more due rows may be waiting.
 */
const CLAIM = `
with d as materialized (
  select * from service.webhook_due($1, $2::text[], $3::uuid[], $4)
), cand as materialized (
  select d.id, d.event_id, d.next_attempt_at, d.attempts, d.manual, d.event, d.endpoint_id, d.subscription_id, s.key_id,
    coalesce(w.url, s.url) as url, coalesce(w.secret, ks.secret) as secret, ${PREVIOUS_SECRET} as previous_secret, d.origin,
    to_char(ev.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as event_created_at,
    ev.payload, ev.resource as event_resource, ev.record_id as event_record_id, ${HOLD_REASON} as hold_reason, d.company_id, d.ordering_key, coalesce(w.rate_limit, s.rate_limit) as rate_limit,
    coalesce(d.endpoint_id, d.subscription_id) as dest,
    (coalesce(w.payload, s.payload) = 'thin' and ev.resource <> '${ALERT_RESOURCE}') as thin,
    case when d.ordering_key is null then null
      when (ev.commit_lsn, ev.seq) > (select f.commit_lsn, f.seq from service.webhook_fanout f) then 'fan-out'
      when pred.until is not null then 'record' end as blocked,
    -- An earlier one in flight (leased) may finish while this statement runs: its record step's
    -- wake (nextInOrder) then comes before this push and is lost, so the wait is cut to 2 s and
    -- looked at again, not carried to the end of its lease.
    case when pred.inflight then least(pred.until, $1::timestamptz + interval '2 seconds') else pred.until end
      as blocked_until
  from d ${DELIVERY_JOINS}
  left join lateral (
    select max(greatest(p.next_attempt_at, coalesce(p.lease_until, p.next_attempt_at))) as until,
      bool_or(p.lease_until > $1::timestamptz) as inflight
    from service.webhook_deliveries p join service.events pe on pe.id = p.event_id
    where d.ordering_key is not null and coalesce(p.endpoint_id, p.subscription_id) = coalesce(d.endpoint_id, d.subscription_id)
      and p.ordering_key = d.ordering_key and p.state = 'pending' and p.id <> d.id
      and (pe.commit_lsn, pe.seq) < (ev.commit_lsn, ev.seq)
  ) pred on true
), ranked as (
  select c.id, c.next_attempt_at,
    row_number() over (partition by c.dest order by c.next_attempt_at, c.id) as rn,
    coalesce(f.room, least(coalesce(oc.cap, $9),
      case when c.rate_limit is null then $9 else greatest(1, ceil(c.rate_limit / $13 * $14 / 1000.0))::int end)) as room
  from cand c
  left join unnest($5::uuid[], $6::int[]) as f(dest, room) on f.dest = c.dest
  left join unnest($7::text[], $8::int[]) as oc(origin, cap) on oc.origin = c.origin
  where c.hold_reason is null and c.blocked is null
), picked as (
  select r.id from ranked r
  where r.rn <= r.room
  order by r.next_attempt_at, r.id
  limit $10
), held as (
  update service.webhook_deliveries d set state = 'held', next_attempt_at = null, held_reason = c.hold_reason,
    lease_until = null, leased_by = null
  from cand c where d.id = c.id and c.hold_reason is not null
  returning d.id
), pushed as (
  -- Waiting behind an earlier delivery of its record: due when that one is, not walked past meanwhile.
  update service.webhook_deliveries d set next_attempt_at = c.blocked_until
  from cand c where d.id = c.id and c.hold_reason is null and c.blocked = 'record' and c.blocked_until > $1
  returning d.id
), leased as (
  -- Only unindexed columns change, so the row is updated in place (HOT).
  update service.webhook_deliveries d set lease_until = $11, leased_by = $12
  from picked p where d.id = p.id
  returning d.id
)
select c.id::text, c.event_id::text, (l.id is not null) as leased, c.attempts, c.manual, c.event, c.endpoint_id::text,
  c.subscription_id::text, c.key_id::text, c.url, case when l.id is not null then c.secret end as secret,
  case when l.id is not null then c.previous_secret end as previous_secret, c.origin,
  c.event_created_at, case when l.id is not null and not c.thin then ${eventPayload("c", "event_")} end as payload,
  c.thin, c.event_resource, c.event_record_id::text, c.company_id::text, c.ordering_key,
  c.rate_limit, c.blocked, (c.hold_reason is not null) as held
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
  thin: boolean
  event_resource: string
  event_record_id: string
  company_id: string
  ordering_key: string | null
  rate_limit: number | null
  blocked: "fan-out" | "record" | null
  held: boolean
}

export type ClaimInput = {
  readonly now: Date
  readonly free: number
  readonly scan: number
  /** Origins at their limit: not even scanned. */
  readonly saturated: ReadonlyArray<string>
  /** Destinations at their limit: not even scanned. */
  readonly full: ReadonlyArray<string>
  /** Destinations with deliveries here: how many more this process may hold. */
  readonly rooms: ReadonlyMap<string, number>
  /** Origins with deliveries here: how many of a destination new here it may hold. */
  readonly originCaps: ReadonlyMap<string, number>
  /** How many of a destination it may hold when nothing is known of its origin. */
  readonly defaultRoom: number
  /** Engine processes sharing the work: a rate is shared among them. */
  readonly live: number
  /** A destination's rate lets this process hold what it may send in this long. */
  readonly rateWindowMs: number
  readonly leaseUntil: Date
  readonly owner: string
}

export const claim = async (
  sql: Sql,
  input: ClaimInput
): Promise<{
  claimed: ReadonlyArray<Claimed>
  scanned: number
  /** Due and free to go, but not leased: their destination had no more room here. */
  left: number
  waitingForFanout: number
}> => {
  const rows = await sql.unsafe<ClaimRow[]>(
    CLAIM,
    [
      input.now,
      [...input.saturated],
      [...input.full],
      input.scan,
      [...input.rooms.keys()],
      [...input.rooms.values()],
      [...input.originCaps.keys()],
      [...input.originCaps.values()],
      input.defaultRoom,
      input.free,
      input.leaseUntil,
      input.owner,
      Math.max(1, input.live),
      input.rateWindowMs
    ],
    { prepare: true }
  )
  const claimed: Array<Claimed> = []
  let waitingForFanout = 0
  let left = 0
  for (const r of rows) {
    if (r.blocked === "fan-out") waitingForFanout++
    if (!r.leased) {
      if (!r.held && r.blocked === null) left++
      continue
    }
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
      // A thin destination never reads the record: only where it is (docs/events.md#thin-payloads).
      payload: r.thin ? thinData(r.event_resource, r.event_record_id, r.company_id) : r.payload!,
      companyId: r.company_id,
      rateLimit: r.rate_limit,
      orderingKey: r.ordering_key
    })
  }
  return { claimed, scanned: rows.length, left, waitingForFanout }
}

/** The next time a pending delivery falls due after `now`, if any (leases running out: the poll). */
export const nextDue = async (sql: Sql, now: Date): Promise<number | null> => {
  const [r] = await sql<{ at: Date | null }[]>`
    select min(next_attempt_at) as at from service.webhook_deliveries where state = 'pending' and next_attempt_at > ${now}`
  return r?.at ? r.at.getTime() : null
}
