// What the operators' status and the metrics read about webhook delivery: the outbox's
// backlog not yet fanned out, deliveries by state, endpoints switched off and why. Read from
// the database, so any process (or the admin CLI) can show it.
import { Effect } from "effect"
import { toIsoUtcOrNull } from "../domain/time.ts"
import { query } from "../platform/db/Sql.ts"
import { OUTBOX_BACKLOG } from "./engine/fanout-queries.ts"

export interface OutboxBacklog {
  /** Events not yet fanned out into deliveries. */
  readonly backlog: number
  readonly oldestBacklogAt: string | null
  readonly newestEventAt: string | null
}

export const outboxBacklog = query(
  (sql) => sql<{ backlog: number; oldest: Date | null; newest: Date | null }[]>`
  with waiting as (${sql.unsafe(OUTBOX_BACKLOG)})
  select (select count(*)::int from waiting) as backlog, (select min(created_at) from waiting) as oldest,
    (select max(created_at) from service.events) as newest`
).pipe(
  Effect.map(
    ([r]): OutboxBacklog => ({
      backlog: r!.backlog,
      oldestBacklogAt: toIsoUtcOrNull(r!.oldest),
      newestEventAt: toIsoUtcOrNull(r!.newest)
    })
  )
)

/** The backlog counted up to `cap` (the metrics' gauge: a scrape stays cheap however far behind). */
export const outboxBacklogUpTo = (cap: number) =>
  query(
    (sql) => sql<{ n: number }[]>`
    select count(*)::int as n from (${sql.unsafe(OUTBOX_BACKLOG)} limit ${cap}) x`
  ).pipe(Effect.map(([r]) => r!.n))

export interface DeliveryCounts {
  /** Pending and due now (not being attempted). */
  readonly due: number
  /** Pending and due later (retries waiting for their time). */
  readonly scheduled: number
  /** Being attempted now (leased). */
  readonly inFlight: number
  /** Pending after at least one failed attempt. */
  readonly failing: number
  /** Resting because their destination is off. */
  readonly held: number
  /** Finished without success, in the last 24 hours. */
  readonly failedLast24h: number
  readonly oldestDueAt: string | null
}

export const deliveryCounts = query(
  (sql) => sql<
    {
      due: number
      scheduled: number
      in_flight: number
      failing: number
      held: number
      failed: number
      oldest_due: Date | null
    }[]
  >`
  select
    count(*) filter (where state = 'pending' and next_attempt_at <= now() and not leased)::int as due,
    count(*) filter (where state = 'pending' and next_attempt_at > now() and not leased)::int as scheduled,
    count(*) filter (where state = 'pending' and leased)::int as in_flight,
    count(*) filter (where state = 'pending' and attempts > 0)::int as failing,
    count(*) filter (where state = 'held')::int as held,
    count(*) filter (where state = 'failed' and finished_at > now() - interval '24 hours')::int as failed,
    min(next_attempt_at) filter (where state = 'pending' and next_attempt_at <= now() and not leased) as oldest_due
  from (select state, attempts, next_attempt_at, finished_at, (leased_by is not null and lease_until > now()) as leased
        from service.webhook_deliveries where state <> 'succeeded') x`
).pipe(
  Effect.map(
    ([d]): DeliveryCounts => ({
      due: d!.due,
      scheduled: d!.scheduled,
      inFlight: d!.in_flight,
      failing: d!.failing,
      held: d!.held,
      failedLast24h: d!.failed,
      oldestDueAt: toIsoUtcOrNull(d!.oldest_due)
    })
  )
)

export interface SwitchedOffEndpoint {
  readonly id: string
  readonly companyId: string
  readonly name: string
  readonly url: string
  readonly disabledAt: string | null
  readonly reason: string | null
  /** Deliveries waiting for it to be turned on. */
  readonly held: number
}

/** Endpoints switched off, the latest first, with why and what waits for them. */
export const endpointsSwitchedOff = query(
  (sql) => sql<
    {
      id: string
      company_id: string
      name: string
      url: string
      disabled_at: Date | null
      disabled_reason: string | null
      held: number
    }[]
  >`
  select w.id::text, w.company_id::text, w.name, w.url, w.disabled_at, w.disabled_reason,
    (select count(*)::int from service.webhook_deliveries d where d.endpoint_id = w.id and d.state = 'held') as held
  from service.webhook_endpoints w where not w.enabled order by w.disabled_at desc nulls last, w.id`
).pipe(
  Effect.map((rows) =>
    rows.map(
      (w): SwitchedOffEndpoint => ({
        id: w.id,
        companyId: w.company_id,
        name: w.name,
        url: w.url,
        disabledAt: toIsoUtcOrNull(w.disabled_at),
        reason: w.disabled_reason,
        held: w.held
      })
    )
  )
)

/**
 * The metrics' view of delivery, the same in every process: the oldest pending delivery's age
 * in seconds (0 when none; the due index holds only pending rows), the endpoints off now, and
 * the destinations whose circuit is open or half open.
 */
export const deliveryGauges = query(
  (sql) => sql<{ oldest: number | null; off: number; open: number; half_open: number }[]>`
  select
    (select extract(epoch from now() - min(created_at))::float8 from service.webhook_deliveries where state = 'pending') as oldest,
    (select count(*)::int from service.webhook_endpoints where not enabled) as off,
    (select count(*)::int from service.webhook_circuits where state = 'open') as open,
    (select count(*)::int from service.webhook_circuits where state = 'half_open') as half_open`
).pipe(
  Effect.map(([r]) => ({
    oldestPendingSeconds: Math.max(0, r!.oldest ?? 0),
    endpointsOff: r!.off,
    circuits: { open: r!.open, halfOpen: r!.half_open }
  }))
)
