// A destination's delivery health (docs/events.md#delivery-health): its deliveries of the last
// 24 hours (by hour) and of the last 7 days (by day), each by its outcome now, and how long
// their attempts took (p50, p95). Read from the delivery log: an hour whose deliveries have
// all finished is kept once (service.webhook_health_hours, sql/070) and read from there; the
// hours still moving are read live, in one statement that groups them already. So an endpoint
// with 100,000 deliveries a week reads a few hundred rows (bench/health.ts).
import { Effect } from "effect"
import { notFound } from "../../domain/errors.ts"
import { isUuid } from "../../domain/ids.ts"
import { query, transaction } from "../../platform/db/Sql.ts"

export const OUTCOMES = ["succeeded", "retried", "failed", "waiting"] as const
/**
 * succeeded: at its first attempt; retried: it took more than one (delivered in the end, or
 * still being retried); failed: every attempt failed; waiting: not attempted yet, or held.
 */
export type Outcome = (typeof OUTCOMES)[number]

export type HealthBucket = {
  /** Where the hour or the day starts (UTC). */
  readonly start: string
  readonly counts: Readonly<Record<Outcome, number>>
  /** Attempts timed in it (those sent: not those an open circuit kept from going). */
  readonly attempts: number
  /** Attempt times in milliseconds, null when none was timed. */
  readonly p50: number | null
  readonly p95: number | null
}

export type HealthSeries = {
  readonly buckets: ReadonlyArray<HealthBucket>
  readonly total: HealthBucket
}

export type DeliveryHealth = {
  readonly at: string
  /** The last 24 hours, by the hour (the last one is the hour under way). */
  readonly day: HealthSeries
  /** The last 7 days, by the day (UTC; the last one is today). */
  readonly week: HealthSeries
}

export type Destination = { readonly endpointId: string } | { readonly subscriptionId: string }

const HOUR = 3_600_000
const DAY = 24 * HOUR
/** An hour is kept only once it ended this long ago: a delivery made in it may still be being written. */
const SETTLE_MS = 60_000

/**
 * Attempt times are counted in buckets: exact up to 10 ms, then 4% wide. A percentile read from
 * them is the top of its bucket: at most 4% above the exact value, never below it.
 */
export const BUCKET_RATIO = 1.04
const LN_RATIO = Math.log(BUCKET_RATIO)
const bucketSql = (ms: string) =>
  `case when ${ms} <= 10 then greatest(${ms}, 0) else ceil(10 * exp(ceil(ln(${ms} / 10.0::float8) / ${LN_RATIO}::float8) * ${LN_RATIO}::float8))::int end`

/**
 * A delivery's kind in the live read: 0 succeeded, 1 retried (finished), 2 failed, 3 waiting,
 * 4 retrying (failed, and waiting for its next attempt). 3 and 4 may still change.
 */
const OUTCOME_OF_KIND: ReadonlyArray<Outcome> = ["succeeded", "retried", "failed", "waiting", "retried"]

/**
 * One pass over deliveries (`filter`: a destination's made in a span of time, or some by id),
 * grouped by hour since $1 (epoch seconds of the window's start), kind (OUTCOME_OF_KIND's index)
 * and the time of the latest attempt (in the delivery's row; null when none was sent), with the
 * ids of those that took more than one attempt and of those still open (kinds 3 and 4); then
 * the earlier attempts of those that took more than one, by hour and kind (each looked up by its
 * delivery, `offset 0` keeping it so: a hash of every earlier attempt was the planner's guess for an unnest). Arithmetic in
 * float8: numeric made it many times slower.
 */
export const healthStatement = (filter: string) => `
with g as materialized (
  select h, v, ms, count(*)::int as n, array_agg(id) filter (where attempts > 1) as multi,
    array_agg(id::text) filter (where v >= 3) as open
  from (
    select d.id, d.attempts, floor((date_part('epoch', d.created_at) - $1::float8) / 3600)::int as h,
      case when d.state = 'failed' then 2 when d.state = 'held' or d.attempts = 0 then 3
        when d.state = 'pending' then 4 when d.attempts = 1 then 0 else 1 end as v,
      case when d.last_error_kind is distinct from 'circuit' then ${bucketSql("d.last_duration_ms")} end as ms
    from service.webhook_deliveries d
    where ${filter}
  ) x group by 1, 2, 3
)
select 0 as part, h, v, ms, n, open from g
union all
select 1, m.h, m.v, ${bucketSql("a.duration_ms")}, count(*)::int, null
from (select h, v, unnest(multi) as id from g where multi is not null) m
cross join lateral (
  select e.duration_ms from service.webhook_earlier_attempts e where e.delivery_id = m.id and e.error_kind is distinct from 'circuit'
  offset 0
) a
group by 2, 3, 4`

const BY_DESTINATION = (column: string) =>
  `d.${column} = $2 and d.created_at >= $3::timestamptz and d.created_at < $4::timestamptz`
const BY_ID = "d.id = any($2::uuid[])"

export type HealthRow = {
  readonly part: 0 | 1
  /** Hours since the window's start. */
  readonly h: number
  /** The delivery's kind (OUTCOME_OF_KIND's index). */
  readonly v: number
  /** An attempt's time (its bucket's top), or null: part 0's deliveries not attempted (or not sent). */
  readonly ms: number | null
  readonly n: number
  /** part 0: the ids of the deliveries still open, or null. */
  readonly open: ReadonlyArray<string> | null
}

/** An hour: counts by outcome, the attempts' times (bucket's top → how many), and its deliveries still open. */
export type Hour = {
  readonly counts: Record<Outcome, number>
  readonly times: Map<number, number>
  readonly open: Array<string>
}

const emptyCounts = (): Record<Outcome, number> => ({ succeeded: 0, retried: 0, failed: 0, waiting: 0 })
const emptyHour = (): Hour => ({ counts: emptyCounts(), times: new Map(), open: [] })

/**
 * Adds a live read's rows to hours (by hour since the window's start): `all` takes every
 * delivery, `settled` only the finished ones (what an hour keeps), noting the open ones' ids. Pure.
 */
export const addRows = (hours: Map<number, Hour>, rows: ReadonlyArray<HealthRow>, only: "all" | "settled"): void => {
  for (const r of rows) {
    const hour = hours.get(r.h) ?? emptyHour()
    hours.set(r.h, hour)
    const open = r.v >= 3
    if (r.part === 0 && r.open !== null) hour.open.push(...r.open)
    if (open && only === "settled") continue
    if (r.part === 0) hour.counts[OUTCOME_OF_KIND[r.v]!] += r.n
    if (r.ms !== null) hour.times.set(r.ms, (hour.times.get(r.ms) ?? 0) + r.n)
  }
}

/** The value under which a share `p` of the histogram's counts lie (nearest rank; its bucket's top). Pure. */
export const percentileOf = (histogram: ReadonlyMap<number, number>, p: number): number | null => {
  const values = [...histogram.entries()].sort((a, b) => a[0] - b[0])
  const total = values.reduce((s, [, n]) => s + n, 0)
  if (total === 0) return null
  const rank = Math.max(1, Math.ceil(p * total))
  let seen = 0
  for (const [value, n] of values) {
    seen += n
    if (seen >= rank) return value
  }
  return values[values.length - 1]![0]
}

const bucketOf = (
  start: number,
  counts: Record<Outcome, number>,
  times: ReadonlyMap<number, number>
): HealthBucket => ({
  start: new Date(start).toISOString(),
  counts,
  attempts: [...times.values()].reduce((s, n) => s + n, 0),
  p50: percentileOf(times, 0.5),
  p95: percentileOf(times, 0.95)
})

/** Where the 7 days start: midnight UTC six days before `now`'s day. Pure. */
export const windowStart = (now: Date): Date => new Date(Math.floor(now.getTime() / DAY) * DAY - 6 * DAY)

/**
 * The two series from the hours since `from` (windowStart(now)): the last 24 hours (this hour
 * and the 23 before it) and the last 7 days (today and the 6 before it). Pure.
 */
export const healthOf = (hours: ReadonlyMap<number, Hour>, from: Date, now: Date): DeliveryHealth => {
  const series = (firstHour: number, hoursEach: number, n: number): HealthSeries => {
    const buckets: Array<HealthBucket> = []
    const allCounts = emptyCounts()
    const allTimes = new Map<number, number>()
    for (let i = 0; i < n; i++) {
      const counts = emptyCounts()
      const times = new Map<number, number>()
      for (let h = firstHour + i * hoursEach; h < firstHour + (i + 1) * hoursEach; h++) {
        const hour = hours.get(h)
        if (hour === undefined) continue
        for (const o of OUTCOMES) counts[o] += hour.counts[o]
        for (const [v, k] of hour.times) times.set(v, (times.get(v) ?? 0) + k)
      }
      for (const o of OUTCOMES) allCounts[o] += counts[o]
      for (const [v, k] of times) allTimes.set(v, (allTimes.get(v) ?? 0) + k)
      buckets.push(bucketOf(from.getTime() + (firstHour + i * hoursEach) * HOUR, counts, times))
    }
    return { buckets, total: bucketOf(from.getTime() + firstHour * HOUR, allCounts, allTimes) }
  }
  const thisHour = Math.floor((now.getTime() - from.getTime()) / HOUR)
  return { at: now.toISOString(), day: series(thisHour - 23, 1, 24), week: series(0, 24, 7) }
}

type KeptRow = {
  hour: Date
  succeeded: number
  retried: number
  failed: number
  times: ReadonlyArray<number>
  open: ReadonlyArray<string>
}

const keptHour = (r: KeptRow): Hour => {
  const times = new Map<number, number>()
  for (let i = 0; i + 1 < r.times.length; i += 2) times.set(r.times[i]!, r.times[i + 1]!)
  return {
    counts: { succeeded: r.succeeded, retried: r.retried, failed: r.failed, waiting: 0 },
    times,
    open: [...r.open]
  }
}

const merged = (a: Hour, b: Hour): Hour => {
  const times = new Map(a.times)
  for (const [v, n] of b.times) times.set(v, (times.get(v) ?? 0) + n)
  const counts = emptyCounts()
  for (const o of OUTCOMES) counts[o] = a.counts[o] + b.counts[o]
  return { counts, times, open: b.open }
}

const hoursOfRows = (rows: ReadonlyArray<HealthRow>, only: "all" | "settled") => {
  const hours = new Map<number, Hour>()
  addRows(hours, rows, only)
  return hours
}

/** Keeps past hours: their finished deliveries, and the ids of those still open; drops those before `from`. */
const keep = (destinationId: string, from: Date, hours: ReadonlyArray<Hour & { readonly hour: string }>) => {
  const rows = hours.map((k) => ({
    hour: k.hour,
    succeeded: k.counts.succeeded,
    retried: k.counts.retried,
    failed: k.counts.failed,
    times: [...k.times.entries()].flat(),
    open: k.open
  }))
  return query(
    (sql) => sql`
    with gone as (delete from service.webhook_health_hours where destination_id = ${destinationId} and hour < ${from})
    insert into service.webhook_health_hours (destination_id, hour, succeeded, retried, failed, times, open)
    select ${destinationId}::uuid, r.hour, r.succeeded, r.retried, r.failed,
      array(select jsonb_array_elements_text(r.times)::int), array(select jsonb_array_elements_text(r.open)::uuid)
    from jsonb_to_recordset(${JSON.stringify(rows)}::text::jsonb)
      as r(hour timestamptz, succeeded int, retried int, failed int, times jsonb, open jsonb)
    on conflict (destination_id, hour) do update set succeeded = excluded.succeeded, retried = excluded.retried,
      failed = excluded.failed, times = excluded.times, open = excluded.open, computed_at = now()`
  )
}

/** Runs of consecutive hours, as [first, last + 1). Pure. */
const runsOf = (hours: ReadonlyArray<number>): Array<readonly [number, number]> => {
  const runs: Array<[number, number]> = []
  for (const h of hours) {
    const last = runs[runs.length - 1]
    if (last !== undefined && last[1] === h) last[1] = h + 1
    else runs.push([h, h + 1])
  }
  return runs
}

/**
 * The health of one endpoint or subscription, as of the database's clock. The caller checks
 * whose it is. Under the destination's lock (sql/070): what it found finished is kept only if
 * no Send Again or replay changed it meanwhile.
 */
export const deliveryHealth = Effect.fn("deliveryHealth")(function* (destination: Destination) {
  const [column, given] =
    "endpointId" in destination
      ? (["endpoint_id", destination.endpointId] as const)
      : (["subscription_id", destination.subscriptionId] as const)
  if (!isUuid(given)) return yield* notFound("no such destination")
  const id = given.toLowerCase()
  return yield* transaction(
    Effect.gen(function* () {
      // The lock, the clock and the kept hours in one statement: the lateral read runs once the lock is held.
      const keptRows = yield* query(
        (sql) => sql<Array<{ now: Date } & ({ hour: null } | KeptRow)>>`
        select now() as now, k.* from (select pg_advisory_xact_lock(hashtextextended(${`webhook_health:${id}`}, 0))) l
        left join lateral (
          select hour, succeeded, retried, failed, times, open::text[] as open from service.webhook_health_hours
          where destination_id = ${id}
            and hour >= date_bin('1 day', now(), timestamptz '1970-01-01 00:00:00+00') - interval '6 days'
        ) k on true`
      )
      const now = keptRows[0]!.now
      const from = windowStart(now)
      const epoch = from.getTime() / 1000
      const at = (h: number) => new Date(from.getTime() + h * HOUR).toISOString()
      const thisHour = Math.floor((now.getTime() - from.getTime()) / HOUR)
      const kept = new Map<number, Hour>()
      for (const r of keptRows)
        if (r.hour !== null) kept.set(Math.round((r.hour.getTime() - from.getTime()) / HOUR), keptHour(r))
      // Hours not kept (the one under way, and any a Send Again changed) are read whole; of the
      // kept ones, only the deliveries that were still open.
      const missing: Array<number> = []
      for (let h = 0; h <= thisHour; h++) if (!kept.has(h)) missing.push(h)
      const wholeRows: Array<HealthRow> = []
      for (const [a, b] of runsOf(missing))
        wholeRows.push(
          ...(yield* query((sql) =>
            sql.unsafe<HealthRow[]>(healthStatement(BY_DESTINATION(column)), [epoch, id, at(a), at(b)])
          ))
        )
      const openIds = [...kept.values()].flatMap((k) => k.open)
      const openRows =
        openIds.length === 0
          ? []
          : yield* query((sql) => sql.unsafe<HealthRow[]>(healthStatement(BY_ID), [epoch, openIds]))
      const [whole, wholeSettled, reopened, reopenedSettled] = [
        hoursOfRows(wholeRows, "all"),
        hoursOfRows(wholeRows, "settled"),
        hoursOfRows(openRows, "all"),
        hoursOfRows(openRows, "settled")
      ]
      // What each hour shows, and what each past hour keeps: its finished deliveries and the ids still open.
      const hours = new Map<number, Hour>()
      const toKeep: Array<{ h: number; hour: Hour }> = []
      const settled = Math.floor((now.getTime() - SETTLE_MS - from.getTime()) / HOUR)
      for (let h = 0; h <= thisHour; h++) {
        const k = kept.get(h)
        if (k === undefined) {
          hours.set(h, whole.get(h) ?? emptyHour())
          if (h < settled) toKeep.push({ h, hour: wholeSettled.get(h) ?? emptyHour() })
          continue
        }
        const live = reopened.get(h) ?? emptyHour()
        hours.set(h, merged(k, live))
        // Some of its open deliveries finished since: kept with them.
        if (live.open.length < k.open.length)
          toKeep.push({ h, hour: merged(k, reopenedSettled.get(h) ?? { ...emptyHour(), open: live.open }) })
      }
      // Hours that left the window go when new ones are kept (at least once an hour while the chart is read).
      if (toKeep.length > 0)
        yield* keep(
          id,
          from,
          toKeep.map(({ h, hour }) => ({ hour: at(h), ...hour }))
        )
      return healthOf(hours, from, now)
    })
  )
})
