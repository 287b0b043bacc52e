// The replay lane: hands running replays' deliveries to the engine a few at a time, so a
// replay of thousands of events never stands between a receiver and its live deliveries.
//
// Per destination (endpoint or subscription) one replay goes at a time, oldest first, at
// REPLAY_RATE deliveries per second, and with at most one second's worth handed over and not
// yet attempted: behind a slow receiver the replay slows down to its pace instead of piling
// up due rows. So at any moment a live delivery has at most that many replayed ones ahead of
// it, wherever it waits (the due index, the engine's queue per receiver). The engine needs
// to know nothing of replays: a handed-over delivery is an ordinary pending row.
//
// State lives in the database (the replay's row: pacing clock, counters, the next item), and
// each step locks the replay's row (skip locked), so every delivery process can run a lane:
// together they keep the one rate.
import { Cause, Context, Effect, Layer, Queue } from "effect"
import { ReplayRateConfig } from "../../platform/config.ts"
import { query, Sql, transaction } from "../../platform/db/Sql.ts"
import type { Tx } from "../../platform/db/Database.ts"
import { StartRefused } from "../../platform/db/refusal.ts"
import { DESTINATIONS_CHANNEL, listenScoped } from "../../platform/db/channels.ts"
import { currentSupervisor } from "../../platform/supervisor.ts"
import { originOf } from "../net/origin.ts"
import { REPLAYS_CHANNEL } from "./jobs.ts"
import { wakeDelivery } from "../engine/wake.ts"

/** REPLAY_RATE's default: deliveries per second per destination. */
export const DEFAULT_REPLAY_RATE = 10
export const MAX_REPLAY_RATE = 1_000

/** REPLAY_RATE: a positive number of deliveries per second (decimals allowed, e.g. 0.5), at most 1000. */
export const parseReplayRate = (
  text: string
): { readonly ok: true; readonly rate: number } | { readonly ok: false; readonly error: string } => {
  const t = text.trim()
  const n = /^\d+(\.\d+)?$/.test(t) ? Number(t) : Number.NaN
  if (!Number.isFinite(n) || n <= 0 || n > MAX_REPLAY_RATE) {
    return {
      ok: false,
      error: `REPLAY_RATE must be deliveries per second per destination, more than 0 and at most ${MAX_REPLAY_RATE} (e.g. 10 or 0.5), not "${text}"`
    }
  }
  return { ok: true, rate: n }
}

/** This process's REPLAY_RATE (the lane's pace; a dry run's estimate). */
export const ReplayRate = Context.Reference<number>("service/ReplayRate", { defaultValue: () => DEFAULT_REPLAY_RATE })

/** REPLAY_RATE from the environment; a bad value refuses to start. */
export const loadReplayRate = Effect.gen(function* () {
  const r = parseReplayRate(yield* ReplayRateConfig)
  if (!r.ok) return yield* Effect.fail(new StartRefused({ message: r.error }))
  return r.rate
})

export const ReplayRateLive = Layer.effect(ReplayRate, loadReplayRate)

/** At most this many handed over and not attempted yet: one second's worth. */
export const replayWindow = (rate: number) => Math.max(1, Math.ceil(rate))

/**
 * How many items a replay may hand over now, and its pacing clock after that. The clock
 * advances 1/rate per item; it never lags more than a second (or one item) behind now, so a
 * replay that waited (destination off, a slow receiver) resumes at its rate, not with a burst.
 */
export const allowance = (input: {
  readonly nowMs: number
  readonly pacedAtMs: number | null
  readonly rate: number
  /** Handed over and not attempted yet. */
  readonly inEngine: number
  /** Items not handed over yet. */
  readonly left: number
}): { readonly n: number; readonly pacedAtMs: number } => {
  // A second's worth, or one item when that is less than one (REPLAY_RATE below 1).
  const burstMs = Math.max(1_000, 1_000 / input.rate)
  const base = Math.max(input.pacedAtMs ?? input.nowMs - burstMs, input.nowMs - burstMs)
  const tokens = Math.floor(((input.nowMs - base) / 1_000) * input.rate + 1e-9)
  const n = Math.max(0, Math.min(tokens, replayWindow(input.rate) - input.inEngine, input.left))
  return { n, pacedAtMs: n > 0 ? base + (n * 1_000) / input.rate : (input.pacedAtMs ?? base) }
}

export type FinishedReplay = {
  readonly id: string
  readonly companyId: string
  readonly destination: { readonly kind: "endpoint" | "subscription"; readonly id: string }
  readonly queued: number
  readonly sent: number
  readonly skipped: number
  readonly ms: number
}

export type PaceResult = {
  /** Replays that may send (destination on) or have deliveries in the engine: tick again soon. */
  readonly active: number
  /** Deliveries handed to the engine in this step. */
  readonly released: number
  readonly finished: ReadonlyArray<FinishedReplay>
}

type Locked = {
  id: string
  company_id: string
  endpoint_id: string | null
  subscription_id: string | null
  failed_only: boolean
  total: number
  next_seq: number
  released: number
  paced_at: Date | null
  created_at: Date
  on: boolean
  origin: string | null
  now: Date
}

/** The oldest running replay of each destination (the others wait their turn). */
const CANDIDATES = `
  select r.id::text from service.webhook_replays r
  where r.state = 'running' and not exists (
    select 1 from service.webhook_replays o
    where o.state = 'running' and (o.created_at, o.id) < (r.created_at, r.id)
      and (o.endpoint_id = r.endpoint_id or o.subscription_id = r.subscription_id))
  order by r.created_at, r.id
  limit 100`

type Stepped = { readonly handed: number; readonly active: boolean; readonly finished: FinishedReplay | null }

/** One step of every replay whose turn it is: count what the engine attempted, hand over more, finish. */
export const paceReplays = Effect.fn("paceReplays")(function* (rate: number) {
  const candidates = yield* query((sql) => sql.unsafe<{ id: string }[]>(CANDIDATES))
  let active = 0
  let released = 0
  const finished: Array<FinishedReplay> = []
  for (const { id } of candidates) {
    // One transaction per replay, its row locked; the step inside stays on the handle: its
    // batched statements are the handing over the REPLAY_RATE pacing test measures.
    const r = yield* transaction(
      Effect.tap(
        query((tx) => stepReplay(tx, id, rate)),
        (r) => (r !== null && r.handed > 0 ? wakeDelivery : Effect.void)
      )
    )
    if (r === null) continue
    released += r.handed
    if (r.active) active++
    if (r.finished) finished.push(r.finished)
  }
  return { active, released, finished } satisfies PaceResult
})

/** One replay's step, in the caller's transaction; null when another lane has it or it ended. */
const stepReplay = async (tx: Tx, id: string, rate: number): Promise<Stepped | null> => {
  const [row] = await tx.unsafe<Locked[]>(
    `select r.id::text, r.company_id::text, r.endpoint_id::text, r.subscription_id::text, r.failed_only, r.total, r.next_seq,
       r.released, r.paced_at, r.created_at, coalesce(w.enabled, s.active, false) as on,
       ${originOf("coalesce(w.url, s.url)")} as origin, now() as now
     from service.webhook_replays r
     left join service.webhook_endpoints w on w.id = r.endpoint_id
     left join service.webhook_subscriptions s on s.id = r.subscription_id
     where r.id = $1 and r.state = 'running'
     for update of r skip locked`,
    [id]
  )
  if (!row) return null // another process's lane has it now, or it ended
  // What the engine attempted since (its attempt count moved), or deleted, is done.
  const [settled] = await tx<{ sent: number; skipped: number }[]>`
    with s as (
      select i.seq, case when d.id is null then 'skipped' when d.attempts > i.attempts_before then 'sent' end as outcome
      from service.webhook_replay_items i left join service.webhook_deliveries d on d.id = i.delivery_id
      where i.replay_id = ${id} and i.state = 'released'
    ), u as (
      update service.webhook_replay_items i set state = s.outcome from s
      where i.replay_id = ${id} and i.seq = s.seq and s.outcome is not null
      returning s.outcome
    )
    select count(*) filter (where outcome = 'sent')::int as sent, count(*) filter (where outcome = 'skipped')::int as skipped from u`
  const inEngine = row.released - settled!.sent - settled!.skipped
  const left = row.total - row.next_seq + 1
  let handed = 0
  let skipped = settled!.skipped
  let pacedAt = row.paced_at
  // A destination that is off gets nothing more (its deliveries would only be held).
  if (row.on && left > 0) {
    const a = allowance({ nowMs: row.now.getTime(), pacedAtMs: row.paced_at?.getTime() ?? null, rate, inEngine, left })
    if (a.n > 0) {
      const step = await release(tx, row, a.n)
      handed = step.released
      skipped += step.skipped
      pacedAt = new Date(a.pacedAtMs)
    }
  }
  const nowInEngine = inEngine + handed
  const done = row.next_seq + (handed + (skipped - settled!.skipped)) > row.total && nowInEngine === 0
  const [after] = await tx<{ total: number; sent: number; skipped: number; ms: number }[]>`
    update service.webhook_replays set
      next_seq = next_seq + ${handed + skipped - settled!.skipped}, released = ${nowInEngine},
      sent = sent + ${settled!.sent}, skipped = skipped + ${skipped}, paced_at = ${pacedAt},
      state = case when ${done} then 'finished' else state end,
      finished_at = case when ${done} then now() else finished_at end
    where id = ${id}
    returning total, sent, skipped, (extract(epoch from now() - created_at) * 1000)::float8 as ms`
  if (done) await tx`delete from service.webhook_replay_items where replay_id = ${id}`
  return {
    handed,
    active: !done && (row.on || nowInEngine > 0),
    finished: done
      ? {
          id,
          companyId: row.company_id,
          destination:
            row.endpoint_id !== null
              ? { kind: "endpoint" as const, id: row.endpoint_id }
              : { kind: "subscription" as const, id: row.subscription_id! },
          queued: after!.total,
          sent: after!.sent,
          skipped: after!.skipped,
          ms: Math.round(after!.ms)
        }
      : null
  }
}

/**
 * Hands the next `n` items to the engine: an existing delivery is reset to pending, due now,
 * with what it was kept for a cancel; an event without one gets a new delivery. An item whose
 * delivery is being attempted right now, or (failed only) was delivered meanwhile, or whose
 * event is gone, is skipped.
 */
const release = async (tx: Tx, row: Locked, n: number): Promise<{ released: number; skipped: number }> => {
  const first = row.next_seq
  const items = await tx<{ seq: number; event_id: string; delivery_id: string | null }[]>`
    select seq, event_id::text, delivery_id::text from service.webhook_replay_items
    where replay_id = ${row.id} and seq >= ${first} and seq < ${first + n} and state = 'queued' order by seq`
  const column = row.endpoint_id !== null ? tx`endpoint_id` : tx`subscription_id`
  const destination = row.endpoint_id ?? row.subscription_id!
  // An event planned without a delivery may have one by now (another replay made it).
  const fresh = items.filter((i) => i.delivery_id === null)
  if (fresh.length > 0) {
    const found = await tx<{ id: string; event_id: string }[]>`
      select id::text, event_id::text from service.webhook_deliveries
      where event_id = any(${fresh.map((i) => i.event_id)}::uuid[]) and ${column} = ${destination}`
    const byEvent = new Map(found.map((f) => [f.event_id, f.id]))
    for (const i of fresh) i.delivery_id = byEvent.get(i.event_id) ?? null
  }
  const existing = items.filter((i) => i.delivery_id !== null)
  let released = 0
  if (existing.length > 0) {
    // Due now, a microsecond apart in event order; what the row was goes to the item.
    const rows = await tx`
      with x as (
        select * from unnest(${existing.map((i) => i.delivery_id!)}::uuid[], ${existing.map((i) => i.seq)}::int[]) as x(id, seq)
      ), old as materialized (
        select d.id, x.seq, d.state, d.next_attempt_at, d.manual, d.held_reason, d.finished_at, d.attempts
        from service.webhook_deliveries d join x on x.id = d.id
        where (d.leased_by is null or d.lease_until <= now()) and (${!row.failed_only} or d.state <> 'succeeded')
        for update of d
      ), upd as (
        update service.webhook_deliveries d set state = 'pending', next_attempt_at = now() + (old.seq - ${first}) * interval '1 microsecond',
          manual = false, held_reason = null, finished_at = null, leased_by = null, lease_until = null
        from old where d.id = old.id
        returning d.id
      )
      update service.webhook_replay_items i set state = 'released', delivery_id = old.id, attempts_before = old.attempts,
        prior_state = old.state, prior_next_attempt_at = old.next_attempt_at, prior_manual = old.manual,
        prior_held_reason = old.held_reason, prior_finished_at = old.finished_at
      from old where i.replay_id = ${row.id} and i.seq = old.seq and exists (select 1 from upd where upd.id = old.id)
      returning i.seq`
    released += rows.length
  }
  const toMake = items.filter((i) => i.delivery_id === null)
  if (toMake.length > 0 && row.origin !== null) {
    // The id fan-out would have given it (a function of event and destination), and the
    // destination locked for key share first: deliveries have no foreign keys, so one deleted
    // meanwhile gets no rows (sql/020_delivery_once.sql).
    const table = row.endpoint_id !== null ? tx`service.webhook_endpoints` : tx`service.webhook_subscriptions`
    const [there] = await tx<
      { ordering: string }[]
    >`select ordering from ${table} where id = ${destination} for key share`
    // A destination that orders by record gets the record key on what the replay makes (sql/024).
    const made = !there
      ? []
      : await tx<{ seq: number }[]>`
      with ins as (
        insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, next_attempt_at,
          ordering_key)
        select service.webhook_delivery_id(e.id, ${row.endpoint_id}::uuid, ${row.subscription_id}::uuid), e.id, e.company_id, e.event,
          ${row.endpoint_id}::uuid, ${row.subscription_id}::uuid, ${row.origin},
          now() + (x.seq - ${first}) * interval '1 microsecond',
          case when ${there.ordering} = 'record' then e.resource || ':' || e.record_id end
        from unnest(${toMake.map((i) => i.event_id)}::uuid[], ${toMake.map((i) => i.seq)}::int[]) as x(event_id, seq)
        join service.events e on e.id = x.event_id
        on conflict do nothing
        returning id, event_id
      )
      update service.webhook_replay_items i set state = 'released', made = true, delivery_id = ins.id, attempts_before = 0
      from ins where i.replay_id = ${row.id} and i.event_id = ins.event_id and i.seq >= ${first} and i.seq < ${first + n}
      returning i.seq`
    released += made.length
  }
  // Whatever of these is still queued could not go: skipped.
  const skipped = await tx`
    update service.webhook_replay_items set state = 'skipped'
    where replay_id = ${row.id} and seq >= ${first} and seq < ${first + n} and state = 'queued'
    returning seq`
  return { released, skipped: skipped.length }
}

/** Finished and cancelled replays are kept this long (as the delivery log). */
const KEEP_MS = 30 * 86_400_000

export type ReplayLaneOptions = {
  /** REPLAY_RATE: deliveries per second per destination. */
  readonly rate: number
  /** With no replay to send: how often to look anyway (a notification wakes it at once). */
  readonly pollMs?: number | undefined
}

/** Runs the lane under the supervisor (or in the current scope) until it stops, on the database of `Sql`. */
export const makeReplayLane = (options: ReplayLaneOptions) =>
  Effect.gen(function* () {
    const { rate } = options
    const sql = yield* Sql
    const pollMs = options.pollMs ?? 5_000
    // Often enough that a step hands over a few deliveries at most.
    const tickMs = Math.min(250, Math.max(20, Math.round(1_000 / rate)))
    const wakeQ = yield* Queue.sliding<void>(1)
    const poke = () => void Queue.offerUnsafe(wakeQ, undefined)
    const wait = (ms: number) => Queue.take(wakeQ).pipe(Effect.timeoutOption(ms), Effect.asVoid)
    const supervisor = yield* currentSupervisor
    yield* supervisor.hold(
      listenScoped(sql.pool, "replay lane: ", [
        [REPLAYS_CHANNEL, poke],
        // A destination turned on again: its replay resumes at once.
        [DESTINATIONS_CHANNEL, poke]
      ])
    )
    let lastPurge = 0
    const step = Effect.gen(function* () {
      const r = yield* paceReplays(rate)
      for (const f of r.finished) {
        // One line per replay's end, to grep for (its start is `replay started`).
        yield* Effect.logInfo("replay finished", {
          replayId: f.id,
          companyId: f.companyId,
          destination: f.destination,
          queued: f.queued,
          sent: f.sent,
          skipped: f.skipped,
          ms: f.ms
        })
      }
      if (Date.now() - lastPurge > 3_600_000) {
        lastPurge = Date.now()
        yield* query(
          (db) =>
            db`delete from service.webhook_replays where state <> 'running' and finished_at < now() - ${KEEP_MS / 1000} * interval '1 second'`
        )
      }
      return r.active > 0
    }).pipe(
      Effect.provideService(Sql, sql),
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.logWarning("replay lane step failed; retrying in 1 s", Cause.pretty(cause)).pipe(
              Effect.andThen(Effect.sleep(1_000)),
              Effect.as(false)
            )
      )
    )
    const loop = Effect.forever(
      Effect.gen(function* () {
        const busy = yield* step
        yield* wait(busy ? tickMs : pollMs)
      })
    )
    yield* supervisor.run("replay lane", loop)
    return { wake: Effect.sync(poke) }
  })

/** The lane over the Database at this process's REPLAY_RATE; runs beside the delivery engine (webhooks/background.ts). */
export const ReplayLaneLive = Layer.effectDiscard(Effect.flatMap(ReplayRate, (rate) => makeReplayLane({ rate }))).pipe(
  Layer.provide(Sql.layer)
)
