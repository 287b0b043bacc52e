// The operator's overview (`npm run admin -- status`): capture, the outbox backlog,
// deliveries due and failing, endpoints switched off and why, keys near expiry. Read from
// the database only, so it works from any process while the service runs (or not).
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { Effect } from "effect"
import { query, Sql } from "../../platform/db/Sql.ts"
import { captureStatus, type CaptureStatus } from "../../pipeline/capture/status.ts"
import { leaderInfo, type LeaderInfo } from "../../pipeline/capture/leader.ts"
import { runningReplays, type ReplayView } from "../../webhooks/replay/jobs.ts"
import { OUTBOX_BACKLOG } from "../../webhooks/engine/fanout-queries.ts"
import { quarantineSummary, type QuarantineSummary } from "../../pipeline/capture/quarantine.ts"

export const KEY_EXPIRY_WARNING_DAYS = 14

export interface OperationsStatus {
  readonly at: string
  readonly capture: CaptureStatus & {
    /** A capture process holds the leader lock (one per database). */
    readonly leaderRunning: boolean
    /** The session holding it (the others wait as standbys), or null. */
    readonly leader: LeaderInfo | null
    /** Records held in quarantine, and app tables whose contract is broken (docs/operations.md). */
    readonly quarantine: QuarantineSummary
  }
  readonly outbox: {
    /** Events not yet fanned out into deliveries. */
    readonly backlog: number
    readonly oldestBacklogAt: string | null
    readonly newestEventAt: string | null
  }
  readonly deliveries: {
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
  readonly endpointsSwitchedOff: ReadonlyArray<{
    readonly id: string
    readonly companyId: string
    readonly name: string
    readonly url: string
    readonly disabledAt: string | null
    readonly reason: string | null
    /** Deliveries waiting for it to be turned on. */
    readonly held: number
  }>
  /** Replays being sent now, oldest first, with their progress. */
  readonly replays: ReadonlyArray<ReplayView>
  readonly keysNearExpiry: ReadonlyArray<{
    readonly id: string
    readonly companyId: string
    readonly name: string
    readonly expiresAt: string
    readonly webhooks: boolean
    readonly subscriptions: number
  }>
}

export const operationsStatus = Effect.fn("operationsStatus")(function* (slot: string) {
  const [capture, leader, [outbox], [d], off, keys, [now], replays, quarantine] = yield* Effect.all(
    [
      captureStatus(slot),
      leaderInfo,
      query(
        (sql) => sql<{ backlog: number; oldest: Date | null; newest: Date | null }[]>`
      with waiting as (${sql.unsafe(OUTBOX_BACKLOG)})
      select (select count(*)::int from waiting) as backlog, (select min(created_at) from waiting) as oldest,
        (select max(created_at) from service.events) as newest`
      ),
      query(
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
      ),
      query(
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
      ),
      query(
        (sql) => sql<
          { id: string; company_id: string; name: string; expires_at: Date; webhooks: boolean; subscriptions: number }[]
        >`
      select k.id::text, k.company_id::text, k.name, k.expires_at, k.webhooks,
        (select count(*)::int from service.webhook_subscriptions s where s.key_id = k.id) as subscriptions
      from service.api_keys k
      where k.revoked_at is null and k.expires_at > now() and k.expires_at <= now() + make_interval(days => ${KEY_EXPIRY_WARNING_DAYS})
      order by k.expires_at, k.id`
      ),
      query((sql) => sql<{ now: Date }[]>`select now()`),
      // runningReplays still takes a pool (webhooks/replay).
      Effect.flatMap(Sql, ({ pool }) => Effect.promise(() => runningReplays(pool))),
      quarantineSummary()
    ],
    { concurrency: "unbounded" }
  )
  const status: OperationsStatus = {
    at: now!.now.toISOString(),
    capture: { ...capture, leaderRunning: leader !== null, leader, quarantine },
    outbox: {
      backlog: outbox!.backlog,
      oldestBacklogAt: toIsoUtcOrNull(outbox!.oldest),
      newestEventAt: toIsoUtcOrNull(outbox!.newest)
    },
    deliveries: {
      due: d!.due,
      scheduled: d!.scheduled,
      inFlight: d!.in_flight,
      failing: d!.failing,
      held: d!.held,
      failedLast24h: d!.failed,
      oldestDueAt: toIsoUtcOrNull(d!.oldest_due)
    },
    endpointsSwitchedOff: off.map((w) => ({
      id: w.id,
      companyId: w.company_id,
      name: w.name,
      url: w.url,
      disabledAt: toIsoUtcOrNull(w.disabled_at),
      reason: w.disabled_reason,
      held: w.held
    })),
    replays,
    keysNearExpiry: keys.map((k) => ({
      id: k.id,
      companyId: k.company_id,
      name: k.name,
      expiresAt: k.expires_at.toISOString(),
      webhooks: k.webhooks,
      subscriptions: k.subscriptions
    }))
  }
  return status
})

/** What `status` exits with, for scripts: 0 healthy, 1 degraded, 2 broken. */
export type Health = "healthy" | "degraded" | "broken"

export const HEALTH_EXIT_CODES: Readonly<Record<Health, number>> = { healthy: 0, degraded: 1, broken: 2 }

/** Capture further behind than this (seconds) is degraded (`status --lag-threshold`; the shipped alert uses the same). */
export const LAG_THRESHOLD_SECONDS = 60

export interface HealthVerdict {
  readonly state: Health
  /** Why, one sentence each; empty when healthy. */
  readonly reasons: ReadonlyArray<string>
}

/**
 * Broken: what needs an operator now (the slot is gone or lost its WAL: events in the gap are
 * lost for good; the database does not answer, see databaseDown). Degraded: what usually
 * mends itself or waits on someone else (capture behind or stalled, no capture leader, e.g.
 * while a standby takes over, the slot about to lose WAL, endpoints switched off).
 */
export const assessStatus = (
  s: OperationsStatus,
  options: { readonly lagThresholdSeconds?: number } = {}
): HealthVerdict => {
  const threshold = options.lagThresholdSeconds ?? LAG_THRESHOLD_SECONDS
  const c = s.capture
  const broken: string[] = []
  const degraded: string[] = []
  if (!c.slotExists) {
    if (c.checkpointLsn !== null)
      broken.push(
        `replication slot ${c.slot} is missing: it was lost (capture recreates it and rebuilds the views; events in the gap are not sent)`
      )
    else degraded.push(`replication slot ${c.slot} does not exist yet: capture has not started`)
  } else if (c.walStatus === "lost" || c.invalidationReason !== null) {
    broken.push(
      `replication slot ${c.slot} was invalidated (${c.invalidationReason ?? "wal_status lost"}): capture rebuilds; events in the gap are not sent`
    )
  } else if (c.walStatus === "unreserved") {
    degraded.push(
      `replication slot ${c.slot} is about to lose WAL (wal_status unreserved${c.safeWalBytes === null ? "" : `, ${c.safeWalBytes} bytes to go`})`
    )
  }
  for (const b of c.quarantine?.broken ?? [])
    broken.push(
      `capture: app.${b.table} no longer fits what the service reads (since ${b.since}), its records are held until it does: ${b.problems.join("; ")}`
    )
  for (const r of c.quarantine?.resyncing ?? [])
    if (!c.quarantine?.broken.some((b) => b.table === r.table))
      degraded.push(
        `capture is re-reading app.${r.table} from the app table since ${r.since} (${r.rows} rows so far): the records it held shape again when it is done`
      )
  const q = c.quarantine
  if (q !== undefined && q.count > 0)
    degraded.push(
      `capture holds ${q.count} record${q.count === 1 ? "" : "s"} in quarantine (capture quarantine list); the first: ${q.first === null ? "-" : `#${q.first.id} app.${q.first.table} ${q.first.key}: ${q.first.error}`}`
    )
  if (c.leader === null)
    degraded.push(
      "no capture leader: no process is capturing (a standby takes over within seconds; if none runs, start one)"
    )
  if (c.stalledAt !== null)
    degraded.push(
      `capture stalled since ${c.stalledAt} (${c.stallReconnects} reconnect${c.stallReconnects === 1 ? "" : "s"} so far): ${c.stallReason ?? "no reason recorded"}`
    )
  if (c.lagSeconds !== null && c.lagSeconds > threshold)
    degraded.push(`capture is ${Math.round(c.lagSeconds)} s behind (threshold ${threshold} s)`)
  if (s.endpointsSwitchedOff.length > 0) {
    degraded.push(
      `${s.endpointsSwitchedOff.length} webhook endpoint${s.endpointsSwitchedOff.length === 1 ? " is" : "s are"} switched off`
    )
  }
  return broken.length > 0
    ? { state: "broken", reasons: [...broken, ...degraded] }
    : degraded.length > 0
      ? { state: "degraded", reasons: degraded }
      : { state: "healthy", reasons: [] }
}

/** The verdict when the database does not answer (or refuses the service): broken. */
export const databaseDown = (error: unknown): HealthVerdict => ({
  state: "broken",
  reasons: [`database: ${error instanceof Error ? error.message : String(error)}`]
})
