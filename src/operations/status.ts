// The operator's overview (`npm run admin -- status`): capture, the outbox backlog,
// deliveries due and failing, endpoints switched off and why, keys near expiry. Read from
// the database only, so it works from any process while the service runs (or not).
import type { Sql } from "postgres"
import { captureStatus, type CaptureStatus } from "../capture/status.ts"
import { leaderInfo, type LeaderInfo } from "../capture/leader.ts"

export const KEY_EXPIRY_WARNING_DAYS = 14

export interface OperationsStatus {
  readonly at: string
  readonly capture: CaptureStatus & {
    /** A capture process holds the leader lock (one per database). */
    readonly leaderRunning: boolean
    /** The session holding it (the others wait as standbys), or null. */
    readonly leader: LeaderInfo | null
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
  readonly keysNearExpiry: ReadonlyArray<{
    readonly id: string
    readonly companyId: string
    readonly name: string
    readonly expiresAt: string
    readonly webhooks: boolean
    readonly subscriptions: number
  }>
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null)

export const operationsStatus = async (sql: Sql, slot: string): Promise<OperationsStatus> => {
  const [capture, leader, [outbox], [d], off, keys, [now]] = await Promise.all([
    captureStatus(sql, slot),
    leaderInfo(sql),
    sql<{ backlog: number; oldest: Date | null; newest: Date | null }[]>`
      select (select count(*)::int from service.events e, service.webhook_fanout f where (e.commit_lsn, e.seq) > (f.commit_lsn, f.seq)) as backlog,
        (select min(e.created_at) from service.events e, service.webhook_fanout f where (e.commit_lsn, e.seq) > (f.commit_lsn, f.seq)) as oldest,
        (select max(created_at) from service.events) as newest`,
    sql<{ due: number; scheduled: number; in_flight: number; failing: number; held: number; failed: number; oldest_due: Date | null }[]>`
      select
        count(*) filter (where state = 'pending' and next_attempt_at <= now() and not leased)::int as due,
        count(*) filter (where state = 'pending' and next_attempt_at > now() and not leased)::int as scheduled,
        count(*) filter (where state = 'pending' and leased)::int as in_flight,
        count(*) filter (where state = 'pending' and attempts > 0)::int as failing,
        count(*) filter (where state = 'held')::int as held,
        count(*) filter (where state = 'failed' and finished_at > now() - interval '24 hours')::int as failed,
        min(next_attempt_at) filter (where state = 'pending' and next_attempt_at <= now() and not leased) as oldest_due
      from (select state, attempts, next_attempt_at, finished_at, (leased_by is not null and lease_until > now()) as leased
            from service.webhook_deliveries where state <> 'succeeded') x`,
    sql<{ id: string; company_id: string; name: string; url: string; disabled_at: Date | null; disabled_reason: string | null; held: number }[]>`
      select w.id::text, w.company_id::text, w.name, w.url, w.disabled_at, w.disabled_reason,
        (select count(*)::int from service.webhook_deliveries d where d.endpoint_id = w.id and d.state = 'held') as held
      from service.webhook_endpoints w where not w.enabled order by w.disabled_at desc nulls last, w.id`,
    sql<{ id: string; company_id: string; name: string; expires_at: Date; webhooks: boolean; subscriptions: number }[]>`
      select k.id::text, k.company_id::text, k.name, k.expires_at, k.webhooks,
        (select count(*)::int from service.webhook_subscriptions s where s.key_id = k.id) as subscriptions
      from service.api_keys k
      where k.revoked_at is null and k.expires_at > now() and k.expires_at <= now() + make_interval(days => ${KEY_EXPIRY_WARNING_DAYS})
      order by k.expires_at, k.id`,
    sql<{ now: Date }[]>`select now()`
  ])
  return {
    at: now!.now.toISOString(),
    capture: { ...capture, leaderRunning: leader !== null, leader },
    outbox: { backlog: outbox!.backlog, oldestBacklogAt: iso(outbox!.oldest), newestEventAt: iso(outbox!.newest) },
    deliveries: {
      due: d!.due,
      scheduled: d!.scheduled,
      inFlight: d!.in_flight,
      failing: d!.failing,
      held: d!.held,
      failedLast24h: d!.failed,
      oldestDueAt: iso(d!.oldest_due)
    },
    endpointsSwitchedOff: off.map((w) => ({
      id: w.id,
      companyId: w.company_id,
      name: w.name,
      url: w.url,
      disabledAt: iso(w.disabled_at),
      reason: w.disabled_reason,
      held: w.held
    })),
    keysNearExpiry: keys.map((k) => ({
      id: k.id,
      companyId: k.company_id,
      name: k.name,
      expiresAt: k.expires_at.toISOString(),
      webhooks: k.webhooks,
      subscriptions: k.subscriptions
    }))
  }
}
