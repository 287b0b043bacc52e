// A key's own deliveries (docs/api.md#your-deliveries): the log of one of its subscriptions,
// Send Again of one delivery, and recovery of what failed or never went since a time, as a
// replay on the replay lane that only this key reads back. Every operation checks the key's
// rights in the database (hooks.ts) and finds only the key's own subscriptions; another
// key's, or a missing one, is 404. Nothing here shows a record's content: an event's payload
// is read from GET /api/v1/events/{id}, under the key's read rights of the moment; the
// receiver's answers show only a short excerpt.
import { Effect } from "effect"
import { FILTER_DATE_FORMATS, parseFilterDate } from "../../domain/dates.ts"
import { conflict, invalid, notFound } from "../../domain/errors.ts"
import type { EventKind } from "../../domain/event-kinds.ts"
import { isUuid } from "../../domain/ids.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import { type AttemptRow as StoredAttempt, resendDelivery } from "../deliveries/deliveries.ts"
import { getReplay, type ReplayState, type ReplayView } from "../replay/jobs.ts"
import { replay } from "../replay/select.ts"
import { type HookKey, own, requireReadable, withWebhooks } from "./hooks.ts"

/** How far back a recovery reaches: events (and deliveries) are kept 30 days (docs/events.md#retries). */
export const RECOVER_WINDOW_DAYS = 30
/** The receiver's answer is shown up to this many characters, never more. */
export const RESPONSE_EXCERPT_CHARS = 200
/** A list item shows its latest attempts; one delivery, its latest this many. */
export const LIST_ATTEMPTS = 5
export const DELIVERY_ATTEMPTS = 50
export const DEFAULT_DELIVERIES_LIMIT = 50

export const DELIVERY_STATUSES = ["succeeded", "failed", "pending"] as const
export type DeliveryStatusFilter = (typeof DELIVERY_STATUSES)[number]

/** The first `max` characters of a receiver's answer (whole code points), or null when it said nothing. Pure. */
export const excerpt = (text: string | null, max = RESPONSE_EXCERPT_CHARS): string | null => {
  if (text === null || text === "") return null
  const points = Array.from(text)
  return points.length <= max ? text : points.slice(0, max).join("")
}

export type HookAttempt = {
  readonly number: number
  readonly startedAt: string
  readonly durationMs: number
  /** The receiver's HTTP status, when it answered. */
  readonly status: number | null
  /** Why it failed without a 2xx: http, timeout, connect, tls, dns, address... (null on success). */
  readonly errorKind: string | null
  readonly error: string | null
}

export type HookAttemptDetail = HookAttempt & {
  /** The start of the receiver's answer, at most RESPONSE_EXCERPT_CHARS characters. */
  readonly response: string | null
}

export type HookDelivery<A extends HookAttempt = HookAttempt> = {
  /** The delivery id: the webhook-id (and Service-Delivery) the receiver saw, the same on every attempt. */
  readonly id: string
  readonly subscriptionId: string
  readonly eventId: string
  readonly event: string
  /** pending (due, or in its retry schedule), held (the subscription may not receive now), succeeded, failed. */
  readonly status: "pending" | "held" | "succeeded" | "failed"
  readonly heldReason: string | null
  readonly createdAt: string
  readonly attemptCount: number
  readonly lastAttemptAt: string | null
  readonly nextAttemptAt: string | null
  readonly finishedAt: string | null
  /** The latest attempts, oldest first. */
  readonly attempts: ReadonlyArray<A>
}

/** A page position: created_at as PostgreSQL writes it (microseconds kept) and the id. */
export type DeliveryPosition = { readonly createdAt: string; readonly id: string }

type Row = {
  id: string
  subscription_id: string
  event_id: string
  event: string
  state: HookDelivery["status"]
  held_reason: string | null
  created_at: Date
  ts: string
  attempts: number
  last_attempt_at: Date | null
  next_attempt_at: Date | null
  leased: boolean
  finished_at: Date | null
}

type AttemptRow = StoredAttempt & { delivery_id: string }

// The epoch is Send Again's "at once" (deliveries.ts): shown as due now, when it is.
const SELECT = `select d.id::text, d.subscription_id::text, d.event_id::text, d.event, d.state, d.held_reason, d.created_at,
  d.created_at::text as ts, d.attempts, d.last_attempt_at,
  case when d.next_attempt_at > 'epoch' then d.next_attempt_at when d.next_attempt_at is not null then now() end as next_attempt_at,
  (d.leased_by is not null and d.lease_until > now()) as leased, d.finished_at
  from service.webhook_deliveries d`

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

const attemptOf = (a: AttemptRow): HookAttempt => ({
  number: a.number,
  startedAt: a.started_at.toISOString(),
  durationMs: a.duration_ms,
  status: a.status,
  errorKind: a.error_kind,
  error: a.error
})

const deliveryOf = <A extends HookAttempt>(r: Row, attempts: ReadonlyArray<A>): HookDelivery<A> => ({
  id: r.id,
  subscriptionId: r.subscription_id,
  eventId: r.event_id,
  event: r.event,
  status: r.state,
  heldReason: r.held_reason,
  createdAt: r.created_at.toISOString(),
  attemptCount: r.attempts,
  lastAttemptAt: iso(r.last_attempt_at),
  nextAttemptAt: r.state === "pending" && !r.leased ? iso(r.next_attempt_at) : null,
  finishedAt: iso(r.finished_at),
  attempts
})

/** The latest `n` attempts of each delivery, oldest first. */
const latestAttempts = (ids: ReadonlyArray<string>, n: number) =>
  ids.length === 0
    ? Effect.succeed(new Map<string, Array<AttemptRow>>())
    : query((sql) =>
        sql.unsafe<AttemptRow[]>(
          `select delivery_id::text, number, started_at, duration_ms, status, error, error_kind, response_snippet from (
             select a.*, row_number() over (partition by a.delivery_id order by a.number desc) as rn
             from service.webhook_attempts a where a.delivery_id = any($1::uuid[])) x
           where rn <= $2 order by x.delivery_id, x.number`,
          [ids, n]
        )
      ).pipe(
        Effect.map((rows) => {
          const by = new Map<string, Array<AttemptRow>>()
          for (const a of rows) {
            const list = by.get(a.delivery_id) ?? []
            list.push(a)
            by.set(a.delivery_id, list)
          }
          return by
        })
      )

export type DeliveriesQuery = {
  readonly limit?: number | undefined
  readonly after?: DeliveryPosition | undefined
  readonly status?: DeliveryStatusFilter | undefined
  /** Canonical UTC timestamps (the API's date parameters decoded). */
  readonly createdAfter?: string | undefined
  readonly createdBefore?: string | undefined
}

/**
 * GET /api/v1/hooks/{id}/deliveries: newest first; `next` is the position to continue after
 * when there is more (the API makes it a cursor). `pending` takes held ones too: not finished.
 */
export const listHookDeliveries = Effect.fn("listHookDeliveries")(function* (
  key: HookKey,
  id: unknown,
  q: DeliveriesQuery
) {
  yield* withWebhooks(key, false)
  const sub = yield* own(key, id)
  const limit = Math.min(Math.max(Math.trunc(q.limit ?? DEFAULT_DELIVERIES_LIMIT), 1), 200)
  const states =
    q.status === undefined ? null : q.status === "pending" ? ["pending", "held"] : ([q.status] as Array<string>)
  // Positions go as text: a timestamptz parameter would pass through a JS Date and lose its microseconds.
  const rows = yield* query((sql) =>
    sql.unsafe<Row[]>(
      `${SELECT} where d.subscription_id = $1
         and ($2::text[] is null or d.state = any($2::text[]))
         and ($3::text is null or d.created_at > $3::text::timestamptz)
         and ($4::text is null or d.created_at < $4::text::timestamptz)
         and ($5::text is null or (d.created_at, d.id) < ($5::text::timestamptz, $6::uuid))
       order by d.created_at desc, d.id desc limit $7`,
      [
        sub.id,
        states,
        q.createdAfter ?? null,
        q.createdBefore ?? null,
        q.after?.createdAt ?? null,
        q.after?.id ?? null,
        limit + 1
      ]
    )
  )
  const page = rows.slice(0, limit)
  const attempts = yield* latestAttempts(
    page.map((r) => r.id),
    LIST_ATTEMPTS
  )
  const last = page[page.length - 1]
  return {
    data: page.map((r) => deliveryOf(r, (attempts.get(r.id) ?? []).map(attemptOf))),
    next: rows.length > limit && last ? ({ createdAt: last.ts, id: last.id } satisfies DeliveryPosition) : null
  }
})

/** One delivery of the key's subscription; any other (another subscription's, malformed) is 404. */
const ownDelivery = Effect.fn("ownDelivery")(function* (subscriptionId: string, deliveryId: unknown) {
  if (!isUuid(deliveryId)) return yield* notFound("no such delivery")
  const [r] = yield* query((sql) =>
    sql.unsafe<Row[]>(`${SELECT} where d.id = $1 and d.subscription_id = $2`, [
      deliveryId.toLowerCase(),
      subscriptionId
    ])
  )
  if (!r) return yield* notFound("no such delivery")
  return r
})

const detail = Effect.fn("hookDeliveryDetail")(function* (r: Row) {
  const attempts = yield* latestAttempts([r.id], DELIVERY_ATTEMPTS)
  return deliveryOf<HookAttemptDetail>(
    r,
    (attempts.get(r.id) ?? []).map((a) => ({ ...attemptOf(a), response: excerpt(a.response_snippet) }))
  )
})

/** GET /api/v1/hooks/{id}/deliveries/{deliveryId}: with its latest attempts and an excerpt of each answer. */
export const getHookDelivery = Effect.fn("getHookDelivery")(function* (key: HookKey, id: unknown, deliveryId: unknown) {
  yield* withWebhooks(key, false)
  const sub = yield* own(key, id)
  return yield* detail(yield* ownDelivery(sub.id, deliveryId))
})

/**
 * POST /api/v1/hooks/{id}/deliveries/{deliveryId}/resend: Send Again, as an admin's (same
 * delivery id, at once), logged as the key's. Only while the key may read the event's
 * records; a delivery the subscription may not receive now, or one on the wire, is 409.
 */
export const resendHookDelivery = Effect.fn("resendHookDelivery")(function* (
  key: HookKey,
  id: unknown,
  deliveryId: unknown
) {
  const rights = yield* withWebhooks(key, false)
  const sub = yield* own(key, id)
  yield* requireReadable(rights, sub.event as EventKind)
  const r = yield* ownDelivery(sub.id, deliveryId)
  // Read in the resend's transaction: the answer is the delivery as resent (pending), not
  // whatever the engine made of it a moment after the commit.
  return yield* transaction(
    Effect.gen(function* () {
      yield* resendDelivery({ kind: "key", keyId: key.keyId }, { id: r.id, companyId: key.companyId })
      return yield* detail(yield* ownDelivery(sub.id, r.id))
    })
  )
})

/** A recovery as the key that started it sees it: its subscription's replay, its counts and progress. */
export type HookRecovery = {
  /** null: nothing to send, so no job was made. */
  readonly id: string | null
  readonly subscriptionId: string
  readonly state: ReplayState
  readonly since: string
  readonly until: string
  readonly createdAt: string
  readonly finishedAt: string | null
  /** Events of the subscription in the range. */
  readonly matched: number
  /** Deliveries it sends (again, under their own ids, or made for events never sent). */
  readonly queued: number
  /** Delivered already: not sent again. */
  readonly skippedDelivered: number
  /** Being attempted when it was made: left to the engine. */
  readonly skippedInFlight: number
  readonly progress: {
    readonly sent: number
    readonly inEngine: number
    readonly skipped: number
    readonly remaining: number
  }
  /** Why it sends nothing now (the subscription is off, another replay of it runs first), else null. */
  readonly waiting: string | null
}

const recoveryOf = (r: ReplayView): HookRecovery => ({
  id: r.id,
  subscriptionId: r.destination.id,
  state: r.state,
  since: r.since,
  until: r.until,
  createdAt: r.createdAt,
  finishedAt: r.finishedAt,
  matched: r.plan.matched,
  queued: r.progress.queued,
  skippedDelivered: r.plan.skippedDelivered,
  skippedInFlight: r.plan.skippedInFlight,
  progress: {
    sent: r.progress.sent,
    inEngine: r.progress.inEngine,
    skipped: r.progress.skipped,
    remaining: r.progress.remaining
  },
  // Not another replay's id: that may be an admin's.
  waiting:
    r.waiting === null
      ? null
      : r.destination.on
        ? "another replay of this subscription runs first"
        : "the subscription is turned off: it goes on once it is turned on"
})

/** When `since` is a date the API takes and at most RECOVER_WINDOW_DAYS back from `now`; else the 400's message. Pure. */
export const recoverSince = (
  since: unknown,
  now: Date
): { readonly ok: true; readonly since: Date } | { readonly ok: false; readonly message: string } => {
  if (typeof since !== "string" || since.trim() === "")
    return { ok: false, message: `since is required: ${FILTER_DATE_FORMATS}` }
  const d = parseFilterDate(since.trim())
  if (d === undefined)
    return { ok: false, message: `since must be ${FILTER_DATE_FORMATS}, not ${JSON.stringify(since.slice(0, 60))}` }
  const at = new Date(d.epochMillis)
  if (at.getTime() < now.getTime() - RECOVER_WINDOW_DAYS * 86_400_000)
    return {
      ok: false,
      message: `since must be within the last ${RECOVER_WINDOW_DAYS} days (events are kept ${RECOVER_WINDOW_DAYS} days)`
    }
  if (at.getTime() >= now.getTime()) return { ok: false, message: "since must be in the past" }
  return { ok: true, since: at }
}

/**
 * POST /api/v1/hooks/{id}/recover: every event of the subscription since `since` (not before
 * it was made) that failed or never went is sent again, under its delivery's own id, by a
 * replay on the replay lane at REPLAY_RATE. Only while the key may read the event's records;
 * one recovery of a subscription runs at a time (409 while one does). The subscription's row
 * is locked meanwhile, so two requests at once make one job.
 */
export const recoverHook = Effect.fn("recoverHook")(function* (key: HookKey, id: unknown, body: unknown) {
  const rights = yield* withWebhooks(key, false)
  const sub = yield* own(key, id)
  yield* requireReadable(rights, sub.event as EventKind)
  const input =
    typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {}
  const [clock] = yield* query((sql) => sql<{ now: Date }[]>`select now()`)
  const checked = recoverSince(input.since, clock!.now)
  if (!checked.ok) return yield* invalid(checked.message, { field: "since" })
  const since = new Date(Math.max(checked.since.getTime(), sub.created_at.getTime()))
  return yield* transaction(
    Effect.gen(function* () {
      yield* query((tx) => tx`select 1 from service.webhook_subscriptions where id = ${sub.id} for no key update`)
      const [running] = yield* query(
        (tx) => tx<{ id: string }[]>`
        select id::text from service.webhook_replays
        where subscription_id = ${sub.id} and key_id = ${key.keyId} and state = 'running' limit 1`
      )
      if (running)
        return yield* conflict(
          `a recovery of this subscription is running (${running.id}); follow it at GET /api/v1/replays/${running.id}`
        )
      const summary = yield* replay({
        subscriptionId: sub.id,
        since,
        until: clock!.now,
        failedOnly: true,
        dryRun: false,
        actor: { kind: "key", keyId: key.keyId },
        companyId: key.companyId,
        source: "api",
        keyId: key.keyId
      })
      if (summary.replayId !== null) return recoveryOf(yield* getReplay({ id: summary.replayId }))
      return {
        id: null,
        subscriptionId: sub.id,
        state: "finished",
        since: summary.since,
        until: summary.until,
        createdAt: clock!.now.toISOString(),
        finishedAt: clock!.now.toISOString(),
        matched: summary.matched,
        queued: 0,
        skippedDelivered: summary.skippedDelivered,
        skippedInFlight: summary.skippedInFlight,
        progress: { sent: 0, inEngine: 0, skipped: 0, remaining: 0 },
        waiting: null
      } satisfies HookRecovery
    })
  )
})

/** GET /api/v1/replays/{id}: a recovery this key started; any other replay is 404. */
export const getHookRecovery = Effect.fn("getHookRecovery")(function* (key: HookKey, id: unknown) {
  yield* withWebhooks(key, false)
  if (!isUuid(id)) return yield* notFound("no such replay")
  const [r] = yield* query(
    (sql) => sql<{ id: string }[]>`
    select id::text from service.webhook_replays where id = ${id.toLowerCase()} and key_id = ${key.keyId}`
  )
  if (!r) return yield* notFound("no such replay")
  return recoveryOf(yield* getReplay({ id: r.id, companyId: key.companyId }))
})
