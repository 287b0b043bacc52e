// The webhook operations as one Effect service, for the API handlers, the admin HTTP API
// and the CLI. Each fails with a DomainError; anything else is a defect. The service holds
// the Sql it was built with, so its callers need only `Webhooks`.
import { Context, Effect, Layer } from "effect"
import { Sql, type SqlShape } from "../platform/db/Sql.ts"
import type { DomainError } from "../domain/errors.ts"
import { WebhookSettings, WebhookSettingsLive } from "./engine/settings.ts"
import { listActivity } from "../access/activity.ts"
import type { WebhookDeps } from "./engine/settings.ts"
import { deliveryHealth } from "./deliveries/health.ts"
import { getDelivery, listEndpointDeliveries, replayFailed, resendDelivery } from "./deliveries/deliveries.ts"
import {
  createEndpoint,
  deleteEndpoint,
  enableEndpoint,
  getEndpoint,
  listEndpoints,
  offeredEvents,
  rotateEndpointSecret,
  updateEndpoint
} from "./endpoints/endpoints.ts"
import { createHook, deleteHook, getHook, listHooks } from "./subscriptions/hooks.ts"
import { createHookOnce } from "./subscriptions/idempotency.ts"
import {
  getHookDelivery,
  getHookRecovery,
  listHookDeliveries,
  recoverHook,
  resendHookDelivery
} from "./subscriptions/hook-deliveries.ts"
import { testEndpoint } from "./endpoints/ping.ts"
import { testHook } from "./subscriptions/hook-test.ts"
import {
  deleteSubscription,
  disableSubscription,
  enableSubscription,
  listSubscriptions
} from "./subscriptions/subscriptions.ts"

export const makeWebhooks = (deps: WebhookDeps, sql: SqlShape) => {
  /** The operation on the service's database. */
  const b =
    <Args extends ReadonlyArray<unknown>, A>(op: (...args: Args) => Effect.Effect<A, DomainError, Sql>) =>
    (...args: Args): Effect.Effect<A, DomainError> =>
      Effect.provideService(op(...args), Sql, sql)
  /** ... with the settings too (the secrets key, the address guard's). */
  const d = <Args extends ReadonlyArray<unknown>, A>(
    op: (deps: WebhookDeps, ...args: Args) => Effect.Effect<A, DomainError, Sql>
  ) => b((...args: Args) => op(deps, ...args))
  return {
    // admin: endpoints
    createEndpoint: d(createEndpoint),
    updateEndpoint: d(updateEndpoint),
    rotateEndpointSecret: d(rotateEndpointSecret),
    deleteEndpoint: b(deleteEndpoint),
    enableEndpoint: b(enableEndpoint),
    testEndpoint: d(testEndpoint),
    getEndpoint: b(getEndpoint),
    listEndpoints: b(listEndpoints),
    offeredEvents: b(offeredEvents),
    // admin: deliveries
    listEndpointDeliveries: b(listEndpointDeliveries),
    getDelivery: b(getDelivery),
    resendDelivery: b(resendDelivery),
    replayFailed: b(replayFailed),
    deliveryHealth: b(deliveryHealth),
    // admin: subscriptions made through the API
    listSubscriptions: b(listSubscriptions),
    disableSubscription: b(disableSubscription),
    enableSubscription: b(enableSubscription),
    deleteSubscription: b(deleteSubscription),
    // API: /api/v1/hooks
    createHook: d(createHook),
    listHooks: b(listHooks),
    getHook: b(getHook),
    deleteHook: b(deleteHook),
    createHookOnce: d(createHookOnce),
    // API: a key's own deliveries and their recovery
    listHookDeliveries: b(listHookDeliveries),
    getHookDelivery: b(getHookDelivery),
    resendHookDelivery: b(resendHookDelivery),
    recoverHook: b(recoverHook),
    getHookRecovery: b(getHookRecovery),
    testHook: d(testHook),
    listActivity: b(listActivity)
  }
}

export type WebhooksShape = ReturnType<typeof makeWebhooks>

export class Webhooks extends Context.Service<Webhooks, WebhooksShape>()("service/Webhooks") {}

/** The operations over the service's Sql, configured like the engine (secrets key checked, allowed networks). */
export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function* () {
    const sql = yield* Sql
    const settings = yield* WebhookSettings
    return makeWebhooks({ secretsKey: settings.secretsKey.key, allowed: settings.allowed }, sql)
  })
).pipe(Layer.provide(WebhookSettingsLive))

/** The operations with these settings over the Sql in context (tests, tools). */
export const webhooksLayer = (deps: WebhookDeps) =>
  Layer.effect(
    Webhooks,
    Effect.map(Sql, (sql) => makeWebhooks(deps, sql))
  )
