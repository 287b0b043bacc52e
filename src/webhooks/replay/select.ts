// replay: re-sends a destination's events in a time range after an outage. The same
// (event, destination) always has the same delivery row, so a replayed event that was
// ever fanned out to this destination keeps its delivery id (Service-Delivery and body id)
// and receivers recognise it as a repeat; an event it never got (e.g. while the endpoint
// was switched off: fan-out skips endpoints that are off) gets a new delivery, with the id
// fan-out would have given it (a function of event and destination). An event fan-out has
// not passed yet is fan-out's to send (its first attempt may be on the wire, not yet
// written): it counts as in flight.
//
// A replay is a stored job (service.webhook_replays, sql/019), made by the CLI, the admin
// API or the admin pages alike: making it plans which events go again, in event order, and
// changes no delivery. The replay lane (replay-lane.ts) hands them to the engine at
// REPLAY_RATE per destination, so live deliveries never queue behind a replay; there a
// delivery is reset to pending with its own id (or made), and treated like any other: held
// while the destination is off, attempted at once otherwise. A row that had used up its
// attempts gets one more (the schedule is not restarted, so a replay to a receiver still
// down counts toward switching the endpoint off again, as it should). A dry run counts the
// same plan and stores nothing.
import { Effect } from "effect"
import { isUuid } from "../../domain/ids.ts"
import { at, invalid, notFound, words } from "../../domain/errors.ts"
import { isWebhookEvent } from "../../domain/event-kinds.ts"
import { matches, type Filter } from "../../domain/filters/filter.ts"
import { eventPayload } from "../../pipeline/outbox/events.ts"
import { originOf } from "../net/origin.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import { wakeReplays } from "./jobs.ts"

export type ReplaySource = "api" | "pages" | "cli"

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
  /** Only a destination of this company (the admin API and pages): another's is not found. */
  readonly companyId?: string | undefined
  /** Who made it: the admin API, the pages or the CLI (default). */
  readonly source?: ReplaySource | undefined
  /** The API key that asked for it (its own subscription's recovery): only it reads the replay back. */
  readonly keyId?: string | undefined
}

export interface ReplayDestination {
  readonly kind: "endpoint" | "subscription"
  readonly id: string
  readonly companyId: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  /** Endpoint on / subscription active: false means the replay waits until it is. */
  readonly on: boolean
  readonly createdAt: string
  /** host:port, as the engine groups deliveries per receiver. */
  readonly origin: string
}

export interface ReplaySummary {
  /** The stored replay that sends them (null for a dry run, or when there is nothing to send). */
  readonly replayId: string | null
  readonly destination: ReplayDestination
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failedOnly: boolean
  readonly dryRun: boolean
  /** Events of the destination's company and kinds in the range. */
  readonly matched: number
  /** Existing deliveries to send again with their own id. */
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

const CHUNK = 2_000

type Plan = { event_id: string; delivery_id: string | null; state: string | null; leased: boolean }

/** Where each kind of destination is read, by id: its statement, and its row's events and whether it is on. */
const DESTINATION_READS = {
  endpoint: {
    statement: `select company_id::text, url, events, enabled, created_at, ${originOf("url")} as origin, filter, null::text as key_id
      from service.webhook_endpoints where id = $1`,
    events: (row: DestinationRow) => row.events!,
    on: (row: DestinationRow) => row.enabled!
  },
  subscription: {
    statement: `select company_id::text, url, event, active, created_at, ${originOf("url")} as origin, filter, key_id::text
      from service.webhook_subscriptions where id = $1`,
    events: (row: DestinationRow) => [row.event!],
    on: (row: DestinationRow) => row.active!
  }
} as const

/** A row of either statement: an endpoint's has events and enabled, a subscription's event and active. */
interface DestinationRow {
  readonly company_id: string
  readonly url: string
  readonly events?: string[]
  readonly enabled?: boolean
  readonly event?: string
  readonly active?: boolean
  readonly created_at: Date
  readonly origin: string
  readonly filter: Filter | null
  readonly key_id: string | null
}

const destinationOf = Effect.fn("replayDestination")(function* (input: ReplayInput) {
  if ((input.endpointId === undefined) === (input.subscriptionId === undefined)) {
    return yield* invalid(words`name one destination: ${at("endpoint")} or ${at("subscription")}`)
  }
  const company = input.companyId?.toLowerCase()
  const kind = input.endpointId !== undefined ? "endpoint" : "subscription"
  const given = (input.endpointId ?? input.subscriptionId)!
  const id = given.trim().toLowerCase()
  if (!isUuid(id)) return yield* notFound(`no ${kind} ${JSON.stringify(given)}`)
  const read = DESTINATION_READS[kind]
  const [row] = yield* query((sql) => sql.unsafe<DestinationRow[]>(read.statement, [id]))
  if (!row || (company !== undefined && row.company_id !== company)) return yield* notFound(`no ${kind} ${id}`)
  return {
    kind,
    id,
    companyId: row.company_id,
    url: row.url,
    events: read.events(row),
    on: read.on(row),
    createdAt: row.created_at.toISOString(),
    origin: row.origin,
    filter: row.filter,
    keyId: row.key_id
  } satisfies ReplayDestination & { readonly filter: Filter | null; readonly keyId: string | null }
})

/** Checks the input, finds the destination and what a replay would do to each event. */
const plan = Effect.fn("replayPlan")(function* (input: ReplayInput) {
  const { filter, keyId, ...destination } = yield* destinationOf(input)
  for (const e of input.events ?? []) {
    if (!isWebhookEvent(e)) return yield* invalid(`unknown event "${e}"`, { field: "events" })
    if (!destination.events.includes(e))
      return yield* invalid(
        `the ${destination.kind} ${destination.id} does not take ${e} events (it takes ${destination.events.join(", ")})`,
        { field: "events" }
      )
  }
  const events = input.events && input.events.length > 0 ? [...new Set(input.events)] : [...destination.events]
  const [now] = yield* query((sql) => sql<{ now: Date }[]>`select now()`)
  const since = input.since ?? new Date(destination.createdAt)
  const until = input.until ?? now!.now
  for (const d of [since, until])
    if (Number.isNaN(d.getTime())) return yield* invalid(words`${at("since")} and ${at("until")} must be dates`)
  if (since >= until)
    return yield* invalid(
      words`${at("since")} (${since.toISOString()}) must be before ${at("until")} (${until.toISOString()})`
    )
  // Commit order, so receivers get replays in the order the events happened.
  // An alert never goes to the destination it is about; a key hears only of its own
  // subscriptions; a filtered destination gets only the events that match (read with their data).
  const all = yield* query((sql) => {
    const column = destination.kind === "endpoint" ? sql`d.endpoint_id` : sql`d.subscription_id`
    return sql<Array<Plan & { payload: string | null }>>`
      select e.id::text as event_id, d.id::text as delivery_id, d.state,
        coalesce(d.leased_by is not null and d.lease_until > now(), d.id is null and (e.commit_lsn, e.seq) > (p.commit_lsn, p.seq)) as leased,
        ${filter === null ? sql`null` : sql.unsafe(eventPayload("e"))} as payload
      from service.events e
      join service.webhook_fanout_parts p on p.part = service.webhook_part(e.id)
      left join service.webhook_deliveries d on d.event_id = e.id and ${column} = ${destination.id}
      left join service.webhook_alerts a on a.event_id = e.id
      where e.company_id = ${destination.companyId} and e.event = any(${events}::text[])
        and e.created_at >= ${since} and e.created_at < ${until}
        and (a.event_id is null or (e.record_id <> ${destination.id}::uuid
          and (${destination.kind === "endpoint"} or a.key_id = ${keyId}::uuid)))
      order by e.commit_lsn, e.seq`
  })
  const rows =
    filter === null ? all : all.filter((r) => r.payload !== null && matches(filter, JSON.parse(r.payload) as unknown))
  return { destination, events, since, until, rows }
})

/**
 * Counts (dry run) or makes a replay. Made, it is stored with its plan, one item per event
 * to send in event order, and written to the activity log; the replay lane sends it.
 * `onProgress` follows the writing of the items.
 */
export const replay = Effect.fn("replay")(function* (
  input: ReplayInput,
  onProgress: (p: ReplayProgress) => void = () => {}
) {
  const { destination, events, since, until, rows } = yield* plan(input)
  const delivered = rows.filter((r) => r.state === "succeeded" && !r.leased)
  const inFlight = rows.filter((r) => r.leased)
  const todo = rows.filter((r) => !r.leased && !(input.failedOnly && r.state === "succeeded"))
  const resent = todo.filter((r) => r.delivery_id !== null).length
  const created = todo.length - resent
  const skippedDelivered = input.failedOnly ? delivered.length : 0
  let replayId: string | null = null
  if (!input.dryRun && todo.length > 0) {
    const a = input.actor
    replayId = yield* transaction(
      Effect.gen(function* () {
        const id = yield* query(async (tx) => {
          const [r] = await tx<{ id: string }[]>`
            insert into service.webhook_replays (company_id, endpoint_id, subscription_id, since, until, events, failed_only, source,
              actor_id, actor_email, matched, planned_resend, planned_create, skipped_delivered, skipped_in_flight, total, key_id)
            values (${destination.companyId}, ${destination.kind === "endpoint" ? destination.id : null}, ${destination.kind === "subscription" ? destination.id : null},
              ${since}, ${until}, ${events}::text[], ${input.failedOnly}, ${input.source ?? "cli"},
              ${a.kind === "user" ? a.id : null}, ${a.kind === "user" ? a.email : null},
              ${rows.length}, ${resent}, ${created}, ${skippedDelivered}, ${inFlight.length}, ${todo.length}, ${input.keyId ?? null})
            returning id::text`
          const id = r!.id
          onProgress({ done: 0, total: todo.length })
          for (let i = 0; i < todo.length; i += CHUNK) {
            const chunk = todo.slice(i, i + CHUNK)
            await tx`
              insert into service.webhook_replay_items (replay_id, seq, event_id, delivery_id)
              select ${id}::uuid, ${i} + x.n, x.event_id, x.delivery_id
              from unnest(${chunk.map((c) => c.event_id)}::uuid[], ${chunk.map((c) => c.delivery_id)}::uuid[]) with ordinality as x(event_id, delivery_id, n)`
            onProgress({ done: Math.min(i + CHUNK, todo.length), total: todo.length })
          }
          return id
        })
        yield* writeActivity({
          companyId: destination.companyId,
          actor: input.actor,
          kind: "deliveries.replayed",
          subjectId: destination.id,
          details: {
            replayId: id,
            destination: destination.kind,
            since: since.toISOString(),
            until: until.toISOString(),
            events,
            failedOnly: input.failedOnly,
            resent,
            created
          }
        })
        yield* wakeReplays(id)
        return id
      })
    )
  }
  return {
    replayId,
    destination,
    since: since.toISOString(),
    until: until.toISOString(),
    events,
    failedOnly: input.failedOnly,
    dryRun: input.dryRun,
    matched: rows.length,
    resent,
    created,
    skippedDelivered,
    skippedInFlight: inFlight.length
  } satisfies ReplaySummary
})
