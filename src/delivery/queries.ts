// The delivery engine's SQL: fan-out, claiming under a lease, recording attempts, holding
// and releasing deliveries whose destination is off, handing back, retention.
// Times that drive the schedule are passed in from the engine's Clock, never now().
import type { Sql, TransactionSql } from "postgres"
import { pruneDeletions } from "../projection/write.ts"

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
export const holdReason = async (sql: Sql | TransactionSql<Record<string, unknown>>, id: string): Promise<string | null> => {
  const [r] = await sql.unsafe<{ reason: string | null }[]>(`select ${HOLD_REASON} as reason from ${FROM} where d.id = $1`, [id])
  return r?.reason ?? null
}

/** host[:port] of a stored (normalised, https-only) URL. */
export const originOf = (column: string) => `substring(${column} from '^https://([^/?#]+)')`

// ---------------------------------------------------------------------------------------
// Fan-out

/**
 * Turns the next events after the cursor into deliveries and moves the cursor, in one
 * statement: the cursor row lock serialises processes, and the unique (event, destination)
 * constraints make a repeat harmless. Destinations made after an event do not get it.
 * When there are few new deliveries ($3 at most), they are leased to this process on the
 * way and returned ready to send, which saves a claim on the path from commit to receiver.
 */
const FANOUT = `
with cur as materialized (
  select commit_lsn, seq from service.webhook_fanout for update
), ev as materialized (
  select e.id, e.company_id, e.event, e.resource, e.created_at, e.commit_lsn, e.seq, e.payload
  from service.events e
  -- Scalar subqueries, so the cursor bounds a range scan of the (commit_lsn, seq) index.
  where (e.commit_lsn, e.seq) > ((select commit_lsn from cur), (select seq from cur))
  order by e.commit_lsn, e.seq
  limit $1
), targets as materialized (
  select ev.id as event_id, ev.company_id, ev.event, w.id as endpoint_id, null::uuid as subscription_id,
    null::uuid as key_id, w.url, w.secret, ${PREVIOUS_SECRET} as previous_secret, ev.commit_lsn, ev.seq
  from ev
  join service.companies co on co.id = ev.company_id and co.tier = 'company' and ev.resource = any(co.modules)
  join service.webhook_endpoints w on w.company_id = ev.company_id and w.enabled and ev.event = any(w.events)
    and w.created_at <= ev.created_at
  union all
  select ev.id, ev.company_id, ev.event, null, s.id, s.key_id, s.url, ks.secret, null, ev.commit_lsn, ev.seq
  from ev
  join service.companies co on co.id = ev.company_id and co.tier = 'company' and co.api_enabled
    and ev.resource = any(co.modules)
  join service.webhook_subscriptions s on s.company_id = ev.company_id and s.event = ev.event and s.active
    and s.created_at <= ev.created_at
  join service.api_keys k on k.id = s.key_id and k.revoked_at is null and (k.expires_at is null or k.expires_at > now())
    and k.webhooks and ev.resource = any(k.scopes)
  left join service.webhook_key_secrets ks on ks.key_id = s.key_id
), direct as (
  select count(*) <= $3 and count(*) = count(secret) as yes from targets
), ins as (
  insert into service.webhook_deliveries (event_id, company_id, event, endpoint_id, subscription_id, origin,
    next_attempt_at, lease_until, leased_by)
  select t.event_id, t.company_id, t.event, t.endpoint_id, t.subscription_id, ${originOf("t.url")},
    $2, case when direct.yes then $4 end, case when direct.yes then $5::uuid end
  from targets t, direct order by t.commit_lsn, t.seq
  on conflict do nothing
  returning id, event_id, endpoint_id, subscription_id, origin, leased_by
), last as (
  select commit_lsn, seq from ev order by commit_lsn desc, seq desc limit 1
), moved as (
  update service.webhook_fanout f set commit_lsn = last.commit_lsn, seq = last.seq from last returning 1
)
select (select count(*) from ev)::int as events, (select count(*) from ins)::int as deliveries,
  coalesce((
    select json_agg(json_build_object('id', i.id, 'event', t.event, 'endpointId', t.endpoint_id, 'subscriptionId', t.subscription_id,
      'keyId', t.key_id, 'url', t.url, 'secret', encode(t.secret, 'base64'),
      'previousSecret', encode(t.previous_secret, 'base64'), 'origin', i.origin,
      'eventCreatedAt', to_char(ev.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'payload', ev.payload)
      order by t.commit_lsn, t.seq)
    from ins i
    join targets t on t.event_id = i.event_id and t.endpoint_id is not distinct from i.endpoint_id
      and t.subscription_id is not distinct from i.subscription_id
    join ev on ev.id = i.event_id
    where i.leased_by is not null
  ), '[]')::text as direct`

type DirectRow = Omit<Claimed, "attempts" | "manual" | "secret" | "previousSecret"> & { readonly secret: string; readonly previousSecret: string | null }

export type FanoutResult = { readonly events: number; readonly deliveries: number; readonly direct: ReadonlyArray<Claimed> }

export type FanoutInput = {
  readonly now: Date
  /** Leases the new deliveries to `owner` when there are at most this many (0: never). */
  readonly directMax: number
  readonly leaseUntil: Date
  readonly owner: string
}

export const fanout = async (sql: Sql, batch: number, input: FanoutInput): Promise<FanoutResult> => {
  const [r] = await sql.unsafe<{ events: number; deliveries: number; direct: string }[]>(
    FANOUT,
    [batch, input.now, input.directMax, input.leaseUntil, input.owner],
    { prepare: true }
  )
  const direct = (JSON.parse(r!.direct) as Array<DirectRow>).map(
    (d): Claimed => ({
      ...d,
      attempts: 0,
      manual: false,
      secret: Buffer.from(d.secret, "base64"),
      previousSecret: d.previousSecret === null ? null : Buffer.from(d.previousSecret, "base64")
    })
  )
  return { events: r!.events, deliveries: r!.deliveries, direct }
}

// ---------------------------------------------------------------------------------------
// Claiming

export type Claimed = {
  readonly id: string
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
  select d.id, d.next_attempt_at, d.attempts, d.manual, d.event, d.endpoint_id, d.subscription_id, s.key_id,
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
select c.id::text, (l.id is not null) as leased, c.attempts, c.manual, c.event, c.endpoint_id::text,
  c.subscription_id::text, c.key_id::text, c.url, case when l.id is not null then c.secret end as secret,
  case when l.id is not null then c.previous_secret end as previous_secret, c.origin,
  c.event_created_at, case when l.id is not null then c.payload end as payload
from cand c left join leased l on l.id = c.id`

type ClaimRow = {
  id: string
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

export const claim = async (sql: Sql, input: ClaimInput): Promise<{ claimed: ReadonlyArray<Claimed>; scanned: number }> => {
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
export const handBack = async (sql: Sql, ids: ReadonlyArray<string>, owner: string, now: Date): Promise<number> => {
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
const clean = (s: string | null): string | null => (s === null ? null : s.replace(/\u0000/g, "\uFFFD"))

const RECORD = `
with r as (
  select * from json_to_recordset($1::text::json) as x(id uuid, before int, state text, next_at timestamptz,
    started_at timestamptz, duration_ms int, status int, error text, error_kind text, snippet text)
), upd as (
  update service.webhook_deliveries d set attempts = r.before + 1, state = r.state, next_attempt_at = r.next_at,
    lease_until = null, leased_by = null, manual = false, last_status = r.status, last_error = r.error,
    last_attempt_at = r.started_at,
    finished_at = case when r.state in ('succeeded', 'failed') then now() end
  from r where d.id = any($3::uuid[]) and d.id = r.id and d.leased_by = $2 and d.attempts = r.before
  returning d.id
)
insert into service.webhook_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind, response_snippet)
select r.id, r.before + 1, r.started_at, r.duration_ms, r.status, r.error, r.error_kind, r.snippet
from r join upd on upd.id = r.id
returning delivery_id::text`

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
  const byId = new Map<string, { reset: boolean; lead: number; peak: number; fails: number; lastError: string | null }>()
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

export type RecordResult = { readonly applied: ReadonlySet<string>; readonly switchedOff: ReadonlyArray<string>; readonly deletedSubscriptions: ReadonlyArray<string> }

export const recordOutcomes = async (sql: Sql, input: RecordInput): Promise<RecordResult> =>
  sql.begin(async (tx) => {
    const json = JSON.stringify(
      input.outcomes.map((o) => ({
        id: o.id,
        before: o.before,
        state: o.state,
        next_at: o.nextAt?.toISOString() ?? null,
        started_at: o.startedAt.toISOString(),
        duration_ms: o.durationMs,
        status: o.status,
        error: clean(o.error),
        error_kind: o.errorKind,
        snippet: clean(o.snippet)
      }))
    )
    const ids = input.outcomes.map((o) => o.id)
    const applied = new Set((await tx.unsafe<{ delivery_id: string }[]>(RECORD, [json, input.owner, ids], { prepare: true })).map((r) => r.delivery_id))
    // An outcome whose lease was lost meanwhile belongs to whoever holds it now.
    const mine = input.outcomes.filter((o) => applied.has(o.id))
    const all = tallyEndpoints(mine)
    // Successes only: set the count to 0 where it is not 0 already (no write otherwise).
    const successesOnly = (t: EndpointTally) => t.reset && t.lead === 0 && t.peak === 0 && t.fails === 0
    const resets = all.filter(successesOnly).map((t) => t.id)
    if (resets.length > 0) {
      await tx`update service.webhook_endpoints set consecutive_failures = 0 where id = any(${resets}::uuid[]) and consecutive_failures <> 0`
    }
    const tallies = all.filter((t) => !successesOnly(t))
    let switchedOff: Array<string> = []
    if (tallies.length > 0) {
      const rows = await tx.unsafe<{ subject_id: string }[]>(
        COUNTERS,
        [
          JSON.stringify(tallies.map((e) => ({ id: e.id, reset: e.reset, lead: e.lead, peak: e.peak, fails: e.fails, last_error: clean(e.lastError) }))),
          input.switchOffAfter
        ],
        { prepare: true }
      )
      switchedOff = rows.map((r) => r.subject_id)
    }
    const gone = [...new Set(mine.filter((o) => o.gone && o.subscriptionId !== null).map((o) => o.subscriptionId!))]
    let deleted: Array<string> = []
    if (gone.length > 0) {
      deleted = (await tx.unsafe<{ subject_id: string }[]>(GONE, [gone], { prepare: true })).map((r) => r.subject_id)
    }
    return { applied, switchedOff, deletedSubscriptions: deleted }
  })

// ---------------------------------------------------------------------------------------
// Retention

/**
 * Deletes deliveries (with their attempts), attempts, outbox events and tombstones of
 * deleted records older than `before`, in chunks. An event goes only once fan-out has passed
 * it and no newer delivery (a replay) still points at it: the events feed and replays cover
 * the same 30 days as the delivery log.
 */
export const purgeOld = async (sql: Sql, before: Date, chunk = 5_000): Promise<{ deliveries: number; attempts: number; events: number }> => {
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
      delete from service.webhook_attempts a using (
        select id from service.webhook_attempts where started_at < ${before} limit ${chunk}
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
          and not exists (select 1 from service.webhook_deliveries d where d.event_id = ev.id and d.created_at >= ${before})
        limit ${chunk}
      ) old where e.id = old.id returning 1`
    events += r.length
    if (r.length < chunk) break
  }
  // Tombstones of deleted records (GET /api/v1/deletions) cover the same 30 days.
  await pruneDeletions(sql, before, chunk)
  return { deliveries, attempts, events }
}
