// replay: re-sends a destination's events in a time range after an outage. The same
// (event, destination) always has the same delivery row, so a replayed event that was
// ever fanned out to this destination keeps its delivery id (Service-Delivery and body id)
// and receivers recognise it as a repeat; an event it never got (e.g. while the endpoint
// was switched off: fan-out skips endpoints that are off) gets a new delivery, with the id
// fan-out would have given it (a function of event and destination). An event fan-out has
// not passed yet is fan-out's to send (its first attempt may be on the wire, not yet
// written): it counts as in flight.
//
// Existing rows are reset to pending, due now, in event order; the engine then treats them
// like any delivery: held while the destination is off, attempted at once otherwise. A row
// that had used up its attempts gets one more (the schedule is not restarted, so a replay
// to a receiver still down counts toward switching the endpoint off again, as it should).
import type { Sql } from "postgres"
import { invalid, notFound } from "../admin/errors.ts"
import { isEventKind } from "../domain/event-kinds.ts"
import { DELIVERIES_CHANNEL } from "../delivery/channels.ts"
import { originOf } from "../delivery/queries.ts"
import { writeActivity, type Actor } from "../webhooks/context.ts"

export interface ReplayInput {
  readonly endpointId?: string | undefined
  readonly subscriptionId?: string | undefined
  /** Default: when the destination was created. */
  readonly since?: Date | undefined
  /** Default: now. Exclusive. */
  readonly until?: Date | undefined
  /** Default: every event the destination takes. */
  readonly events?: ReadonlyArray<string> | undefined
  /** Only events never delivered successfully to this destination. */
  readonly failedOnly: boolean
  readonly dryRun: boolean
  readonly actor: Actor
}

export interface ReplayDestination {
  readonly kind: "endpoint" | "subscription"
  readonly id: string
  readonly companyId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  /** Endpoint on / subscription active: false means replayed deliveries wait (held) until it is. */
  readonly on: boolean
  readonly createdAt: string
  /** host:port, as the engine groups deliveries per receiver. */
  readonly origin: string
}

export interface ReplaySummary {
  readonly destination: ReplayDestination
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failedOnly: boolean
  readonly dryRun: boolean
  /** Events of the destination's company and kinds in the range. */
  readonly matched: number
  /** Existing deliveries sent again with their own id (dry run: that would be). */
  readonly resent: number
  /** Events the destination never had a delivery for: new deliveries. */
  readonly created: number
  /** Already delivered successfully (--failed). */
  readonly skippedDelivered: number
  /** Being attempted right now: left alone. */
  readonly skippedInFlight: number
}

export interface ReplayProgress {
  readonly done: number
  readonly total: number
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const CHUNK = 500

type Plan = { event_id: string; delivery_id: string | null; state: string | null; leased: boolean }

const destinationOf = async (sql: Sql, input: ReplayInput): Promise<ReplayDestination> => {
  if ((input.endpointId === undefined) === (input.subscriptionId === undefined)) {
    throw invalid("name one destination: --endpoint <id> or --subscription <id>")
  }
  if (input.endpointId !== undefined) {
    const id = input.endpointId.trim().toLowerCase()
    if (!UUID.test(id)) throw notFound(`no endpoint ${JSON.stringify(input.endpointId)}`)
    const [w] = await sql.unsafe<{ company_id: string; url: string; events: string[]; enabled: boolean; created_at: Date; origin: string }[]>(
      `select company_id::text, url, events, enabled, created_at, ${originOf("url")} as origin from service.webhook_endpoints where id = $1`,
      [id]
    )
    if (!w) throw notFound(`no endpoint ${id}`)
    return { kind: "endpoint", id, companyId: w.company_id, url: w.url, events: w.events, on: w.enabled, createdAt: w.created_at.toISOString(), origin: w.origin }
  }
  const id = input.subscriptionId!.trim().toLowerCase()
  if (!UUID.test(id)) throw notFound(`no subscription ${JSON.stringify(input.subscriptionId)}`)
  const [s] = await sql.unsafe<{ company_id: string; url: string; event: string; active: boolean; created_at: Date; origin: string }[]>(
    `select company_id::text, url, event, active, created_at, ${originOf("url")} as origin from service.webhook_subscriptions where id = $1`,
    [id]
  )
  if (!s) throw notFound(`no subscription ${id}`)
  return { kind: "subscription", id, companyId: s.company_id, url: s.url, events: [s.event], on: s.active, createdAt: s.created_at.toISOString(), origin: s.origin }
}

/** Checks the input, finds the destination and what a replay would do to each event. */
const plan = async (sql: Sql, input: ReplayInput) => {
  const destination = await destinationOf(sql, input)
  for (const e of input.events ?? []) {
    if (!isEventKind(e)) throw invalid(`unknown event "${e}"`)
    if (!destination.events.includes(e)) throw invalid(`the ${destination.kind} ${destination.id} does not take ${e} events (it takes ${destination.events.join(", ")})`)
  }
  const events = input.events && input.events.length > 0 ? [...new Set(input.events)] : [...destination.events]
  const [now] = await sql<{ now: Date }[]>`select now()`
  const since = input.since ?? new Date(destination.createdAt)
  const until = input.until ?? now!.now
  for (const d of [since, until]) if (Number.isNaN(d.getTime())) throw invalid("--since and --until must be dates")
  if (since >= until) throw invalid(`--since (${since.toISOString()}) must be before --until (${until.toISOString()})`)
  const column = destination.kind === "endpoint" ? sql`d.endpoint_id` : sql`d.subscription_id`
  // Commit order, so receivers get replays in the order the events happened.
  const rows = await sql<Plan[]>`
    select e.id::text as event_id, d.id::text as delivery_id, d.state,
      coalesce(d.leased_by is not null and d.lease_until > now(), d.id is null and (e.commit_lsn, e.seq) > (p.commit_lsn, p.seq)) as leased
    from service.events e
    join service.webhook_fanout_parts p on p.part = service.webhook_part(e.id)
    left join service.webhook_deliveries d on d.event_id = e.id and ${column} = ${destination.id}
    where e.company_id = ${destination.companyId} and e.event = any(${events}::text[])
      and e.created_at >= ${since} and e.created_at < ${until}
    order by e.commit_lsn, e.seq`
  return { destination, events, since, until, rows }
}

export const replay = async (sql: Sql, input: ReplayInput, onProgress: (p: ReplayProgress) => void = () => {}): Promise<ReplaySummary> => {
  const { destination, events, since, until, rows } = await plan(sql, input)
  const delivered = rows.filter((r) => r.state === "succeeded" && !r.leased)
  const inFlight = rows.filter((r) => r.leased)
  const todo = rows.filter((r) => !r.leased && !(input.failedOnly && r.state === "succeeded"))
  let resent = todo.filter((r) => r.delivery_id !== null).length
  let created = todo.length - resent
  let skippedInFlight = inFlight.length
  if (!input.dryRun && todo.length > 0) {
    resent = 0
    created = 0
    onProgress({ done: 0, total: todo.length })
    const origin = destination.origin
    const endpointId = destination.kind === "endpoint" ? destination.id : null
    const subscriptionId = destination.kind === "subscription" ? destination.id : null
    for (let i = 0; i < todo.length; i += CHUNK) {
      // Each row's place in event order, so resent and new deliveries fall due in that order.
      const chunk = todo.slice(i, i + CHUNK).map((r, k) => ({ ...r, at: i + k }))
      const resets = chunk.filter((r) => r.delivery_id !== null)
      const fresh = chunk.filter((r) => r.delivery_id === null)
      await sql.begin(async (tx) => {
        // Due now, a microsecond apart; a row leased meanwhile is left to its attempt.
        if (resets.length > 0) {
          const done = await tx`
            update service.webhook_deliveries d set state = 'pending', next_attempt_at = now() + x.at * interval '1 microsecond',
              manual = false, held_reason = null, finished_at = null, leased_by = null, lease_until = null
            from unnest(${resets.map((r) => r.delivery_id!)}::uuid[], ${resets.map((r) => r.at)}::int[]) as x(id, at)
            where d.id = x.id and (d.leased_by is null or d.lease_until < now())
              and (${!input.failedOnly} or d.state <> 'succeeded')
            returning d.id`
          resent += done.count
          skippedInFlight += resets.length - done.count
        }
        if (fresh.length > 0) {
          // The destination is locked for key share (deliveries have no foreign keys): one
          // deleted meanwhile gets no rows. A row fan-out made meanwhile wins (one delivery
          // per event and destination).
          const table = endpointId !== null ? tx`service.webhook_endpoints` : tx`service.webhook_subscriptions`
          const [there] = await tx`select 1 from ${table} where id = ${destination.id} for key share`
          if (there) {
            const made = await tx`
              insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, subscription_id, origin, next_attempt_at)
              select service.webhook_delivery_id(e.id, ${endpointId}::uuid, ${subscriptionId}::uuid), e.id, e.company_id, e.event,
                ${endpointId}::uuid, ${subscriptionId}::uuid, ${origin}, now() + x.at * interval '1 microsecond'
              from unnest(${fresh.map((r) => r.event_id)}::uuid[], ${fresh.map((r) => r.at)}::int[]) as x(id, at)
              join service.events e on e.id = x.id
              on conflict do nothing
              returning id`
            created += made.count
          }
        }
        await tx`select pg_notify(${DELIVERIES_CHANNEL}, '')`
      })
      onProgress({ done: Math.min(i + CHUNK, todo.length), total: todo.length })
    }
    await writeActivity(sql, {
      companyId: destination.companyId,
      actor: input.actor,
      kind: "deliveries.replayed",
      subjectId: destination.id,
      details: {
        destination: destination.kind,
        since: since.toISOString(),
        until: until.toISOString(),
        events,
        failedOnly: input.failedOnly,
        resent,
        created
      }
    })
  }
  return {
    destination,
    since: since.toISOString(),
    until: until.toISOString(),
    events,
    failedOnly: input.failedOnly,
    dryRun: input.dryRun,
    matched: rows.length,
    resent,
    created,
    skippedDelivered: input.failedOnly ? delivered.length : 0,
    skippedInFlight
  }
}
