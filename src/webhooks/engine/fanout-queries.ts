// Fan-out's SQL: the next events of the partitions this process owns with who gets each, the
// destinations' addresses and secrets, and (tests, tools) fan-out into rows without sending.
// Plain async functions over the raw handle, each one batched statement: fanout.ts wraps each
// call once (runtime.ts `db`).
import type { Sql } from "postgres"
import { eventPayload } from "../../pipeline/outbox/events.ts"
import { originOf } from "../net/origin.ts"
import type { Filter } from "../../domain/filters/filter.ts"
import { END, START, comparePos, type Pos } from "./positions.ts"

/**
 * Outbox events not fanned out yet (id, created_at): each after its own partition's cursor.
 * The slowest cursor (the service.webhook_fanout view) only bounds the scan.
 */
export const OUTBOX_BACKLOG = `
  select e.id, e.created_at from service.events e, service.webhook_fanout f, service.webhook_fanout_parts p
  where (e.commit_lsn, e.seq) > (f.commit_lsn, f.seq) and p.part = service.webhook_part(e.id)
    and (e.commit_lsn, e.seq) > (p.commit_lsn, p.seq)`

/**
 * Who gets the events of `ev`: endpoints that chose the event and are on, subscriptions whose
 * key is active and may read the record, on the Company tier, module on. Destinations made
 * after an event do not get it. Where `ev.recheck`, a destination that already has a row for
 * the event (written before a crash, beyond the cursor) is left out.
 */
const TARGETS = `
  select ev.id as event_id, w.id as endpoint_id, null::uuid as subscription_id, null::uuid as key_id, w.url, w.secret,
    w.ordering
  from ev
  join service.companies co on co.id = ev.company_id and co.tier = 'company' and ev.resource = any(co.modules)
  join service.webhook_endpoints w on w.company_id = ev.company_id and w.enabled and ev.event = any(w.events)
    and w.created_at <= ev.created_at
  where not (ev.recheck and exists (
    select 1 from service.webhook_deliveries d where d.event_id = ev.id and d.endpoint_id = w.id))
  union all
  select ev.id, null, s.id, s.key_id, s.url, ks.secret, s.ordering
  from ev
  join service.companies co on co.id = ev.company_id and co.tier = 'company' and co.api_enabled
    and ev.resource = any(co.modules)
  join service.webhook_subscriptions s on s.company_id = ev.company_id and s.event = ev.event and s.active
    and s.created_at <= ev.created_at
  join service.api_keys k on k.id = s.key_id and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())
    and k.webhooks and ev.resource = any(k.scopes)
  left join service.webhook_key_secrets ks on ks.key_id = s.key_id
  where not (ev.recheck and exists (
    select 1 from service.webhook_deliveries d where d.event_id = ev.id and d.subscription_id = s.id))`

/**
 * The next events of the given partitions, each after its own place, in outbox order, with
 * the ids of their destinations (their addresses and secrets: destinationsOf). Only reads:
 * the rows are written once the first attempts' outcomes are in. Every row carries the outbox's
 * newest event as this read saw it (one row with no event when none is read): a read that
 * returns fewer than it may has covered every event of its partitions up to there.
 */
const FANOUT_READ = `
with head as materialized (
  select e.commit_lsn, e.seq from service.events e order by e.commit_lsn desc, e.seq desc limit 1
), ev as materialized (
  select e.id, e.company_id, e.event, e.resource, e.record_id, e.created_at, e.commit_lsn, e.seq, e.payload,
    service.webhook_part(e.id) as part,
    (e.commit_lsn, e.seq) <= (($6::pg_lsn[])[service.webhook_part(e.id) + 1], ($7::int[])[service.webhook_part(e.id) + 1]) as recheck
  from service.events e
  where (e.commit_lsn, e.seq) > ($1::pg_lsn, $2::int)
    and (e.commit_lsn, e.seq) > (($3::pg_lsn[])[service.webhook_part(e.id) + 1], ($4::int[])[service.webhook_part(e.id) + 1])
  order by e.commit_lsn, e.seq
  limit $5
), t as materialized (${TARGETS}
), per as (
  select t.event_id, array_agg(t.endpoint_id) filter (where t.endpoint_id is not null) as endpoints,
    array_agg(t.subscription_id) filter (where t.subscription_id is not null) as subscriptions
  from t group by t.event_id
)
select ev.id::text as event_id, ev.company_id::text, ev.event, ev.part, ev.commit_lsn::text as lsn, ev.seq,
  to_char(ev.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at,
  per.endpoints::text[], per.subscriptions::text[], case when per.event_id is not null then ${eventPayload("ev")} end as payload,
  ev.resource || ':' || ev.record_id as record, h.commit_lsn::text as head_lsn, h.seq as head_seq
from head h left join (ev left join per on per.event_id = ev.id) on true
order by ev.commit_lsn, ev.seq`

type FanoutRow = {
  event_id: string | null
  company_id: string
  event: string
  part: number
  lsn: string
  seq: number
  created_at: string
  endpoints: Array<string> | null
  subscriptions: Array<string> | null
  payload: string | null
  record: string | null
  head_lsn: string | null
  head_seq: number | null
}

export type FannedEvent = {
  readonly id: string
  readonly companyId: string
  readonly event: string
  readonly part: number
  readonly pos: Pos
  readonly createdAt: string
  /** Empty when nobody gets the event. */
  readonly payload: string
  readonly endpoints: ReadonlyArray<string>
  readonly subscriptions: ReadonlyArray<string>
  /** '<resource>:<record id>': a destination that orders by record keeps its events in order. */
  readonly record: string
}

export type FanoutReadInput = {
  /** Per partition: read after this place; null for a partition not read. */
  readonly after: ReadonlyArray<Pos | null>
  /** Per partition: events up to this place may have rows already (null: none can). */
  readonly recheck: ReadonlyArray<Pos | null>
  readonly limit: number
}

/**
 * The next events of the partitions `after` names, with who gets each, and the outbox's
 * newest event as the read saw it (null: none).
 */
export const readFanout = async (
  sql: Sql,
  input: FanoutReadInput
): Promise<{ readonly events: ReadonlyArray<FannedEvent>; readonly head: Pos | null }> => {
  const read = input.after.filter((p): p is Pos => p !== null)
  if (read.length === 0) return { events: [], head: null }
  const from = read.reduce((a, b) => (comparePos(a, b) <= 0 ? a : b))
  const after = input.after.map((p) => p ?? END)
  const recheck = input.recheck.map((p) => p ?? START)
  const rows = await sql.unsafe<FanoutRow[]>(
    FANOUT_READ,
    [
      from.lsn,
      from.seq,
      after.map((p) => p.lsn),
      after.map((p) => p.seq),
      input.limit,
      recheck.map((p) => p.lsn),
      recheck.map((p) => p.seq)
    ],
    { prepare: true }
  )
  const first = rows[0]
  const head = first?.head_lsn != null ? { lsn: first.head_lsn, seq: first.head_seq! } : null
  const events: Array<FannedEvent> = []
  for (const r of rows) {
    if (r.event_id === null) continue
    events.push({
      id: r.event_id,
      companyId: r.company_id,
      event: r.event,
      part: r.part,
      pos: { lsn: r.lsn, seq: r.seq },
      createdAt: r.created_at,
      payload: r.payload ?? "",
      endpoints: r.endpoints ?? [],
      subscriptions: r.subscriptions ?? [],
      record: r.record!
    })
  }
  return { events, head }
}

/** Where a destination sends and how it signs. */
export type Destination = {
  readonly url: string
  /** The encrypted signing secret; null when a key has none (its deliveries are held). */
  readonly secret: Buffer | null
  /**
   * The endpoint's previous secret and when its overlap ends (ms since the epoch): it signs
   * too until then (docs/events.md#secret-rotation). Kept with the destination, so the end is checked at each use.
   */
  readonly previousSecret: Buffer | null
  readonly previousSecretUntil: number
  readonly keyId: string | null
  /** Deliveries per second at most; null: no limit. */
  readonly rateLimit: number | null
  /** Events of one record in the order they happened. */
  readonly ordering: boolean
  /** Only events whose data matches it get a delivery (docs/events.md#content-filters); null: all. */
  readonly filter: Filter | null
  /** The body's data is the record's id, company and API address only (docs/events.md#thin-payloads). */
  readonly thin: boolean
}

/** The destinations of the given ids that exist, by id. */
export const destinationsOf = async (
  sql: Sql,
  endpoints: ReadonlyArray<string>,
  subscriptions: ReadonlyArray<string>
): Promise<ReadonlyMap<string, Destination>> => {
  const rows = await sql<
    {
      id: string
      url: string
      secret: Buffer | null
      previous_secret: Buffer | null
      until: Date | null
      key_id: string | null
      rate_limit: number | null
      ordering: string
      filter: Filter | null
      payload: string
    }[]
  >`
    select w.id::text, w.url, w.secret, case when w.previous_secret_expires_at > now() then w.previous_secret end as previous_secret,
      w.previous_secret_expires_at as until, null::text as key_id, w.rate_limit, w.ordering, w.filter, w.payload
    from service.webhook_endpoints w where w.id = any(${[...endpoints]}::uuid[])
    union all
    select s.id::text, s.url, ks.secret, null, null, s.key_id::text, s.rate_limit, s.ordering, s.filter, s.payload
    from service.webhook_subscriptions s
    left join service.webhook_key_secrets ks on ks.key_id = s.key_id where s.id = any(${[...subscriptions]}::uuid[])`
  return new Map(
    rows.map((r) => [
      r.id,
      {
        url: r.url,
        secret: r.secret,
        previousSecret: r.previous_secret,
        previousSecretUntil: r.until?.getTime() ?? 0,
        keyId: r.key_id,
        rateLimit: r.rate_limit,
        ordering: r.ordering === "record",
        filter: r.filter,
        thin: r.payload === "thin"
      }
    ])
  )
}

/**
 * Fans the next events out into pending rows, due at `now`, and moves every partition's
 * cursor past them: fan-out without sending (tests, and a way to see what fan-out would
 * make). Run it only while no engine fans out.
 */
const FANOUT_ROWS = `
with ev as materialized (
  select e.id, e.company_id, e.event, e.resource, e.record_id, e.created_at, e.commit_lsn, e.seq, false as recheck
  from service.events e join service.webhook_fanout_parts p on p.part = service.webhook_part(e.id)
  where (e.commit_lsn, e.seq) > (select commit_lsn, seq from service.webhook_fanout) and (e.commit_lsn, e.seq) > (p.commit_lsn, p.seq)
  order by e.commit_lsn, e.seq
  limit $1
), t as materialized (${TARGETS}
), ins as (
  insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, next_attempt_at,
    ordering_key)
  select service.webhook_delivery_id(t.event_id, t.endpoint_id, t.subscription_id), ev.id, ev.company_id, ev.event,
    t.endpoint_id, t.subscription_id, ${originOf("t.url")}, $2,
    case when t.ordering = 'record' then ev.resource || ':' || ev.record_id end
  from t join ev on ev.id = t.event_id order by ev.commit_lsn, ev.seq
  on conflict do nothing
  returning 1
), last as (
  select commit_lsn, seq from ev order by commit_lsn desc, seq desc limit 1
), moved as (
  update service.webhook_fanout_parts p set commit_lsn = last.commit_lsn, seq = last.seq
  from last where (p.commit_lsn, p.seq) < (last.commit_lsn, last.seq) returning 1
)
select (select count(*) from ev)::int as events, (select count(*) from ins)::int as deliveries`

export const fanoutRows = async (
  sql: Sql,
  batch: number,
  now: Date
): Promise<{ readonly events: number; readonly deliveries: number }> => {
  const [r] = await sql.unsafe<{ events: number; deliveries: number }[]>(FANOUT_ROWS, [batch, now])
  return r!
}
