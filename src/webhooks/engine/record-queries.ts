// Record's SQL: the engine's writes, usually one statement per batch: new delivery rows (a
// first attempt's outcome, or a delivery handed back or leased), outcomes of leased rows, the
// fan-out cursors, endpoint health (switching off) and 410 Gone. Plain async functions over the
// raw handle: nothing per row goes through Effect, which would cost delivery throughput (one
// write carries up to hundreds of rows).
import type { Sql } from "postgres"
import type { Tx } from "../../platform/db/Database.ts"
import { PARTITIONS_CHANNEL } from "../../platform/db/channels.ts"
import { originOf } from "../net/origin.ts"
import type { Outcome } from "./item.ts"
import { raiseAlerts, type AlertChange } from "../alerts/raise.ts"
import type { Pos } from "./positions.ts"

/**
 * Deliveries waiting behind finished ones of their record (claim moved them to when those were
 * due) become due now: the claim lets the next in order go.
 */
const nextInOrder = async (sql: Tx, finished: ReadonlyArray<Outcome>, now: Date): Promise<void> => {
  await sql.unsafe(
    `update service.webhook_deliveries s set next_attempt_at = $4
     from unnest($1::uuid[], $2::uuid[], $3::text[]) as f(endpoint_id, subscription_id, ordering_key)
     where coalesce(s.endpoint_id, s.subscription_id) = coalesce(f.endpoint_id, f.subscription_id)
       and s.ordering_key = f.ordering_key and s.state = 'pending' and s.next_attempt_at > $4
       and (s.lease_until is null or s.lease_until <= $4)`,
    [finished.map((o) => o.endpointId), finished.map((o) => o.subscriptionId), finished.map((o) => o.orderingKey), now],
    { prepare: true }
  )
}

/** Gives leased deliveries back unattempted (shutdown), due at once for whoever runs next. */
const handBack = async (sql: Tx, ids: ReadonlyArray<string>, owner: string, now: Date): Promise<number> => {
  if (ids.length === 0) return 0
  const rows = await sql`
    update service.webhook_deliveries set next_attempt_at = ${now}, lease_until = null, leased_by = null
    where id = any(${[...ids]}::uuid[]) and leased_by = ${owner} and state = 'pending' returning 1`
  return rows.length
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
    $10::timestamptz[], $11::timestamptz[], $12::int[], $13::text[], $14::text[], $15::timestamptz[], $16::int[], $17::text[],
    $21::text[])
    as x(id, event_id, company_id, event, endpoint_id, subscription_id, origin, state, attempts, next_at, lease_until, status,
      error, error_kind, started_at, duration_ms, snippet, ordering_key)
), ep as materialized (
  select w.id, w.url from service.webhook_endpoints w where w.id in (select r.endpoint_id from r) for key share
), sub as materialized (
  select s.id, s.url from service.webhook_subscriptions s where s.id in (select r.subscription_id from r) for key share
), ins as (
  insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, state, attempts,
    next_attempt_at, lease_until, leased_by, last_status, last_error, last_error_kind, last_attempt_at, last_duration_ms,
    last_snippet, finished_at, ordering_key)
  select r.id, r.event_id, r.company_id, r.event, r.endpoint_id, r.subscription_id,
    -- '' for a delivery handed back before its destination was looked up
    coalesce(nullif(r.origin, ''), (select ${originOf("ep.url")} from ep where ep.id = r.endpoint_id),
      (select ${originOf("sub.url")} from sub where sub.id = r.subscription_id)), r.state, r.attempts,
    r.next_at, r.lease_until, case when r.lease_until is not null then $18::uuid end, r.status, r.error, r.error_kind,
    r.started_at, r.duration_ms, r.snippet, case when r.state in ('succeeded', 'failed') then now() end, r.ordering_key
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
  /** Its record, when its destination orders by record. */
  readonly orderingKey: string | null
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
  /** Destinations failing now, as this process knows (alerts/failing.ts): a success of one is its recovery. */
  readonly failing?: ((destination: string) => boolean) | undefined
  /** Queue alert mails (SMTP_URL is set). */
  readonly alertMail?: boolean | undefined
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
  /** Destinations whose alert state this write changed: true failing, false recovered. */
  readonly alerted: ReadonlyMap<string, boolean>
}

/**
 * The changes of alert state among outcomes in completion order: a fully failed delivery of a
 * destination not failing, a success of one failing (docs/events.md#failure-alerts).
 */
export const alertChanges = (
  outcomes: ReadonlyArray<Outcome>,
  failing: (destination: string) => boolean
): Array<AlertChange> => {
  const now = new Map<string, boolean>()
  const out: Array<AlertChange> = []
  for (const o of outcomes) {
    if (o.alert === null) continue
    const dest = (o.endpointId ?? o.subscriptionId)!
    const was = now.get(dest) ?? failing(dest)
    if ((o.alert === "fail") === was) continue
    now.set(dest, o.alert === "fail")
    out.push({
      kind: o.alert === "fail" ? "webhook.failing" : "webhook.recovered",
      endpointId: o.endpointId,
      subscriptionId: o.subscriptionId,
      lastError: o.alert === "fail" ? o.error : null,
      lastAttemptAt: o.startedAt
    })
  }
  return out
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
  const failing = input.failing ?? (() => false)
  const simple =
    alertChanges(input.order, failing).length === 0 &&
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
        [
          ...rowColumns(input.rows),
          input.owner,
          cursors,
          resets,
          // null when no row has one: unnest pads the column with nulls, and nothing is sent per row.
          input.rows.some((r) => r.orderingKey !== null) ? input.rows.map((r) => r.orderingKey) : null
        ] as never,
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
    // A delivery ordered by record that finished lets the next of its record go now.
    const finished = input.leased.filter((o) => o.orderingKey !== null && o.state !== "pending" && applied.has(o.id))
    if (finished.length > 0) await nextInOrder(tx, finished, input.now)
    let handedBack = 0
    if (input.handBack.length > 0) handedBack = await handBack(tx, input.handBack, input.owner, input.now)
    // Only what was applied counts: a row another process wrote first, a lease lost meanwhile, belong to them.
    const mine = input.order.filter((o) => inserted.has(o.id) || applied.has(o.id))
    const h = simple
      ? { switchedOff: [], deletedSubscriptions: [] }
      : await health(tx, mine, input.switchOffAfter, resets)
    const alerted = simple ? new Map<string, boolean>() : await alertsOf(tx, input, mine, h.switchedOff)
    return { inserted, applied, parts, handedBack, ...h, alerted }
  }
  return simple ? run(sql) : sql.begin((tx) => run(tx))
}

/** Raises the alerts the applied outcomes and switch-offs make, in the write's transaction. */
const alertsOf = async (
  tx: Q,
  input: Pick<WriteInput, "failing" | "alertMail" | "now">,
  mine: ReadonlyArray<Outcome>,
  switchedOff: ReadonlyArray<string>
): Promise<ReadonlyMap<string, boolean>> => {
  const changes = alertChanges(mine, input.failing ?? (() => false))
  const tallies = tallyEndpoints(mine)
  for (const id of switchedOff)
    changes.push({
      kind: "webhook.switched_off",
      endpointId: id,
      subscriptionId: null,
      lastError: tallies.find((t) => t.id === id)?.lastError ?? null,
      lastAttemptAt: mine.findLast((o) => o.endpointId === id)?.startedAt ?? null,
      by: "service"
    })
  const alerted = new Map<string, boolean>()
  if (changes.length === 0) return alerted
  await raiseAlerts(tx, changes, { now: input.now, mail: input.alertMail === true })
  for (const c of changes)
    if (c.kind !== "webhook.switched_off")
      alerted.set((c.endpointId ?? c.subscriptionId)!, c.kind === "webhook.failing")
  return alerted
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
    const mine = input.outcomes.filter((o) => applied.has(o.id))
    const h = await health(tx, mine, input.switchOffAfter, [])
    await alertsOf(tx, { now: new Date(), alertMail: false }, mine, h.switchedOff)
    return { applied, ...h }
  })
