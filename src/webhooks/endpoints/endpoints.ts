// Admin-made webhook endpoints: create (secret shown once), update, rotate the secret,
// delete, Turn On, list. Each change is written to the activity log in its transaction.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { endpointSecretContext } from "../../platform/db/channels.ts"
import { originOf } from "../net/origin.ts"
import { encryptSecret } from "../../platform/secrets/secrets-key.ts"
import { newSecret } from "../net/signature.ts"
import { ALERT_KINDS, EVENT_KINDS, EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { requireCompanyId, requireId } from "../../domain/ids.ts"
import { wakeDelivery } from "../engine/wake.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import { forbidden, invalid, notFound } from "../../domain/errors.ts"
import { DEFAULT_OVERLAP, parseOverlap } from "./overlap.ts"
import { resetCircuit } from "../engine/circuits-queries.ts"
import { CLOSED, circuitColumn, circuitView, type CircuitView } from "./circuit.ts"
import {
  checked,
  checkUrl,
  parseEvents,
  parseName,
  parseDestinationFilter,
  parseOrdering,
  parsePayloadMode,
  parseRateLimit,
  requireModulesOn,
  type Ordering
} from "./validate.ts"
import type { Filter } from "../../domain/filters/filter.ts"
import type { WebhookEvent } from "../../domain/event-kinds.ts"
import type { PayloadMode } from "../net/body.ts"

export type EndpointView = {
  readonly id: string
  readonly companyId: string
  readonly name: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  /** false once switched off (or never turned on again). */
  readonly enabled: boolean
  readonly disabledReason: string | null
  readonly disabledAt: string | null
  /** Deliveries in a row that failed every attempt; 15 switches the endpoint off. */
  readonly consecutiveFailures: number
  readonly createdAt: string
  readonly createdBy: string | null
  readonly updatedAt: string
  readonly secretRotatedAt: string | null
  /** Until when the secret the last rotation replaced still signs beside the current one; null when it no longer does. */
  readonly previousSecretExpiresAt: string | null
  /** Deliveries per second at most (live, retries, replays); null: no limit. */
  readonly rateLimit: number | null
  /** "record": events of one record arrive in the order they happened; "none": no order. */
  readonly ordering: Ordering
  /** Its circuit breaker: closed, or open after timeouts or refused connections in a row. */
  readonly circuit: CircuitView
  /** Only events whose data matches it are delivered (docs/events.md#content-filters); null: all. */
  readonly filter: Filter | null
  /** "thin": the body's data is the record's id, company and API address only. */
  readonly payload: PayloadMode
}

/** Deliveries in a row that failed every attempt at which the pages and the activity log warn (sql/019's trigger). */
export const FAILING_WARNING_AT = 10
/** ... and at which the engine switches it off (ENGINE_DEFAULTS.switchOffAfter; docs/events.md#switching-off). */
export const SWITCH_OFF_AT = 15

export type EndpointHealth = "ok" | "failing" | "off"

/** How an endpoint is doing, as the pages show it: failing from the tenth fully failed delivery in a row. */
export const endpointHealth = (e: Pick<EndpointView, "enabled" | "consecutiveFailures">): EndpointHealth =>
  !e.enabled ? "off" : e.consecutiveFailures >= FAILING_WARNING_AT ? "failing" : "ok"

type Row = {
  id: string
  company_id: string
  name: string
  url: string
  events: string[]
  enabled: boolean
  disabled_reason: string | null
  disabled_at: Date | null
  consecutive_failures: number
  created_at: Date
  created_by_email: string | null
  updated_at: Date
  secret_rotated_at: Date | null
  previous_secret_expires_at: Date | null
  rate_limit: number | null
  ordering: Ordering
  circuit: unknown
  filter: Filter | null
  payload: PayloadMode
}

const COLUMNS = `id::text, company_id::text, name, url, events, enabled, disabled_reason, disabled_at,
  consecutive_failures, created_at, created_by_email, updated_at, secret_rotated_at,
  case when previous_secret_expires_at > now() then previous_secret_expires_at end as previous_secret_expires_at,
  rate_limit, ordering, ${circuitColumn("endpoint", "webhook_endpoints.id")}, filter, payload`

const view = (r: Row): EndpointView => ({
  id: r.id,
  companyId: r.company_id,
  name: r.name,
  url: r.url,
  events: r.events,
  enabled: r.enabled,
  disabledReason: r.disabled_reason,
  disabledAt: toIsoUtcOrNull(r.disabled_at),
  consecutiveFailures: r.consecutive_failures,
  createdAt: r.created_at.toISOString(),
  createdBy: r.created_by_email,
  updatedAt: r.updated_at.toISOString(),
  secretRotatedAt: toIsoUtcOrNull(r.secret_rotated_at),
  previousSecretExpiresAt: toIsoUtcOrNull(r.previous_secret_expires_at),
  rateLimit: r.rate_limit,
  ordering: r.ordering,
  circuit: circuitView(r.circuit),
  filter: r.filter,
  payload: r.payload
})

type Company = { id: string; tier: string; modules: string[] }

const companyFor = Effect.fn("companyFor")(function* (companyId: string) {
  const [c] = yield* query(
    (sql) => sql<Company[]>`select id::text, tier, modules from service.companies where id = ${companyId}`
  )
  if (!c) return yield* notFound(`no company ${companyId}`)
  if (c.tier !== "company")
    return yield* forbidden(`webhooks belong to the Company tier; this company is on the ${c.tier} tier`)
  return c
})

/** The events an endpoint of the company may choose now: those of modules it has on (docs/events.md#destinations). */
export const offeredEvents = Effect.fn("offeredEvents")(function* (input: { readonly companyId: string }) {
  const [c] = yield* query(
    (sql) => sql<{ modules: string[] }[]>`select modules from service.companies where id = ${input.companyId}`
  )
  const modules = c?.modules ?? []
  return [...EVENT_KINDS.filter((e) => modules.includes(EVENT_RESOURCE[e])), ...ALERT_KINDS]
})

/** Scoping: an admin of one company sees only its endpoints; the CLI may omit companyId. */
type Target = { readonly id: string; readonly companyId?: string | undefined }

const load = Effect.fn("loadEndpoint")(function* (target: Target) {
  const id = yield* checked(() => requireId(target.id, "endpoint"))
  const [r] = yield* query((sql) =>
    sql.unsafe<Row[]>(`select ${COLUMNS} from service.webhook_endpoints where id = $1`, [id])
  )
  if (!r || (target.companyId !== undefined && r.company_id !== target.companyId.toLowerCase()))
    return yield* notFound(`no endpoint ${id}`)
  return r
})

export type CreateEndpointInput = {
  readonly companyId: string
  readonly name: string
  readonly url: string
  /** Event names, or "a,b". */
  readonly events: ReadonlyArray<string> | string
  /** Deliveries per second at most; absent or null: no limit. */
  readonly rateLimit?: unknown
  /** "record" or "none" (the default). */
  readonly ordering?: unknown
  /** A content filter (an object), or null/absent for none. */
  readonly filter?: unknown
  /** "full" (the default) or "thin". */
  readonly payload?: unknown
}

/** Returns the signing secret once; only its encrypted form is kept. */
export const createEndpoint = Effect.fn("createEndpoint")(function* (
  deps: WebhookDeps,
  actor: Actor,
  input: CreateEndpointInput
) {
  const companyId = yield* checked(() => requireCompanyId(input.companyId))
  const name = yield* checked(() => parseName(input.name))
  const events = yield* checked(() => parseEvents(input.events))
  const rateLimit = input.rateLimit === undefined ? null : yield* checked(() => parseRateLimit(input.rateLimit))
  const ordering = input.ordering === undefined ? "none" : yield* checked(() => parseOrdering(input.ordering))
  const payload = input.payload === undefined ? "full" : yield* checked(() => parsePayloadMode(input.payload))
  const filter = input.filter === undefined ? null : yield* checked(() => parseDestinationFilter(input.filter, events))
  const company = yield* companyFor(companyId)
  yield* checked(() => requireModulesOn(events, company.modules))
  const url = yield* checkUrl(deps, input.url)
  const id = randomUUID()
  const secret = newSecret()
  const blob = encryptSecret(deps.secretsKey, secret, endpointSecretContext(id))
  const row = yield* transaction(
    Effect.gen(function* () {
      const [r] = yield* query((tx) =>
        tx.unsafe<Row[]>(
          `insert into service.webhook_endpoints (id, company_id, name, url, events, secret, created_by, created_by_email,
             rate_limit, ordering, payload, filter)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::text::jsonb) returning ${COLUMNS}`,
          [
            id,
            companyId,
            name,
            url,
            events as Array<string>,
            blob,
            actor.kind === "user" ? actor.id : null,
            actor.kind === "user" ? actor.email : null,
            rateLimit,
            ordering,
            payload,
            filter === null ? null : JSON.stringify(filter)
          ]
        )
      )
      yield* writeActivity({
        companyId,
        actor,
        kind: "endpoint.created",
        subjectId: id,
        details: {
          name,
          url,
          events,
          ...(rateLimit !== null ? { rateLimit } : {}),
          ...(ordering !== "none" ? { ordering } : {}),
          ...(payload !== "full" ? { payload } : {}),
          ...(filter !== null ? { filter } : {})
        }
      })
      return r!
    })
  )
  return { id, secret, endpoint: view(row) }
})

export type UpdateEndpointInput = Target & {
  readonly name?: string | undefined
  readonly url?: string | undefined
  readonly events?: ReadonlyArray<string> | string | undefined
  /** A number, or null to remove the limit; absent: unchanged. */
  readonly rateLimit?: unknown
  /** "record" or "none"; absent: unchanged. */
  readonly ordering?: unknown
  /** A content filter, or null to remove it; absent: unchanged. */
  readonly filter?: unknown
  /** "full" or "thin"; absent: unchanged. */
  readonly payload?: unknown
}

export const updateEndpoint = Effect.fn("updateEndpoint")(function* (
  deps: WebhookDeps,
  actor: Actor,
  input: UpdateEndpointInput
) {
  const current = yield* load(input)
  if (
    input.name === undefined &&
    input.url === undefined &&
    input.events === undefined &&
    input.rateLimit === undefined &&
    input.ordering === undefined &&
    input.filter === undefined &&
    input.payload === undefined
  ) {
    return yield* invalid("nothing to change: give a name, url, events, rateLimit, ordering, filter or payload")
  }
  const name = input.name === undefined ? current.name : yield* checked(() => parseName(input.name))
  const rateLimit = input.rateLimit === undefined ? undefined : yield* checked(() => parseRateLimit(input.rateLimit))
  const ordering = input.ordering === undefined ? undefined : yield* checked(() => parseOrdering(input.ordering))
  let events: ReadonlyArray<string> = current.events
  if (input.events !== undefined) {
    const parsed = yield* checked(() => parseEvents(input.events))
    const company = yield* companyFor(current.company_id)
    yield* checked(() => requireModulesOn(parsed, company.modules))
    events = parsed
  }
  const payload = input.payload === undefined ? undefined : yield* checked(() => parsePayloadMode(input.payload))
  // The filter kept or given must fit the events the endpoint will take.
  const filterInput = input.filter === undefined ? current.filter : input.filter
  const filter =
    filterInput === null
      ? null
      : yield* checked(() => parseDestinationFilter(filterInput, events as ReadonlyArray<WebhookEvent>))
  const url = input.url === undefined ? current.url : yield* checkUrl(deps, input.url)
  return yield* transaction(
    Effect.gen(function* () {
      // Only the fields given are written, against the row as it stands under its lock: two
      // admins changing different fields at once both keep their change.
      const [before] = yield* query(
        (tx) => tx<{ name: string; url: string; events: string[]; rate_limit: number | null; ordering: string }[]>`
        select name, url, events, rate_limit, ordering from service.webhook_endpoints where id = ${current.id} for update`
      )
      if (!before) return yield* notFound(`no endpoint ${current.id}`)
      const given = {
        name: input.name === undefined ? null : name,
        url: input.url === undefined ? null : url,
        events: input.events === undefined ? null : events
      }
      const [r] = yield* query((tx) =>
        tx.unsafe<Row[]>(
          `update service.webhook_endpoints set name = coalesce($2, name), url = coalesce($3, url), events = coalesce($4::text[], events),
             rate_limit = case when $5::boolean then $6::float8 else rate_limit end, ordering = coalesce($7, ordering),
             payload = coalesce($8, payload), filter = case when $9::boolean then $10::text::jsonb else filter end,
             updated_at = now() where id = $1 returning ${COLUMNS}`,
          [
            current.id,
            given.name,
            given.url,
            given.events as Array<string> | null,
            rateLimit !== undefined,
            rateLimit ?? null,
            ordering ?? null,
            payload ?? null,
            input.filter !== undefined,
            filter === null ? null : JSON.stringify(filter)
          ]
        )
      )
      if (!r) return yield* notFound(`no endpoint ${current.id}`)
      const changes: Record<string, unknown> = {}
      if (r.name !== before.name) changes.name = r.name
      if (r.url !== before.url) changes.url = r.url
      if (r.events.join(",") !== before.events.join(",")) changes.events = r.events
      if (r.rate_limit !== before.rate_limit) changes.rateLimit = r.rate_limit
      if (r.ordering !== before.ordering) changes.ordering = r.ordering
      if (r.payload !== current.payload) changes.payload = r.payload
      if (JSON.stringify(r.filter) !== JSON.stringify(current.filter)) changes.filter = r.filter
      if (r.url !== before.url) {
        // Deliveries still to go follow the endpoint to its new receiver, which is tried afresh.
        yield* query((tx) =>
          tx.unsafe(
            `update service.webhook_deliveries set origin = ${originOf("$2::text")} where endpoint_id = $1 and state in ('pending', 'held')`,
            [r.id, r.url]
          )
        )
        const reset = resetCircuit({ endpointId: r.id, subscriptionId: null })
        yield* query((tx) => tx.unsafe(reset.text, reset.params))
      }
      yield* writeActivity({
        companyId: r.company_id,
        actor,
        kind: "endpoint.updated",
        subjectId: r.id,
        details: changes
      })
      return r.url !== before.url ? { ...view(r), circuit: CLOSED } : view(r)
    })
  )
})

export type RotateEndpointInput = Target & {
  /** How long the old secret keeps signing beside the new one: "24h" (the default), "90m", "7d" (the most), "0" for none. */
  readonly overlap?: string | undefined
}

export type RotatedSecret = {
  readonly id: string
  readonly secret: string
  /** Until when the old secret still signs beside the new one; null with no overlap. */
  readonly previousSecretExpiresAt: string | null
}

/**
 * A new secret signs every attempt from now on, retries of older deliveries included
 * (docs/events.md#secret-rotation). During the overlap the old one signs too, so the receiver may switch
 * when it likes; rotating again meanwhile keeps only the secret being replaced.
 */
export const rotateEndpointSecret = Effect.fn("rotateEndpointSecret")(function* (
  deps: WebhookDeps,
  actor: Actor,
  input: RotateEndpointInput
) {
  const overlap = parseOverlap(input.overlap ?? DEFAULT_OVERLAP)
  if (!overlap.ok) return yield* invalid(overlap.error, { field: "overlap" })
  const current = yield* load(input)
  const secret = newSecret()
  const blob = encryptSecret(deps.secretsKey, secret, endpointSecretContext(current.id))
  const until = yield* transaction(
    Effect.gen(function* () {
      // The right-hand `secret` is the one being replaced; it stays encrypted as it was.
      const [r] = yield* query(
        (tx) => tx<{ until: Date | null }[]>`update service.webhook_endpoints set
          previous_secret = case when ${overlap.seconds}::int > 0 then secret end,
          previous_secret_expires_at = case when ${overlap.seconds}::int > 0 then now() + make_interval(secs => ${overlap.seconds}::int) end,
          secret = ${blob}, secret_rotated_at = now(), updated_at = now()
        where id = ${current.id} returning previous_secret_expires_at as until`
      )
      if (!r) return yield* notFound(`no endpoint ${current.id}`)
      const previousSecretExpiresAt = toIsoUtcOrNull(r.until)
      yield* writeActivity({
        companyId: current.company_id,
        actor,
        kind: "endpoint.secret_rotated",
        subjectId: current.id,
        details: { overlapSeconds: overlap.seconds, previousSecretExpiresAt }
      })
      return previousSecretExpiresAt
    })
  )
  return { id: current.id, secret, previousSecretExpiresAt: until } satisfies RotatedSecret
})

/** Deletes the endpoint and its delivery log; pending deliveries go with it. */
export const deleteEndpoint = Effect.fn("deleteEndpoint")(function* (actor: Actor, input: Target) {
  const current = yield* load(input)
  yield* deleteRecorded("webhook_endpoints", current, actor, "endpoint.deleted", {
    name: current.name,
    url: current.url
  })
})

/** Turn On: the endpoint takes events again; deliveries held while it was off resume. */
/**
 * What Turn On offers to send again (docs/events.md#switching-off): the events of the endpoint's kinds from the
 * first one of the failing streak that switched it off (or from when it was switched off)
 * until now, failed only: the streak's failed deliveries with their own ids, and whatever
 * happened while it was off (fan-out made no deliveries for it). A replay of exactly this.
 */
export type ReplayOffer = {
  readonly endpointId: string
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failedOnly: true
}

export type EnabledEndpointView = EndpointView & {
  /** Set when Turn On turned it on (null when it was on already). */
  readonly replayWhatFailed: ReplayOffer | null
}

export const enableEndpoint = Effect.fn("enableEndpoint")(function* (actor: Actor, input: Target) {
  const current = yield* load(input)
  return yield* transaction(
    Effect.gen(function* () {
      // The window before the switch is undone: the streak is the endpoint's failed deliveries
      // since its last success.
      const [w] = yield* query((tx) =>
        current.enabled
          ? tx<{ since: Date; until: Date }[]>`select now() as since, now() as until`
          : tx<{ since: Date; until: Date }[]>`
          select least(coalesce((
              select min(e.created_at) from service.webhook_deliveries d join service.events e on e.id = d.event_id
              where d.endpoint_id = ${current.id} and d.state = 'failed'
                and d.finished_at > coalesce((select max(finished_at) from service.webhook_deliveries
                  where endpoint_id = ${current.id} and state = 'succeeded'), '-infinity')
            ), now()), coalesce(${current.disabled_at}::timestamptz, now())) as since, now() as until`
      )
      const [r] = yield* query((tx) =>
        tx.unsafe<Row[]>(
          `update service.webhook_endpoints set enabled = true, disabled_reason = null, disabled_at = null,
             consecutive_failures = 0, updated_at = now() where id = $1 and not enabled returning ${COLUMNS}`,
          [current.id]
        )
      )
      if (!r) {
        // Already on: nothing changes and nothing is logged (repeating Turn On is harmless).
        const [now] = yield* query((tx) =>
          tx.unsafe<Row[]>(`select ${COLUMNS} from service.webhook_endpoints where id = $1`, [current.id])
        )
        if (!now) return yield* notFound(`no endpoint ${current.id}`)
        return { ...view(now), replayWhatFailed: null } satisfies EnabledEndpointView
      }
      // Turned on once its receiver is fixed: tried afresh, not behind a circuit opened before.
      const reset = resetCircuit({ endpointId: r.id, subscriptionId: null })
      yield* query((tx) => tx.unsafe(reset.text, reset.params))
      const offer: ReplayOffer = {
        endpointId: r.id,
        since: w!.since.toISOString(),
        until: w!.until.toISOString(),
        events: r.events,
        failedOnly: true
      }
      yield* writeActivity({
        companyId: r.company_id,
        actor,
        kind: "endpoint.enabled",
        subjectId: r.id,
        details: {
          previousReason: current.disabled_reason,
          replayWhatFailed: { since: offer.since, until: offer.until }
        }
      })
      yield* wakeDelivery
      return { ...view(r), circuit: CLOSED, replayWhatFailed: offer } satisfies EnabledEndpointView
    })
  )
})

export const getEndpoint = Effect.fn("getEndpoint")(function* (input: Target) {
  return view(yield* load(input))
})

export const listEndpoints = Effect.fn("listEndpoints")(function* (input: { readonly companyId: string }) {
  const companyId = yield* checked(() => requireCompanyId(input.companyId))
  const rows = yield* query((sql) =>
    sql.unsafe<Row[]>(
      `select ${COLUMNS} from service.webhook_endpoints where company_id = $1 order by created_at desc, id desc`,
      [companyId]
    )
  )
  return rows.map(view)
})

/** Deletes an endpoint or a subscription and writes its activity entry, in one transaction. */
export const deleteRecorded = (
  table: "webhook_endpoints" | "webhook_subscriptions",
  row: { readonly id: string; readonly company_id: string },
  actor: Actor,
  kind: string,
  details: Record<string, unknown>
) =>
  transaction(
    Effect.gen(function* () {
      const r = yield* query((tx) => tx`delete from ${tx(`service.${table}`)} where id = ${row.id} returning id`)
      if (r.length === 0)
        return yield* notFound(`no ${table === "webhook_endpoints" ? "endpoint" : "subscription"} ${row.id}`)
      yield* writeActivity({ companyId: row.company_id, actor, kind, subjectId: row.id, details })
    })
  )
