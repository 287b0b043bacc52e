// /api/v1/hooks: a key's own webhook subscriptions (docs/api.md#webhook-subscriptions: its rules and shapes).
// The key's rights are read from the database in the same transaction as the change, so a
// subscription never outlives what the key could read when it was made.
import { Effect } from "effect"
import { keySecretContext } from "../../platform/db/channels.ts"
import { decryptSecret, encryptSecret } from "../../platform/secrets/secrets-key.ts"
import { newSecret } from "../net/signature.ts"
import { ALERT_KINDS, EVENT_KINDS, EVENT_RESOURCE, isAlertKind, type WebhookEvent } from "../../domain/event-kinds.ts"
import { isUuid } from "../../domain/ids.ts"
import { writeActivity } from "../../access/activity.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { forbidden, invalid, notFound, unauthorized } from "../../domain/errors.ts"
import {
  checked,
  checkUrl,
  parseDestinationFilter,
  parseEvent,
  parseOrdering,
  parsePayloadMode,
  parseRateLimit,
  type Ordering
} from "../endpoints/validate.ts"
import type { Filter } from "../../domain/filters/filter.ts"
import type { PayloadMode } from "../net/body.ts"

export const MAX_SUBSCRIPTIONS_PER_KEY = 50

/** The calling key, as the API's authentication found it (CurrentKey fits this shape). */
export type HookKey = { readonly keyId: string; readonly companyId: string }

/** A subscription as the API shows it (docs/api.md#webhook-subscriptions). */
export type HookRecord = {
  readonly id: string
  /** Equals the event name. */
  readonly name: string
  readonly url: string
  readonly event: string
  readonly active: boolean
  readonly createdAt: string
  /** Deliveries per second at most: only when the subscriber set one (the record is otherwise as it always was). */
  readonly rateLimit?: number
  /** "record" (events of one record arrive in the order they happened): only when set. */
  readonly ordering?: "record"
  /** The content filter: only when set (docs/events.md#content-filters). */
  readonly filter?: Filter
  /** "thin": only when set (docs/events.md#thin-payloads). */
  readonly payload?: "thin"
}

export type CreatedHook = HookRecord & { readonly secret: string }

export type SubRow = {
  id: string
  url: string
  event: string
  active: boolean
  created_at: Date
  rate_limit: number | null
  ordering: Ordering
  filter: Filter | null
  payload: PayloadMode
}

const SUB_COLUMNS = "id::text, url, event, active, created_at, rate_limit, ordering, filter, payload"

const record = (r: SubRow): HookRecord => ({
  id: r.id,
  name: r.event,
  url: r.url,
  event: r.event,
  active: r.active,
  createdAt: r.created_at.toISOString(),
  ...(r.rate_limit !== null ? { rateLimit: r.rate_limit } : {}),
  ...(r.ordering === "record" ? { ordering: "record" as const } : {}),
  ...(r.filter !== null ? { filter: r.filter } : {}),
  ...(r.payload === "thin" ? { payload: "thin" as const } : {})
})

export type KeyRights = {
  webhooks: boolean
  usable: boolean
  scopes: ReadonlyArray<string>
  modules: ReadonlyArray<string>
  readable: ReadonlyArray<string>
}

/** The key's webhooks permission and what it can read now (its scopes whose module is on). */
const rights = Effect.fn("keyRights")(function* (key: HookKey, lock: boolean) {
  // The key is checked again here, not only by the API's (cached) authentication: a key
  // revoked a moment ago gets 401 on its very next request, as on every other path.
  if (!isUuid(key.keyId)) return yield* unauthorized("unknown key")
  const rows = yield* query((sql) =>
    sql.unsafe<
      {
        webhooks: boolean
        usable: boolean
        scopes: string[]
        modules: string[] | null
        tier: string | null
        api_enabled: boolean | null
        company_id: string
      }[]
    >(
      `select k.webhooks, (k.revoked_at is null and (k.expires_at is null or k.expires_at > now())) as usable, k.scopes,
         k.company_id::text, c.modules, c.tier, c.api_enabled
       from service.api_keys k left join service.companies c on c.id = k.company_id
       where k.id = $1${lock ? " for update of k" : ""}`,
      [key.keyId]
    )
  )
  const k = rows[0]
  if (!k || k.company_id !== key.companyId.toLowerCase()) return yield* unauthorized("unknown key")
  if (!k.usable) return yield* unauthorized("this key is revoked or expired")
  if (k.tier !== "company") return yield* forbidden("webhooks belong to the Company tier")
  if (k.api_enabled !== true) return yield* forbidden("the API is turned off for this company")
  const modules = k.modules ?? []
  return {
    webhooks: k.webhooks,
    usable: true,
    scopes: k.scopes,
    modules,
    readable: k.scopes.filter((s) => modules.includes(s))
  } satisfies KeyRights
})

/** 403 unless the key may read the event's records: its scope first, then the module, as GET says. */
export const requireReadable = (r: KeyRights, event: WebhookEvent) => {
  // An alert is about the key's own subscriptions: the webhooks permission is all it needs.
  if (isAlertKind(event)) return Effect.void
  const resource = EVENT_RESOURCE[event]
  if (!r.scopes.includes(resource))
    return Effect.fail(forbidden(`this key cannot read ${resource}, the records of ${event}`))
  if (!r.modules.includes(resource))
    return Effect.fail(forbidden(`the ${resource} module is turned off for this company`))
  return Effect.void
}

const requireWebhooks = (r: KeyRights) =>
  r.webhooks ? Effect.void : Effect.fail(forbidden("this key does not have the webhooks permission"))

/** The key's rights, refused (403) without the webhooks permission. */
export const withWebhooks = (key: HookKey, lock: boolean) => Effect.tap(rights(key, lock), requireWebhooks)

/** Events whose records the key can read, in EVENT_KINDS order (docs/events.md#event-kinds), then the alerts. */
export const subscribableEvents = (readable: ReadonlyArray<string>): ReadonlyArray<string> => [
  ...EVENT_KINDS.filter((e) => readable.includes(EVENT_RESOURCE[e])),
  ...ALERT_KINDS
]

/** The key's secret, made on its first subscription (one per key, rule 6). */
export const keySecret = Effect.fn("keySecret")(function* (deps: WebhookDeps, keyId: string) {
  const [existing] = yield* query(
    (tx) => tx<{ secret: Buffer }[]>`select secret from service.webhook_key_secrets where key_id = ${keyId}`
  )
  if (existing) return decryptSecret(deps.secretsKey, existing.secret, keySecretContext(keyId))
  const secret = newSecret()
  yield* query(
    (tx) =>
      tx`insert into service.webhook_key_secrets (key_id, secret) values (${keyId}, ${encryptSecret(deps.secretsKey, secret, keySecretContext(keyId))})`
  )
  return secret
})

/**
 * POST /api/v1/hooks. `created` is false when the key already had this url and event: the
 * existing subscription is returned (a subscriber may safely retry), with the secret, as
 * the answer to subscribing always carries it. A subscribe that succeeds leaves the
 * subscription on (rule 3 of docs/api.md#webhook-subscriptions), so repeating it turns back on one an admin
 * turned off; the `rateLimit` and `ordering` it gives replace the subscription's, those it leaves out stay.
 */
export const createHook = Effect.fn("createHook")(function* (deps: WebhookDeps, key: HookKey, body: unknown) {
  yield* withWebhooks(key, false)
  if (typeof body !== "object" || body === null || Array.isArray(body))
    return yield* invalid('the body must be a JSON object {"url": ..., "event": ...}')
  const input = body as Record<string, unknown>
  const event = yield* checked(() => parseEvent(input.event))
  const rateLimit = input.rateLimit === undefined ? undefined : yield* checked(() => parseRateLimit(input.rateLimit))
  const ordering = input.ordering === undefined ? undefined : yield* checked(() => parseOrdering(input.ordering))
  const payload = input.payload === undefined ? undefined : yield* checked(() => parsePayloadMode(input.payload))
  const filter =
    input.filter === undefined ? undefined : yield* checked(() => parseDestinationFilter(input.filter, [event]))
  if (typeof input.url !== "string" || input.url.trim() === "")
    return yield* invalid("url must be an https:// address", { field: "url" })
  const url = yield* checkUrl(deps, input.url)
  const actor = { kind: "key", keyId: key.keyId } as const
  return yield* transaction(
    Effect.gen(function* () {
      // The key row lock serialises one key's subscribes, so the limit of 50 holds under races.
      const r = yield* withWebhooks(key, true)
      yield* requireReadable(r, event)
      const [existing] = yield* query((tx) =>
        tx.unsafe<SubRow[]>(
          `select ${SUB_COLUMNS} from service.webhook_subscriptions where key_id = $1 and url = $2 and event = $3`,
          [key.keyId, url, event]
        )
      )
      if (existing) {
        let row: SubRow | undefined = existing
        const changed =
          (rateLimit !== undefined && rateLimit !== existing.rate_limit) ||
          (ordering !== undefined && ordering !== existing.ordering) ||
          (payload !== undefined && payload !== existing.payload) ||
          (filter !== undefined && JSON.stringify(filter) !== JSON.stringify(existing.filter))
        if (changed) {
          ;[row] = yield* query((tx) =>
            tx.unsafe<SubRow[]>(
              `update service.webhook_subscriptions set rate_limit = case when $2::boolean then $3::float8 else rate_limit end,
                 ordering = coalesce($4, ordering), payload = coalesce($5, payload),
                 filter = case when $6::boolean then $7::text::jsonb else filter end, updated_at = now()
               where id = $1 returning ${SUB_COLUMNS}`,
              [
                existing.id,
                rateLimit !== undefined,
                rateLimit ?? null,
                ordering ?? null,
                payload ?? null,
                filter !== undefined,
                filter == null ? null : JSON.stringify(filter)
              ]
            )
          )
          yield* writeActivity({
            companyId: key.companyId,
            actor,
            kind: "subscription.updated",
            subjectId: existing.id,
            details: {
              ...(row!.rate_limit !== existing.rate_limit ? { rateLimit: row!.rate_limit } : {}),
              ...(row!.ordering !== existing.ordering ? { ordering: row!.ordering } : {}),
              ...(row!.payload !== existing.payload ? { payload: row!.payload } : {}),
              ...(JSON.stringify(row!.filter) !== JSON.stringify(existing.filter) ? { filter: row!.filter } : {}),
              reason: "subscribed again"
            }
          })
        }
        if (!existing.active) {
          ;[row] = yield* query((tx) =>
            tx.unsafe<SubRow[]>(
              `update service.webhook_subscriptions set active = true where id = $1 returning ${SUB_COLUMNS}`,
              [existing.id]
            )
          )
          yield* writeActivity({
            companyId: key.companyId,
            actor,
            kind: "subscription.enabled",
            subjectId: existing.id,
            details: { url, event, reason: "subscribed again" }
          })
        }
        return { created: false, subscription: { ...record(row!), secret: yield* keySecret(deps, key.keyId) } }
      }
      const [count] = yield* query(
        (tx) =>
          tx<{ n: number }[]>`select count(*)::int as n from service.webhook_subscriptions where key_id = ${key.keyId}`
      )
      if (count!.n >= MAX_SUBSCRIPTIONS_PER_KEY)
        return yield* invalid(
          `this key already holds ${MAX_SUBSCRIPTIONS_PER_KEY} subscriptions, the most a key may hold`
        )
      const secret = yield* keySecret(deps, key.keyId)
      const [row] = yield* query((tx) =>
        tx.unsafe<SubRow[]>(
          `insert into service.webhook_subscriptions (key_id, company_id, url, event, rate_limit, ordering, payload, filter)
           values ($1, $2, $3, $4, $5, $6, $7, $8::text::jsonb) returning ${SUB_COLUMNS}`,
          [
            key.keyId,
            key.companyId.toLowerCase(),
            url,
            event,
            rateLimit ?? null,
            ordering ?? "none",
            payload ?? "full",
            filter == null ? null : JSON.stringify(filter)
          ]
        )
      )
      yield* writeActivity({
        companyId: key.companyId,
        actor,
        kind: "subscription.created",
        subjectId: row!.id,
        details: {
          url,
          event,
          ...(row!.rate_limit !== null ? { rateLimit: row!.rate_limit } : {}),
          ...(row!.ordering !== "none" ? { ordering: row!.ordering } : {}),
          ...(row!.payload !== "full" ? { payload: row!.payload } : {}),
          ...(row!.filter !== null ? { filter: row!.filter } : {})
        }
      })
      return { created: true, subscription: { ...record(row!), secret } }
    })
  )
})

/** GET /api/v1/hooks: the key's subscriptions, newest first, and what it may subscribe to. */
export const listHooks = Effect.fn("listHooks")(function* (key: HookKey) {
  const r = yield* withWebhooks(key, false)
  const rows = yield* query((sql) =>
    sql.unsafe<SubRow[]>(
      `select ${SUB_COLUMNS} from service.webhook_subscriptions where key_id = $1 order by created_at desc, id desc`,
      [key.keyId]
    )
  )
  return { data: rows.map(record), events: subscribableEvents(r.readable) }
})

export const own = Effect.fn("ownHook")(function* (key: HookKey, id: unknown) {
  if (!isUuid(id)) return yield* notFound("no such subscription")
  const [row] = yield* query((tx) =>
    tx.unsafe<SubRow[]>(`select ${SUB_COLUMNS} from service.webhook_subscriptions where id = $1 and key_id = $2`, [
      id,
      key.keyId
    ])
  )
  if (!row) return yield* notFound("no such subscription")
  return row
})

/** GET /api/v1/hooks/{id}: never the secret. A foreign or missing id is 404 (rule 4). */
export const getHook = Effect.fn("getHook")(function* (key: HookKey, id: unknown) {
  yield* withWebhooks(key, false)
  return record(yield* own(key, id))
})

/** DELETE /api/v1/hooks/{id} (the API answers 204). */
export const deleteHook = Effect.fn("deleteHook")(function* (key: HookKey, id: unknown) {
  yield* withWebhooks(key, false)
  yield* transaction(
    Effect.gen(function* () {
      const row = yield* own(key, id)
      yield* query((tx) => tx`delete from service.webhook_subscriptions where id = ${row.id}`)
      yield* writeActivity({
        companyId: key.companyId,
        actor: { kind: "key", keyId: key.keyId },
        kind: "subscription.deleted",
        subjectId: row.id,
        details: { url: row.url, event: row.event, reason: "unsubscribed" }
      })
    })
  )
})
