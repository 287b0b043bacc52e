// The delivery engine's SQL: fan-out, claiming under a lease, recording attempts, holding
// and releasing deliveries whose destination is off, handing back, retention.
// Times that drive the schedule are passed in from the engine's Clock, never now().
// Plain async functions over the raw handle, each one batched statement: the steps in
// engine/ wrap each call once (runtime.ts `db`), and nothing per row goes through Effect, which
// would cost delivery throughput (one write carries up to hundreds of rows).
import type { Sql } from "postgres"
import type { Tx } from "../../platform/db/Database.ts"
import { pruneDeletions } from "../../pipeline/projection/write.ts"
import { PARTITIONS_CHANNEL } from "../../platform/db/channels.ts"

// Aliases: d delivery, ev event, co company, w endpoint, s subscription, k key, ks key secret.
const JOINS = `join service.events ev on ev.id = d.event_id
  left join service.companies co on co.id = d.company_id
  left join service.webhook_endpoints w on w.id = d.endpoint_id
  left join service.webhook_subscriptions s on s.id = d.subscription_id
  left join service.api_keys k on k.id = s.key_id
  left join service.webhook_key_secrets ks on ks.key_id = s.key_id`
const FROM = `service.webhook_deliveries d ${JOINS}`

/**
 * An endpoint's previous secret while its overlap lasts (issue 15.5; null otherwise, and for
 * subscriptions). The database's clock decides, as it set the end at the rotation.
 */
const PREVIOUS_SECRET = `case when w.previous_secret_expires_at > now() then w.previous_secret end`

/**
 * Why a delivery may not go now (null: it may). Send Again (manual) overrides only an
 * endpoint's switch-off (an admin may try a receiver that is back); what stops a destination
 * from receiving (modules, keys, subscriptions, the company's API and tier) holds for it too.
 */
const HOLD_REASON = `case
  when co.id is null or co.tier <> 'company' then 'the company is not on the Company tier'
  when coalesce(w.secret, ks.secret) is null then 'there is no signing secret'
  when d.endpoint_id is not null then case
    when not w.enabled and not d.manual then 'the endpoint is switched off'
    when not (ev.event = any(w.events)) then 'the endpoint no longer takes ' || ev.event
    when not (ev.resource = any(co.modules)) then 'the ' || ev.resource || ' module is turned off' end
  else case
    when not s.active then 'the subscription is turned off'
    when not co.api_enabled then 'the API is turned off for the company'
    when k.id is null or k.revoked_at is not null then 'the key is revoked'
    when k.expires_at <= now() then 'the key has expired'
    when not k.webhooks then 'the key no longer has the webhooks permission'
    when not (ev.resource = any(k.scopes)) then 'the key can no longer read ' || ev.resource
    when not (ev.resource = any(co.modules)) then 'the ' || ev.resource || ' module is turned off' end
  end`

/** Why the delivery could not be sent now, as the engine would decide it; null if it could. */
export const holdReason = async (sql: Tx, id: string): Promise<string | null> => {
  const [r] = await sql.unsafe<{ reason: string | null }[]>(
    `select ${HOLD_REASON} as reason from ${FROM} where d.id = $1`,
    [id]
  )
  return r?.reason ?? null
}

/** host[:port] of a stored (normalised, https-only) URL. */
export const originOf = (column: string) => `substring(${column} from '^https://([^/?#]+)')`

// ---------------------------------------------------------------------------------------
// Fan-out

/** Partitions of the outbox (sql/020: service.webhook_part), each with its own cursor. */
export const PARTS = 12

/** A place in the outbox: (commit LSN, index in the transaction). */
export type Pos = { readonly lsn: string; readonly seq: number }

const lsnValue = (lsn: string): bigint => {
  const [hi, lo] = lsn.split("/")
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}
/** Negative, zero or positive as a is before, at or after b. */
export const comparePos = (a: Pos, b: Pos): number => {
  const l = lsnValue(a.lsn) - lsnValue(b.lsn)
  return l !== 0n ? (l < 0n ? -1 : 1) : a.seq - b.seq
}
export const maxPos = (a: Pos, b: Pos): Pos => (comparePos(a, b) >= 0 ? a : b)
/** Before every event, and after every event. */
export const START: Pos = { lsn: "0/0", seq: 0 }
export const END: Pos = { lsn: "FFFFFFFF/FFFFFFFF", seq: 2_147_483_647 }

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
  select ev.id as event_id, w.id as endpoint_id, null::uuid as subscription_id, null::uuid as key_id, w.url, w.secret
  from ev
  join service.companies co on co.id = ev.company_id and co.tier = 'company' and ev.resource = any(co.modules)
  join service.webhook_endpoints w on w.company_id = ev.company_id and w.enabled and ev.event = any(w.events)
    and w.created_at <= ev.created_at
  where not (ev.recheck and exists (
    select 1 from service.webhook_deliveries d where d.event_id = ev.id and d.endpoint_id = w.id))
  union all
  select ev.id, null, s.id, s.key_id, s.url, ks.secret
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
 * the rows are written once the first attempts' outcomes are in.
 */
const FANOUT_READ = `
with ev as materialized (
  select e.id, e.company_id, e.event, e.resource, e.created_at, e.commit_lsn, e.seq, e.payload,
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
  per.endpoints::text[], per.subscriptions::text[], case when per.event_id is not null then ev.payload end as payload
from ev left join per on per.event_id = ev.id
order by ev.commit_lsn, ev.seq`

type FanoutRow = {
  event_id: string
  company_id: string
  event: string
  part: number
  lsn: string
  seq: number
  created_at: string
  endpoints: Array<string> | null
  subscriptions: Array<string> | null
  payload: string | null
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
}

export type FanoutReadInput = {
  /** Per partition: read after this place; null for a partition not read. */
  readonly after: ReadonlyArray<Pos | null>
  /** Per partition: events up to this place may have rows already (null: none can). */
  readonly recheck: ReadonlyArray<Pos | null>
  readonly limit: number
}

/** The next events of the partitions `after` names, with who gets each. */
export const readFanout = async (sql: Sql, input: FanoutReadInput): Promise<ReadonlyArray<FannedEvent>> => {
  const read = input.after.filter((p): p is Pos => p !== null)
  if (read.length === 0) return []
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
  return rows.map((r) => ({
    id: r.event_id,
    companyId: r.company_id,
    event: r.event,
    part: r.part,
    pos: { lsn: r.lsn, seq: r.seq },
    createdAt: r.created_at,
    payload: r.payload ?? "",
    endpoints: r.endpoints ?? [],
    subscriptions: r.subscriptions ?? []
  }))
}

/** Where a destination sends and how it signs. */
export type Destination = {
  readonly url: string
  /** The encrypted signing secret; null when a key has none (its deliveries are held). */
  readonly secret: Buffer | null
  /**
   * The endpoint's previous secret and when its overlap ends (ms since the epoch): it signs
   * too until then (issue 15.5). Kept with the destination, so the end is checked at each use.
   */
  readonly previousSecret: Buffer | null
  readonly previousSecretUntil: number
  readonly keyId: string | null
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
    }[]
  >`
    select w.id::text, w.url, w.secret, case when w.previous_secret_expires_at > now() then w.previous_secret end as previous_secret,
      w.previous_secret_expires_at as until, null::text as key_id
    from service.webhook_endpoints w where w.id = any(${[...endpoints]}::uuid[])
    union all
    select s.id::text, s.url, ks.secret, null, null, s.key_id::text from service.webhook_subscriptions s
    left join service.webhook_key_secrets ks on ks.key_id = s.key_id where s.id = any(${[...subscriptions]}::uuid[])`
  return new Map(
    rows.map((r) => [
      r.id,
      {
        url: r.url,
        secret: r.secret,
        previousSecret: r.previous_secret,
        previousSecretUntil: r.until?.getTime() ?? 0,
        keyId: r.key_id
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
  select e.id, e.company_id, e.event, e.resource, e.created_at, e.commit_lsn, e.seq, false as recheck
  from service.events e join service.webhook_fanout_parts p on p.part = service.webhook_part(e.id)
  where (e.commit_lsn, e.seq) > (select commit_lsn, seq from service.webhook_fanout) and (e.commit_lsn, e.seq) > (p.commit_lsn, p.seq)
  order by e.commit_lsn, e.seq
  limit $1
), t as materialized (${TARGETS}
), ins as (
  insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, next_attempt_at)
  select service.webhook_delivery_id(t.event_id, t.endpoint_id, t.subscription_id), ev.id, ev.company_id, ev.event,
    t.endpoint_id, t.subscription_id, ${originOf("t.url")}, $2
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

// ---------------------------------------------------------------------------------------
// Partitions: each engine process takes its share under a lease, renewed by a heartbeat.

export type OwnedPart = { readonly part: number; readonly cursor: Pos; readonly recorded: Pos }

export type HeartbeatResult = {
  /** Live engine processes, this one included. */
  readonly live: number
  /** How many partitions this process should own. */
  readonly share: number
  /** The partitions this process owns now, those just taken included. */
  readonly owned: ReadonlyArray<OwnedPart>
}

type PartRow = { part: number; commit_lsn: string; seq: number; recorded_lsn: string; recorded_seq: number }
const owned = (r: PartRow): OwnedPart => ({
  part: r.part,
  cursor: { lsn: r.commit_lsn, seq: r.seq },
  recorded: { lsn: r.recorded_lsn, seq: r.recorded_seq }
})

/**
 * Says this process is alive, renews the leases of its partitions, and takes free ones (never
 * owned, released, or whose owner stopped renewing) up to its share. Leases are on the
 * database's clock: they are about processes being alive, not about the schedule.
 */
export const heartbeat = async (sql: Sql, owner: string, leaseMs: number): Promise<HeartbeatResult> => {
  const [l] = await sql<{ live: number }[]>`
    with me as (
      insert into service.webhook_engines (id, alive_until) values (${owner}, now() + ${leaseMs} * interval '1 millisecond')
      on conflict (id) do update set alive_until = excluded.alive_until
    ), gone as (
      delete from service.webhook_engines where alive_until < now() - interval '1 hour'
    )
    select 1 + count(*)::int as live from service.webhook_engines where alive_until > now() and id <> ${owner}`
  const live = Math.max(1, l!.live)
  const share = Math.ceil(PARTS / live)
  // Each statement on its own, locking in partition order like the writes: no deadlock, and
  // no lock held across round trips.
  const mine = await sql<PartRow[]>`
    with lk as materialized (
      select part from service.webhook_fanout_parts where owner = ${owner} order by part for update
    )
    update service.webhook_fanout_parts p set lease_until = now() + ${leaseMs} * interval '1 millisecond'
    from lk where p.part = lk.part
    returning p.part, p.commit_lsn::text, p.seq, p.recorded_lsn::text, p.recorded_seq`
  let taken: ReadonlyArray<PartRow> = []
  if (mine.length < share) {
    taken = await sql<PartRow[]>`
      update service.webhook_fanout_parts p set owner = ${owner}, lease_until = now() + ${leaseMs} * interval '1 millisecond'
      where p.part in (
        select part from service.webhook_fanout_parts
        where owner is null or lease_until is null or lease_until <= now()
        order by part limit ${share - mine.length}
        for update skip locked)
      returning p.part, p.commit_lsn::text, p.seq, p.recorded_lsn::text, p.recorded_seq`
  }
  return { live, share, owned: [...mine, ...taken].map(owned).sort((a, b) => a.part - b.part) }
}

/** Gives up this process's partitions (shutdown), so that others take them at once. */
export const leaveFanout = async (sql: Sql, owner: string): Promise<void> => {
  await sql.begin(async (tx) => {
    await tx`
      with lk as materialized (select part from service.webhook_fanout_parts where owner = ${owner} order by part for update)
      update service.webhook_fanout_parts p set owner = null, lease_until = null from lk where p.part = lk.part`
    await tx`delete from service.webhook_engines where id = ${owner}`
    await tx`select pg_notify(${PARTITIONS_CHANNEL}, '')`
  })
}

// ---------------------------------------------------------------------------------------
// Claiming

export type Claimed = {
  readonly id: string
  readonly eventId: string
  readonly attempts: number
  readonly manual: boolean
  readonly event: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  readonly keyId: string | null
  readonly url: string
  readonly secret: Buffer
  /** The endpoint's previous secret while its overlap lasts: it signs too (issue 15.5). */
  readonly previousSecret: Buffer | null
  readonly origin: string
  readonly eventCreatedAt: string
  readonly payload: string
}

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
  from d ${JOINS}
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

/** Held deliveries whose destination is eligible again become due now. */
export const releaseHeld = async (sql: Sql, now: Date): Promise<number> => {
  const rows = await sql.unsafe(
    `with ok as (
       select d.id from ${FROM} where d.state = 'held' and (${HOLD_REASON}) is null
       limit 10000 for update of d skip locked
     )
     update service.webhook_deliveries d set state = 'pending', next_attempt_at = $1, held_reason = null
     from ok where d.id = ok.id returning 1`,
    [now],
    { prepare: true }
  )
  return rows.length
}

/** Gives leased deliveries back unattempted (shutdown), due at once for whoever runs next. */
export const handBack = async (sql: Tx, ids: ReadonlyArray<string>, owner: string, now: Date): Promise<number> => {
  if (ids.length === 0) return 0
  const rows = await sql`
    update service.webhook_deliveries set next_attempt_at = ${now}, lease_until = null, leased_by = null
    where id = any(${[...ids]}::uuid[]) and leased_by = ${owner} and state = 'pending' returning 1`
  return rows.length
}

// ---------------------------------------------------------------------------------------
// Recording attempts

export type Outcome = {
  readonly id: string
  /** attempts before this one: the lease is only honoured if nobody moved it meanwhile. */
  readonly before: number
  readonly state: "pending" | "succeeded" | "failed"
  readonly nextAt: Date | null
  readonly startedAt: Date
  readonly durationMs: number
  readonly status: number | null
  readonly error: string | null
  readonly errorKind: string | null
  readonly snippet: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  /** For endpoint health: a success resets the count, a delivery that failed every attempt adds one. */
  readonly health: "reset" | "fail" | null
  /** The subscription's receiver answered 410 Gone. */
  readonly gone: boolean
}

// PostgreSQL text cannot hold NUL; receivers' answers may.
const clean = (s: string | null): string | null => (s === null ? null : s.replaceAll("\u0000", "\uFFFD"))

/**
 * Outcomes of leased rows (retries, Send Again, first attempts written before they ended).
 * The attempt the row held moves to the earlier attempts; the row takes this one.
 */
const RECORD = `
with r as (
  select * from unnest($1::uuid[], $2::int[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::int[], $7::int[], $8::text[],
    $9::text[], $10::text[]) as x(id, before, state, next_at, started_at, duration_ms, status, error, error_kind, snippet)
), cur as materialized (
  select d.id, d.attempts, d.last_attempt_at, d.last_duration_ms, d.last_status, d.last_error, d.last_error_kind, d.last_snippet
  from service.webhook_deliveries d join r on r.id = d.id
  where d.id = any($1::uuid[]) and d.leased_by = $11 and d.attempts = r.before
  for update of d
), upd as (
  update service.webhook_deliveries d set attempts = r.before + 1, state = r.state, next_attempt_at = r.next_at,
    lease_until = null, leased_by = null, manual = false, last_status = r.status, last_error = r.error,
    last_error_kind = r.error_kind, last_attempt_at = r.started_at, last_duration_ms = r.duration_ms, last_snippet = r.snippet,
    finished_at = case when r.state in ('succeeded', 'failed') then now() end
  from r join cur on cur.id = r.id where d.id = r.id
  returning d.id
), earlier as (
  insert into service.webhook_earlier_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind, response_snippet)
  select cur.id, cur.attempts, cur.last_attempt_at, cur.last_duration_ms, cur.last_status, cur.last_error, cur.last_error_kind, cur.last_snippet
  from cur where cur.attempts > 0 and cur.last_duration_ms is not null
)
select id::text as delivery_id from upd`

/** RECORD's $1..$10: one array per column. */
const outcomeColumns = (outcomes: ReadonlyArray<Outcome>) => [
  outcomes.map((o) => o.id),
  outcomes.map((o) => o.before),
  outcomes.map((o) => o.state),
  outcomes.map((o) => o.nextAt?.toISOString() ?? null),
  outcomes.map((o) => o.startedAt.toISOString()),
  outcomes.map((o) => o.durationMs),
  outcomes.map((o) => o.status),
  outcomes.map((o) => clean(o.error)),
  outcomes.map((o) => o.errorKind),
  outcomes.map((o) => clean(o.snippet))
]

/**
 * New delivery rows, the fan-out cursors and endpoint resets, in one statement. A row is a
 * first attempt's outcome, or a delivery with no outcome yet: leased to this process (it
 * waited too long in memory) or due at once for anyone (handed back). The destinations are
 * locked for key share, in place of foreign keys: a destination deleted meanwhile gets no
 * row, and one being deleted waits for this transaction (its trigger then deletes them).
 * The cursors move only for partitions this process still owns; those it gives up are freed.
 */
const WRITE = `
with r as (
  -- Arrays, not JSON: json_to_recordset cost PostgreSQL more per row than the insert itself.
  select * from unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::uuid[], $6::uuid[], $7::text[], $8::text[], $9::int[],
    $10::timestamptz[], $11::timestamptz[], $12::int[], $13::text[], $14::text[], $15::timestamptz[], $16::int[], $17::text[])
    as x(id, event_id, company_id, event, endpoint_id, subscription_id, origin, state, attempts, next_at, lease_until, status,
      error, error_kind, started_at, duration_ms, snippet)
), ep as materialized (
  select w.id, w.url from service.webhook_endpoints w where w.id in (select r.endpoint_id from r) for key share
), sub as materialized (
  select s.id, s.url from service.webhook_subscriptions s where s.id in (select r.subscription_id from r) for key share
), ins as (
  insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, state, attempts,
    next_attempt_at, lease_until, leased_by, last_status, last_error, last_error_kind, last_attempt_at, last_duration_ms,
    last_snippet, finished_at)
  select r.id, r.event_id, r.company_id, r.event, r.endpoint_id, r.subscription_id,
    -- '' for a delivery handed back before its destination was looked up
    coalesce(nullif(r.origin, ''), (select ${originOf("ep.url")} from ep where ep.id = r.endpoint_id),
      (select ${originOf("sub.url")} from sub where sub.id = r.subscription_id)), r.state, r.attempts,
    r.next_at, r.lease_until, case when r.lease_until is not null then $18::uuid end, r.status, r.error, r.error_kind,
    r.started_at, r.duration_ms, r.snippet, case when r.state in ('succeeded', 'failed') then now() end
  from r
  where r.endpoint_id in (select id from ep) or r.subscription_id in (select id from sub)
  on conflict do nothing
  returning id
), c as (
  select * from json_to_recordset($19::text::json) as x(part int, lsn pg_lsn, seq int, rlsn pg_lsn, rseq int, release boolean)
), lk as materialized (
  -- In partition order, as the heartbeat locks them: the two never deadlock.
  select p.part from service.webhook_fanout_parts p where p.part in (select part from c) and p.owner = $18 order by p.part for update
), moved as (
  update service.webhook_fanout_parts p set commit_lsn = c.lsn, seq = c.seq,
    recorded_lsn = case when (c.rlsn, c.rseq) > (p.recorded_lsn, p.recorded_seq) then c.rlsn else p.recorded_lsn end,
    recorded_seq = case when (c.rlsn, c.rseq) > (p.recorded_lsn, p.recorded_seq) then c.rseq else p.recorded_seq end,
    owner = case when c.release then null else p.owner end,
    lease_until = case when c.release then null else p.lease_until end
  from c join lk on lk.part = c.part where p.part = c.part
  returning p.part
), reset as (
  update service.webhook_endpoints w set consecutive_failures = 0 where w.id = any($20::uuid[]) and w.consecutive_failures <> 0
)
select coalesce((select json_agg(id) from ins), '[]')::text as inserted, coalesce((select json_agg(part) from moved), '[]')::text as moved`

/** A delivery row to write: a first attempt's outcome, or a delivery without one yet. */
export type NewRow = {
  readonly id: string
  readonly eventId: string
  readonly companyId: string
  readonly event: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  readonly origin: string
  readonly state: "pending" | "succeeded" | "failed"
  readonly attempts: 0 | 1
  readonly nextAt: Date | null
  /** Leased to the writer until then (pending, no attempt yet); else null. */
  readonly leaseUntil: Date | null
  /** The first attempt, when it was made. */
  readonly outcome: Outcome | null
}

/** A partition's cursor: every delivery of its events up to `cursor` is written. */
export type CursorMove = {
  readonly part: number
  readonly cursor: Pos
  /** Rows of this partition's events written up to here (may be beyond the cursor). */
  readonly recorded: Pos
  /** Give the partition up (its owner drained it). */
  readonly release: boolean
}

export type WriteInput = {
  readonly owner: string
  readonly rows: ReadonlyArray<NewRow>
  /** Outcomes of rows leased to the owner, in completion order with the rows' first attempts. */
  readonly leased: ReadonlyArray<Outcome>
  /** Leased rows given back unattempted, due at `now`. */
  readonly handBack: ReadonlyArray<string>
  readonly cursors: ReadonlyArray<CursorMove>
  /** Every outcome in the batch (rows' first attempts and leased), in completion order. */
  readonly order: ReadonlyArray<Outcome>
  readonly switchOffAfter: number
  readonly now: Date
}

export type WriteResult = {
  /** Rows written (a row another process wrote first is not). */
  readonly inserted: ReadonlySet<string>
  /** Leased rows whose outcome was applied (a lease lost meanwhile is not). */
  readonly applied: ReadonlySet<string>
  /** Partitions whose cursor this process moved: those it still owns. */
  readonly parts: ReadonlySet<number>
  readonly handedBack: number
  readonly switchedOff: ReadonlyArray<string>
  readonly deletedSubscriptions: ReadonlyArray<string>
}

/** WRITE's $1..$17: one array per column. */
const rowColumns = (rows: ReadonlyArray<NewRow>): Array<Array<string | number | null>> => {
  const cols: Array<Array<string | number | null>> = Array.from({ length: 17 }, () => new Array(rows.length))
  rows.forEach((r, i) => {
    const o = r.outcome
    cols[0]![i] = r.id
    cols[1]![i] = r.eventId
    cols[2]![i] = r.companyId
    cols[3]![i] = r.event
    cols[4]![i] = r.endpointId
    cols[5]![i] = r.subscriptionId
    cols[6]![i] = r.origin
    cols[7]![i] = r.state
    cols[8]![i] = r.attempts
    cols[9]![i] = r.nextAt?.toISOString() ?? null
    cols[10]![i] = r.leaseUntil?.toISOString() ?? null
    cols[11]![i] = o?.status ?? null
    cols[12]![i] = clean(o?.error ?? null)
    cols[13]![i] = o?.errorKind ?? null
    cols[14]![i] = o?.startedAt.toISOString() ?? null
    cols[15]![i] = o?.durationMs ?? null
    cols[16]![i] = clean(o?.snippet ?? null)
  })
  return cols
}

type Q = Tx

/** Endpoint health and 410 Gone for the outcomes that were applied, in completion order. */
const health = async (
  tx: Q,
  outcomes: ReadonlyArray<Outcome>,
  switchOffAfter: number,
  alreadyReset: ReadonlyArray<string>
) => {
  const all = tallyEndpoints(outcomes)
  // Successes only: set the count to 0 where it is not 0 already (no write otherwise).
  const successesOnly = (t: EndpointTally) => t.reset && t.lead === 0 && t.peak === 0 && t.fails === 0
  const resets = all.filter((t) => successesOnly(t) && !alreadyReset.includes(t.id)).map((t) => t.id)
  if (resets.length > 0) {
    await tx`update service.webhook_endpoints set consecutive_failures = 0 where id = any(${resets}::uuid[]) and consecutive_failures <> 0`
  }
  const tallies = all.filter((t) => !successesOnly(t))
  let switchedOff: Array<string> = []
  if (tallies.length > 0) {
    const rows = await tx.unsafe<{ subject_id: string }[]>(
      COUNTERS,
      [
        JSON.stringify(
          tallies.map((e) => ({
            id: e.id,
            reset: e.reset,
            lead: e.lead,
            peak: e.peak,
            fails: e.fails,
            last_error: clean(e.lastError)
          }))
        ),
        switchOffAfter
      ],
      { prepare: true }
    )
    switchedOff = rows.map((r) => r.subject_id)
  }
  const gone = [...new Set(outcomes.filter((o) => o.gone && o.subscriptionId !== null).map((o) => o.subscriptionId!))]
  let deleted: Array<string> = []
  if (gone.length > 0) {
    deleted = (await tx.unsafe<{ subject_id: string }[]>(GONE, [gone], { prepare: true })).map((r) => r.subject_id)
  }
  return { switchedOff, deletedSubscriptions: deleted }
}

/** Endpoints whose outcomes in the batch are successes only: reset in the write statement itself. */
const resetsOf = (order: ReadonlyArray<Outcome>) =>
  tallyEndpoints(order)
    .filter((t) => t.reset && t.lead === 0 && t.peak === 0 && t.fails === 0)
    .map((t) => t.id)

/**
 * Everything the engine has to write, in one transaction: usually one statement (new rows,
 * cursors, resets); failures, leased rows and hand-backs add theirs.
 */
export const writeBatch = async (sql: Sql, input: WriteInput): Promise<WriteResult> => {
  const resets = resetsOf(input.order)
  const simple =
    input.leased.length === 0 &&
    input.handBack.length === 0 &&
    input.order.every((o) => o.health !== "fail" && !o.gone) &&
    // Mixed outcomes for one endpoint need the counters statement below.
    tallyEndpoints(input.order).every((t) => resets.includes(t.id))
  const run = async (tx: Q): Promise<WriteResult> => {
    let inserted = new Set<string>()
    let parts = new Set<number>()
    if (input.rows.length > 0 || input.cursors.length > 0 || resets.length > 0) {
      const cursors = JSON.stringify(
        input.cursors.map((c) => ({
          part: c.part,
          lsn: c.cursor.lsn,
          seq: c.cursor.seq,
          rlsn: c.recorded.lsn,
          rseq: c.recorded.seq,
          release: c.release
        }))
      )
      const [r] = await tx.unsafe<{ inserted: string; moved: string }[]>(
        WRITE,
        [...rowColumns(input.rows), input.owner, cursors, resets] as never,
        { prepare: true }
      )
      inserted = new Set(JSON.parse(r!.inserted) as Array<string>)
      parts = new Set(JSON.parse(r!.moved) as Array<number>)
      if (input.cursors.some((c) => c.release && parts.has(c.part)))
        await tx`select pg_notify(${PARTITIONS_CHANNEL}, '')`
    }
    let applied = new Set<string>()
    if (input.leased.length > 0) {
      const rows = await tx.unsafe<{ delivery_id: string }[]>(
        RECORD,
        [...outcomeColumns(input.leased), input.owner] as never,
        { prepare: true }
      )
      applied = new Set(rows.map((r) => r.delivery_id))
    }
    let handedBack = 0
    if (input.handBack.length > 0) handedBack = await handBack(tx, input.handBack, input.owner, input.now)
    // Only what was applied counts: a row another process wrote first, a lease lost meanwhile, belong to them.
    const mine = input.order.filter((o) => inserted.has(o.id) || applied.has(o.id))
    const h = simple
      ? { switchedOff: [], deletedSubscriptions: [] }
      : await health(tx, mine, input.switchOffAfter, resets)
    return { inserted, applied, parts, handedBack, ...h }
  }
  return simple ? run(sql) : sql.begin((tx) => run(tx))
}

/**
 * Endpoint health: the count of deliveries in a row that failed every attempt. A batch may
 * hold failures, then a success, then failures: the endpoint is switched off if the count
 * reached the threshold at any point (the stored count plus the failures before the first
 * success, or the longest run after a success), and the stored count becomes the run at its end.
 */
const COUNTERS = `
with c as (
  select * from json_to_recordset($1::text::json) as x(id uuid, reset boolean, lead int, peak int, fails int, last_error text)
), cur as materialized (
  select w.id, w.enabled as was_on,
    case when c.reset then c.fails else w.consecutive_failures + c.fails end as n,
    greatest(w.consecutive_failures + c.lead, c.peak) as hit, c.last_error
  from service.webhook_endpoints w join c on c.id = w.id
  for update of w
), upd as (
  update service.webhook_endpoints w set consecutive_failures = cur.n,
    enabled = w.enabled and not (cur.was_on and cur.hit >= $2),
    disabled_at = case when cur.was_on and cur.hit >= $2 then now() else w.disabled_at end,
    disabled_reason = case when cur.was_on and cur.hit >= $2
      then cur.hit || ' deliveries in a row failed every attempt; last error: ' || coalesce(cur.last_error, 'unknown')
      else w.disabled_reason end
  from cur where w.id = cur.id
  returning w.id, w.company_id, (cur.was_on and cur.hit >= $2) as switched_off, w.disabled_reason
), rest as (
  -- What the endpoint still had scheduled rests from now on, shown as held (status, the
  -- admin pages) until Turn On; a delivery leased right now is held at its next claim.
  update service.webhook_deliveries d set state = 'held', next_attempt_at = null, held_reason = 'the endpoint is switched off'
  from upd where upd.switched_off and d.endpoint_id = upd.id and d.state = 'pending' and not d.manual
    and (d.lease_until is null or d.lease_until <= now())
)
insert into service.activity (company_id, kind, subject_id, details)
select company_id, 'endpoint.switched_off', id::text, jsonb_build_object('reason', disabled_reason, 'by', 'service')
from upd where switched_off
returning subject_id`

/** A 410 Gone from a subscription's receiver: the subscriber wants no more (REST Hooks). */
const GONE = `
with gone as (
  delete from service.webhook_subscriptions where id = any($1::uuid[])
  returning id, company_id, key_id, url, event
)
insert into service.activity (company_id, kind, subject_id, details)
select company_id, 'subscription.deleted', id::text,
  jsonb_build_object('reason', 'the receiver answered 410 Gone', 'keyId', key_id, 'url', url, 'event', event, 'by', 'service')
from gone returning subject_id`

export type EndpointTally = {
  readonly id: string
  /** A success among the outcomes: the stored count does not carry on. */
  readonly reset: boolean
  /** Fully failed deliveries before the first success (all of them when none succeeded). */
  readonly lead: number
  /** The longest run of them after a success. */
  readonly peak: number
  /** The run at the end: after the last success, or all of them when none succeeded. */
  readonly fails: number
  readonly lastError: string | null
}

/** Per endpoint, in completion order: the runs of fully failed deliveries around successes. */
export const tallyEndpoints = (outcomes: ReadonlyArray<Outcome>): ReadonlyArray<EndpointTally> => {
  const byId = new Map<
    string,
    { reset: boolean; lead: number; peak: number; fails: number; lastError: string | null }
  >()
  for (const o of outcomes) {
    if (o.endpointId === null || o.health === null) continue
    const t = byId.get(o.endpointId) ?? { reset: false, lead: 0, peak: 0, fails: 0, lastError: null }
    if (o.health === "reset") {
      t.reset = true
      t.fails = 0
    } else {
      t.fails++
      if (t.reset) t.peak = Math.max(t.peak, t.fails)
      else t.lead = t.fails
      t.lastError = o.error
    }
    byId.set(o.endpointId, t)
  }
  return [...byId].map(([id, t]) => ({ id, ...t }))
}

export type RecordInput = {
  readonly owner: string
  /** In completion order. */
  readonly outcomes: ReadonlyArray<Outcome>
  readonly switchOffAfter: number
}

export type RecordResult = {
  readonly applied: ReadonlySet<string>
  readonly switchedOff: ReadonlyArray<string>
  readonly deletedSubscriptions: ReadonlyArray<string>
}

/** Outcomes of rows leased to `owner`, with endpoint health and 410 Gone. */
export const recordOutcomes = async (sql: Sql, input: RecordInput): Promise<RecordResult> =>
  sql.begin(async (tx) => {
    const rows = await tx.unsafe<{ delivery_id: string }[]>(
      RECORD,
      [...outcomeColumns(input.outcomes), input.owner] as never,
      { prepare: true }
    )
    const applied = new Set(rows.map((r) => r.delivery_id))
    // An outcome whose lease was lost meanwhile belongs to whoever holds it now.
    const h = await health(
      tx,
      input.outcomes.filter((o) => applied.has(o.id)),
      input.switchOffAfter,
      []
    )
    return { applied, ...h }
  })

// ---------------------------------------------------------------------------------------
// Retention

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
  return { deliveries, attempts, events }
}
