// Stored replays (service.webhook_replays, sql/019) as the admin API, the pages, `status` and
// the metrics show them, and cancelling one. Made by replay.ts, sent by replay-lane.ts.
import { Effect } from "effect"
import { isUuid } from "../../domain/ids.ts"
import type { Sql as Pool } from "postgres"
import { conflict, notFound } from "../../domain/errors.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query, transaction, type Sql } from "../../platform/db/Sql.ts"

/** Notified when a replay is made or cancelled: the replay lanes look at once. */
export const REPLAYS_CHANNEL = "service_webhook_replays"

/** Wakes the replay lanes about a replay that began or ended; in the caller's transaction, sent at its commit. */
export const wakeReplays = (id: string): Effect.Effect<void, never, Sql> =>
  query((tx) => tx`select pg_notify(${REPLAYS_CHANNEL}, ${id})`.then(() => {}))

export type ReplayState = "running" | "finished" | "cancelled"

/** What a replay has still to send: what it queued, less what was sent, skipped or restored
 *  (never below 0). SQL over a service.webhook_replays row (`r`: its alias and a dot); the one
 *  place this rule is written. */
const remaining = (r = "") => `greatest(0, ${r}total - ${r}sent - ${r}skipped - ${r}restored)::int`

/** Replays running now, and what they have still to send together (the metrics' gauges). */
export const runningReplayTotals: Effect.Effect<{ readonly running: number; readonly remaining: number }, never, Sql> =
  query((sql) =>
    sql<{ running: number; remaining: number }[]>`
    select count(*)::int as running, coalesce(sum(${sql.unsafe(remaining())}), 0)::int as remaining
    from service.webhook_replays where state = 'running'`.then(([r]) => r!)
  )

export interface ReplayView {
  readonly id: string
  readonly companyId: string
  readonly state: ReplayState
  readonly destination: {
    readonly kind: "endpoint" | "subscription"
    readonly id: string
    /** null once the destination is deleted (its replays go with it; a view read meanwhile). */
    readonly url: string | null
    /** The endpoint's name; a subscription's event. */
    readonly name: string | null
    readonly on: boolean
  }
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failedOnly: boolean
  /** api, pages or cli */
  readonly source: string
  /** The admin's e-mail; null: the service (a CLI replay without --as), or a key. */
  readonly createdBy: string | null
  /** The API key that recovered its own subscription with it (docs/api.md#your-deliveries), else null. */
  readonly byKey: { readonly id: string; readonly name: string } | null
  readonly createdAt: string
  /** When it finished or was cancelled. */
  readonly finishedAt: string | null
  readonly cancelledBy: string | null
  /** What the dry run counted when it was made. */
  readonly plan: {
    readonly matched: number
    readonly resend: number
    readonly create: number
    readonly skippedDelivered: number
    readonly skippedInFlight: number
  }
  readonly progress: {
    /** Deliveries the replay queued (resend + create). */
    readonly queued: number
    /** Attempted at least once since the replay handed them to the engine. */
    readonly sent: number
    /** Handed to the engine, not attempted yet. */
    readonly inEngine: number
    /** Found being attempted or (failed only) delivered when their turn came, or gone. */
    readonly skipped: number
    /** Handed over but not attempted when it was cancelled: put back as they were. */
    readonly restored: number
    /** Not sent: still to go while running; left unsent once cancelled. */
    readonly remaining: number
  }
  /** Why a running replay sends nothing now (its destination is off; another replay of it runs first), else null. */
  readonly waiting: string | null
}

type Row = {
  id: string
  company_id: string
  state: ReplayState
  endpoint_id: string | null
  subscription_id: string | null
  url: string | null
  name: string | null
  on: boolean | null
  since: Date
  until: Date
  events: string[]
  failed_only: boolean
  source: string
  actor_email: string | null
  created_at: Date
  finished_at: Date | null
  cancelled_by_email: string | null
  matched: number
  planned_resend: number
  planned_create: number
  skipped_delivered: number
  skipped_in_flight: number
  total: number
  released: number
  sent: number
  skipped: number
  restored: number
  remaining: number
  behind: string | null
  key_id: string | null
  key_name: string | null
}

const SELECT = `
  select r.id::text, r.company_id::text, r.state, r.endpoint_id::text, r.subscription_id::text,
    coalesce(w.url, s.url) as url, coalesce(w.name, s.event) as name, coalesce(w.enabled, s.active) as on,
    r.since, r.until, r.events, r.failed_only, r.source, r.actor_email, r.created_at, r.finished_at, r.cancelled_by_email,
    r.matched, r.planned_resend, r.planned_create, r.skipped_delivered, r.skipped_in_flight,
    r.total, r.released, r.sent, r.skipped, r.restored, ${remaining("r.")} as remaining,
    r.key_id::text, (select k.name from service.api_keys k where k.id = r.key_id) as key_name,
    case when r.state = 'running' then (
      select o.id::text from service.webhook_replays o
      where o.state = 'running' and (o.created_at, o.id) < (r.created_at, r.id)
        and (o.endpoint_id = r.endpoint_id or o.subscription_id = r.subscription_id)
      order by o.created_at, o.id limit 1) end as behind
  from service.webhook_replays r
  left join service.webhook_endpoints w on w.id = r.endpoint_id
  left join service.webhook_subscriptions s on s.id = r.subscription_id`

/** Why a running replay sends nothing now, or null. Pure. */
export const waitingReason = (r: {
  readonly state: ReplayState
  readonly kind: "endpoint" | "subscription"
  readonly on: boolean
  readonly behind: string | null
}): string | null => {
  if (r.state !== "running") return null
  if (!r.on)
    return r.kind === "endpoint"
      ? "the endpoint is switched off: it goes on once it is turned on"
      : "the subscription is turned off: it goes on once it is turned on"
  if (r.behind !== null) return `another replay to this ${r.kind} runs first (${r.behind})`
  return null
}

const view = (r: Row): ReplayView => {
  const kind = r.endpoint_id !== null ? "endpoint" : "subscription"
  const on = r.on ?? false
  return {
    id: r.id,
    companyId: r.company_id,
    state: r.state,
    destination: { kind, id: (r.endpoint_id ?? r.subscription_id)!, url: r.url, name: r.name, on },
    since: r.since.toISOString(),
    until: r.until.toISOString(),
    events: r.events,
    failedOnly: r.failed_only,
    source: r.source,
    createdBy: r.actor_email,
    byKey: r.key_id === null ? null : { id: r.key_id, name: r.key_name ?? "" },
    createdAt: r.created_at.toISOString(),
    finishedAt: r.finished_at?.toISOString() ?? null,
    cancelledBy: r.cancelled_by_email,
    plan: {
      matched: r.matched,
      resend: r.planned_resend,
      create: r.planned_create,
      skippedDelivered: r.skipped_delivered,
      skippedInFlight: r.skipped_in_flight
    },
    progress: {
      queued: r.total,
      sent: r.sent,
      inEngine: r.released,
      skipped: r.skipped,
      restored: r.restored,
      remaining: r.remaining
    },
    waiting: waitingReason({ state: r.state, kind, on, behind: r.behind })
  }
}

/** One replay; with companyId, only that company's (another's is not found). */
export const getReplay = Effect.fn("getReplay")(function* (input: {
  readonly id: string
  readonly companyId?: string | undefined
}) {
  const id = input.id.trim().toLowerCase()
  if (!isUuid(id)) return yield* notFound(`no replay ${JSON.stringify(input.id.slice(0, 60))}`)
  const [r] = yield* query((sql) => sql.unsafe<Row[]>(`${SELECT} where r.id = $1`, [id]))
  if (!r || (input.companyId !== undefined && r.company_id !== input.companyId.toLowerCase()))
    return yield* notFound(`no replay ${id}`)
  return view(r)
})

/** A company's replays, newest first; optionally only one destination's. */
export const listReplays = (input: {
  readonly companyId: string
  readonly endpointId?: string | undefined
  readonly subscriptionId?: string | undefined
  readonly limit?: number | undefined
}): Effect.Effect<ReadonlyArray<ReplayView>, never, Sql> => {
  const limit = Math.min(Math.max(Math.trunc(input.limit ?? 50), 1), 200)
  return query((sql) =>
    sql.unsafe<Row[]>(
      `${SELECT} where r.company_id = $1 and ($2::uuid is null or r.endpoint_id = $2::uuid) and ($3::uuid is null or r.subscription_id = $3::uuid)
       order by r.created_at desc, r.id desc limit $4`,
      [input.companyId.toLowerCase(), input.endpointId ?? null, input.subscriptionId ?? null, limit]
    )
  ).pipe(Effect.map((rows) => rows.map(view)))
}

/**
 * Every running replay, oldest first (status, metrics). On a handle: the status read runs it
 * beside its other statements on the pool.
 */
export const runningReplays = async (sql: Pool): Promise<ReadonlyArray<ReplayView>> =>
  (await sql.unsafe<Row[]>(`${SELECT} where r.state = 'running' order by r.created_at, r.id`)).map(view)

/**
 * Cancels a running replay: what it has not handed to the engine stays as it was; what it
 * handed over and is not attempted yet is put back as it was before (a delivery it made is
 * deleted); nothing already sent is undone, and one being attempted right now goes. In one
 * transaction with the replay's row locked, so the lane hands nothing more over meanwhile.
 */
export const cancelReplay = Effect.fn("cancelReplay")(function* (
  actor: Actor,
  input: { readonly id: string; readonly companyId?: string | undefined }
) {
  const current = yield* getReplay(input)
  yield* transaction(
    Effect.gen(function* () {
      const [r] = yield* query(
        (tx) => tx<{ state: ReplayState; company_id: string }[]>`
        select state, company_id::text from service.webhook_replays where id = ${current.id} for update`
      )
      if (!r) return yield* notFound(`no replay ${current.id}`)
      if (r.state !== "running") return yield* conflict(`replay ${current.id} is ${r.state} already`)
      const done = yield* query(async (tx) => {
        // Put back: handed over, not attempted (the attempt count did not move) and not leased now.
        const back = await tx<{ seq: number }[]>`
          update service.webhook_deliveries d set state = i.prior_state, next_attempt_at = i.prior_next_attempt_at,
            manual = i.prior_manual, held_reason = i.prior_held_reason, finished_at = i.prior_finished_at,
            leased_by = null, lease_until = null
          from service.webhook_replay_items i
          where i.replay_id = ${current.id} and i.state = 'released' and not i.made and d.id = i.delivery_id
            and d.attempts = i.attempts_before and (d.leased_by is null or d.lease_until <= now())
          returning i.seq`
        const gone = await tx<{ seq: number }[]>`
          delete from service.webhook_deliveries d using service.webhook_replay_items i
          where i.replay_id = ${current.id} and i.state = 'released' and i.made and d.id = i.delivery_id
            and d.attempts = 0 and (d.leased_by is null or d.lease_until <= now())
          returning i.seq`
        const restored = back.length + gone.length
        // The rest of what was handed over was attempted, or is being attempted now: sent.
        const [c] = await tx<{ released: number }[]>`
          select count(*)::int as released from service.webhook_replay_items where replay_id = ${current.id} and state = 'released'`
        const sent = c!.released - restored
        const [after] = await tx<{ sent: number; remaining: number }[]>`
          update service.webhook_replays set state = 'cancelled', finished_at = now(), released = 0, restored = ${restored},
            sent = sent + ${sent}, cancelled_by_id = ${actor.kind === "user" ? actor.id : null},
            cancelled_by_email = ${actor.kind === "user" ? actor.email : null}
          where id = ${current.id}
          returning sent, ${tx.unsafe(remaining())} as remaining`
        // Items only serve a running replay.
        await tx`delete from service.webhook_replay_items where replay_id = ${current.id}`
        return { ...after!, restored }
      })
      yield* writeActivity({
        companyId: r.company_id,
        actor,
        kind: "deliveries.replay_cancelled",
        subjectId: current.destination.id,
        details: {
          replayId: current.id,
          destination: current.destination.kind,
          sent: done.sent,
          notSent: done.remaining,
          restored: done.restored
        }
      })
      yield* wakeReplays(current.id)
    })
  )
  return yield* getReplay({ id: current.id })
})
