// The delivery log an admin sees (the last 25 of an endpoint, one delivery with its
// attempts), Send Again (same delivery id, at once) and replay of failures since a time.
import { Effect } from "effect"
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { requireId } from "../../domain/ids.ts"
import { wakeDelivery } from "../engine/wake.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import { checked } from "../endpoints/validate.ts"
import { conflict, invalid, notFound } from "../../domain/errors.ts"
import { holdReason } from "../engine/hold.ts"
import { matches, type Filter } from "../../domain/filters/filter.ts"
import { eventPayload } from "../../pipeline/outbox/events.ts"

export type DeliveryView = {
  readonly id: string
  readonly event: string
  readonly eventId: string
  readonly recordId: string
  readonly endpointId: string | null
  readonly subscriptionId: string | null
  /** pending | held | succeeded | failed */
  readonly state: string
  readonly attempts: number
  readonly lastStatus: number | null
  readonly lastError: string | null
  readonly heldReason: string | null
  readonly createdAt: string
  readonly lastAttemptAt: string | null
  /** When the next attempt is due (pending only). */
  readonly nextAttemptAt: string | null
  readonly finishedAt: string | null
}

export type AttemptView = {
  readonly number: number
  readonly startedAt: string
  readonly durationMs: number
  readonly status: number | null
  readonly error: string | null
  readonly errorKind: string | null
  readonly response: string | null
}

type Row = {
  id: string
  event: string
  event_id: string
  record_id: string
  endpoint_id: string | null
  subscription_id: string | null
  company_id: string
  state: string
  attempts: number
  last_status: number | null
  last_error: string | null
  held_reason: string | null
  created_at: Date
  last_attempt_at: Date | null
  next_attempt_at: Date | null
  leased: boolean
  finished_at: Date | null
}

// The epoch marks "at once" (Send Again): it is due for any engine clock, real or test.
const SELECT = `select d.id::text, d.event, d.event_id::text, e.record_id::text, d.endpoint_id::text, d.subscription_id::text,
  d.company_id::text, d.state, d.attempts, d.last_status, d.last_error, d.held_reason, d.created_at, d.last_attempt_at,
  case when d.next_attempt_at > 'epoch' then d.next_attempt_at end as next_attempt_at,
  (d.leased_by is not null and d.lease_until > now()) as leased, d.finished_at
  from service.webhook_deliveries d join service.events e on e.id = d.event_id`

const view = (r: Row): DeliveryView => ({
  id: r.id,
  event: r.event,
  eventId: r.event_id,
  recordId: r.record_id,
  endpointId: r.endpoint_id,
  subscriptionId: r.subscription_id,
  state: r.state,
  attempts: r.attempts,
  lastStatus: r.last_status,
  lastError: r.last_error,
  heldReason: r.held_reason,
  createdAt: r.created_at.toISOString(),
  lastAttemptAt: toIsoUtcOrNull(r.last_attempt_at),
  nextAttemptAt: r.state === "pending" && !r.leased ? toIsoUtcOrNull(r.next_attempt_at) : null,
  finishedAt: toIsoUtcOrNull(r.finished_at)
})

export const LOG_SIZE = 25

/** The endpoint's company; another company's endpoint is not found. */
const endpointCompany = Effect.fn("endpointCompany")(function* (endpointId: string, companyId: string | undefined) {
  const [e] = yield* query(
    (sql) =>
      sql<{ company_id: string }[]>`select company_id::text from service.webhook_endpoints where id = ${endpointId}`
  )
  if (!e || (companyId !== undefined && e.company_id !== companyId.toLowerCase()))
    return yield* notFound(`no endpoint ${endpointId}`)
  return e.company_id
})

/** An endpoint's most recent deliveries (at most 25), newest first. */
export const listEndpointDeliveries = Effect.fn("listEndpointDeliveries")(function* (input: {
  readonly endpointId: string
  readonly companyId?: string | undefined
  readonly limit?: number | undefined
}) {
  const endpointId = yield* checked(() => requireId(input.endpointId, "endpoint"))
  yield* endpointCompany(endpointId, input.companyId)
  const limit = Math.min(Math.max(Math.trunc(input.limit ?? LOG_SIZE), 1), LOG_SIZE)
  const rows = yield* query((sql) =>
    sql.unsafe<Row[]>(`${SELECT} where d.endpoint_id = $1 order by d.created_at desc, d.id desc limit $2`, [
      endpointId,
      limit
    ])
  )
  return rows.map(view)
})

const load = Effect.fn("loadDelivery")(function* (id: string, companyId: string | undefined) {
  const [r] = yield* query((sql) => sql.unsafe<Row[]>(`${SELECT} where d.id = $1`, [id]))
  if (!r || (companyId !== undefined && r.company_id !== companyId.toLowerCase()))
    return yield* notFound(`no delivery ${id}`)
  return r
})

/** An attempt as service.webhook_attempts stores it. */
export type AttemptRow = {
  number: number
  started_at: Date
  duration_ms: number
  status: number | null
  error: string | null
  error_kind: string | null
  response_snippet: string | null
}

/** One delivery with every attempt, oldest first. */
export const getDelivery = Effect.fn("getDelivery")(function* (input: {
  readonly id: string
  readonly companyId?: string | undefined
}) {
  const id = yield* checked(() => requireId(input.id, "delivery"))
  const r = yield* load(id, input.companyId)
  const attempts = yield* query(
    (sql) => sql<AttemptRow[]>`
    select number, started_at, duration_ms, status, error, error_kind, response_snippet
    from service.webhook_attempts where delivery_id = ${id} order by number`
  )
  return {
    ...view(r),
    attemptLog: attempts.map(
      (a): AttemptView => ({
        number: a.number,
        startedAt: a.started_at.toISOString(),
        durationMs: a.duration_ms,
        status: a.status,
        error: a.error,
        errorKind: a.error_kind,
        response: a.response_snippet
      })
    )
  }
})

/**
 * Send Again: an attempt at once, with the same delivery id (receivers drop repeats by it).
 * It goes even to an endpoint that is switched off: the admin asked for it. For a finished
 * (or held) delivery it is that one attempt (`manual`); a delivery still in its retry
 * schedule is just tried now, and keeps the rest of its schedule if this attempt fails.
 */
export const resendDelivery = Effect.fn("resendDelivery")(function* (
  actor: Actor,
  input: { readonly id: string; readonly companyId?: string | undefined }
) {
  const id = yield* checked(() => requireId(input.id, "delivery"))
  const before = yield* load(id, input.companyId)
  return yield* transaction(
    Effect.gen(function* () {
      const r = yield* query(
        (tx) => tx`
        update service.webhook_deliveries set state = 'pending', next_attempt_at = 'epoch', manual = state <> 'pending', held_reason = null,
          finished_at = null, leased_by = null, lease_until = null
        where id = ${id} and (leased_by is null or lease_until < now()) returning id`
      )
      if (r.length === 0) return yield* conflict(`delivery ${id} is being attempted right now; try again in a moment`)
      // Send Again tries a receiver at once, even a switched-off endpoint's; it does not send
      // what the destination may no longer receive (rolled back, so nothing changes).
      const reason = yield* query((tx) => holdReason(tx, id))
      if (reason !== null) return yield* conflict(`delivery ${id} cannot be sent again now: ${reason}`)
      yield* writeActivity({
        companyId: before.company_id,
        actor,
        kind: "delivery.resent",
        subjectId: id,
        details: {
          endpointId: before.endpoint_id,
          subscriptionId: before.subscription_id,
          previousState: before.state,
          event: before.event
        }
      })
      yield* wakeDelivery
      return view((yield* query((tx) => tx.unsafe<Row[]>(`${SELECT} where d.id = $1`, [id])))[0]!)
    })
  )
})

/**
 * Recovery after an outage: every failed delivery of the endpoint created since `since` that
 * its filter takes now is attempted again at once, each with its own id. Returns how many.
 */
export const replayFailed = Effect.fn("replayFailed")(function* (
  actor: Actor,
  input: { readonly endpointId: string; readonly since: Date; readonly companyId?: string | undefined }
) {
  const endpointId = yield* checked(() => requireId(input.endpointId, "endpoint"))
  if (!(input.since instanceof Date) || Number.isNaN(input.since.getTime()))
    return yield* invalid("since must be a date", { field: "since" })
  const companyId = yield* endpointCompany(endpointId, input.companyId)
  return yield* transaction(
    Effect.gen(function* () {
      // Only what the endpoint's filter takes now (docs/events.md#content-filters), read with
      // the data as sent.
      const failed = yield* query(
        (tx) => tx<{ id: string; filter: Filter | null; payload: string | null }[]>`
        select d.id::text, w.filter, case when w.filter is null then null else ${tx.unsafe(eventPayload("e"))} end as payload
        from service.webhook_deliveries d join service.webhook_endpoints w on w.id = d.endpoint_id
          join service.events e on e.id = d.event_id
        where d.endpoint_id = ${endpointId} and d.state = 'failed' and d.created_at >= ${input.since}
        for update of d`
      )
      const ids = failed
        .filter((r) => r.filter === null || (r.payload !== null && matches(r.filter, JSON.parse(r.payload) as unknown)))
        .map((r) => r.id)
      const rows = yield* query(
        (tx) => tx`
        update service.webhook_deliveries set state = 'pending', next_attempt_at = 'epoch', finished_at = null,
          leased_by = null, lease_until = null
        where id = any(${ids}::uuid[]) returning id`
      )
      yield* writeActivity({
        companyId,
        actor,
        kind: "deliveries.replayed",
        subjectId: endpointId,
        details: { since: input.since.toISOString(), count: rows.length }
      })
      if (rows.length > 0) yield* wakeDelivery
      return { count: rows.length }
    })
  )
})
