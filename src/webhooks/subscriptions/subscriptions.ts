// The webhooks page's view of subscriptions keys made through the API: list, turn off or on,
// delete (docs/events.md#destinations). Deleting drops its pending deliveries too.
import { Effect } from "effect"
import { requireCompanyId, requireId } from "../../domain/ids.ts"
import { deleteRecorded } from "../endpoints/endpoints.ts"
import { wakeDelivery } from "../engine/wake.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import { checked, type Ordering } from "../endpoints/validate.ts"
import { circuitColumn, circuitView, type CircuitView } from "../endpoints/circuit.ts"
import { notFound } from "../../domain/errors.ts"
import { raiseAlerts } from "../alerts/raise.ts"
import { loadMailSettings } from "../alerts/mail.ts"
import type { Filter } from "../../domain/filters/filter.ts"
import type { PayloadMode } from "../net/body.ts"

export type SubscriptionView = {
  readonly id: string
  readonly companyId: string
  readonly keyId: string
  readonly keyName: string | null
  readonly url: string
  readonly event: string
  readonly active: boolean
  readonly createdAt: string
  readonly updatedAt: string
  /** Deliveries per second at most; null: no limit. */
  readonly rateLimit: number | null
  /** "record": events of one record arrive in the order they happened; "none": no order. */
  readonly ordering: Ordering
  /** Its circuit breaker: closed, or open after timeouts or refused connections in a row. */
  readonly circuit: CircuitView
  /** Its content filter; null: every event. */
  readonly filter: Filter | null
  readonly payload: PayloadMode
}

type Row = {
  id: string
  company_id: string
  key_id: string
  key_name: string | null
  url: string
  event: string
  active: boolean
  created_at: Date
  updated_at: Date
  rate_limit: number | null
  ordering: Ordering
  circuit: unknown
  filter: Filter | null
  payload: PayloadMode
}

const SELECT = `select s.id::text, s.company_id::text, s.key_id::text, k.name as key_name, s.url, s.event, s.active, s.created_at, s.updated_at,
    s.rate_limit, s.ordering, ${circuitColumn("subscription", "s.id")}, s.filter, s.payload
  from service.webhook_subscriptions s left join service.api_keys k on k.id = s.key_id`

const view = (r: Row): SubscriptionView => ({
  id: r.id,
  companyId: r.company_id,
  keyId: r.key_id,
  keyName: r.key_name,
  url: r.url,
  event: r.event,
  active: r.active,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  rateLimit: r.rate_limit,
  ordering: r.ordering,
  circuit: circuitView(r.circuit),
  filter: r.filter,
  payload: r.payload
})

export const listSubscriptions = Effect.fn("listSubscriptions")(function* (input: {
  readonly companyId: string
  readonly keyId?: string | undefined
}) {
  const companyId = yield* checked(() => requireCompanyId(input.companyId))
  const keyId = input.keyId === undefined ? undefined : yield* checked(() => requireId(input.keyId, "key"))
  const rows = yield* query((sql) =>
    keyId === undefined
      ? sql.unsafe<Row[]>(`${SELECT} where s.company_id = $1 order by s.created_at desc, s.id desc`, [companyId])
      : sql.unsafe<Row[]>(`${SELECT} where s.company_id = $1 and s.key_id = $2 order by s.created_at desc, s.id desc`, [
          companyId,
          keyId
        ])
  )
  return rows.map(view)
})

type Target = { readonly id: string; readonly companyId?: string | undefined }

const load = Effect.fn("loadSubscription")(function* (target: Target) {
  const id = yield* checked(() => requireId(target.id, "subscription"))
  const [r] = yield* query((sql) => sql.unsafe<Row[]>(`${SELECT} where s.id = $1`, [id]))
  if (!r || (target.companyId !== undefined && r.company_id !== target.companyId.toLowerCase()))
    return yield* notFound(`no subscription ${id}`)
  return r
})

const setActive = Effect.fn("setSubscriptionActive")(function* (actor: Actor, target: Target, active: boolean) {
  const current = yield* load(target)
  return yield* transaction(
    Effect.gen(function* () {
      const r = yield* query(
        (tx) => tx`update service.webhook_subscriptions set active = ${active}, updated_at = now()
        where id = ${current.id} and active <> ${active} returning id`
      )
      const [now] = yield* query((tx) => tx.unsafe<Row[]>(`${SELECT} where s.id = $1`, [current.id]))
      if (!now) return yield* notFound(`no subscription ${current.id}`)
      // Already so: nothing changed, and nothing is logged as a change (repeating is harmless).
      if (r.length === 0) return view(now)
      yield* writeActivity({
        companyId: current.company_id,
        actor,
        kind: active ? "subscription.enabled" : "subscription.disabled",
        subjectId: current.id,
        details: { keyId: current.key_id, url: current.url, event: current.event }
      })
      if (active) yield* wakeDelivery
      else {
        // Turned off by an admin: its key hears of it (docs/events.md#failure-alerts).
        const mail = (yield* loadMailSettings.pipe(Effect.orElseSucceed(() => null))) !== null
        const by = actor.kind === "user" ? (actor.email ?? "an admin") : "an operator"
        yield* query((tx) =>
          raiseAlerts(
            tx,
            [
              {
                kind: "webhook.switched_off",
                endpointId: null,
                subscriptionId: current.id,
                lastError: null,
                lastAttemptAt: null,
                by
              }
            ],
            { mail }
          )
        )
      }
      return view(now)
    })
  )
})

/** Turns a subscription off: it gets nothing until turned on; its pending deliveries rest. */
export const disableSubscription = (actor: Actor, target: Target) => setActive(actor, target, false)

export const enableSubscription = (actor: Actor, target: Target) => setActive(actor, target, true)

export const deleteSubscription = Effect.fn("deleteSubscription")(function* (actor: Actor, target: Target) {
  const current = yield* load(target)
  yield* deleteRecorded("webhook_subscriptions", current, actor, "subscription.deleted", {
    keyId: current.key_id,
    url: current.url,
    event: current.event,
    reason: "deleted by an admin"
  })
})
