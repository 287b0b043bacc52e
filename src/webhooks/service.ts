// The webhook operations as one Effect service, for the API handlers, the admin HTTP API
// and the CLI. Each fails with a DomainError; anything else is a defect.
import { Context, Effect, Layer } from "effect"
import { Database } from "../platform/db/Database.ts"
import { isDomainError, type DomainError } from "../domain/errors.ts"
import { WebhookSettings, WebhookSettingsLive } from "../delivery/settings.ts"
import { listActivity } from "../access/activity.ts"
import { Sql } from "../platform/db/Sql.ts"
import type { WebhookDeps } from "./context.ts"
import { getDelivery, listEndpointDeliveries, replayFailed, resendDelivery } from "./deliveries.ts"
import { createEndpoint, deleteEndpoint, enableEndpoint, getEndpoint, listEndpoints, offeredEvents, rotateEndpointSecret, updateEndpoint } from "./endpoints.ts"
import { createHook, deleteHook, getHook, listHooks } from "./hooks.ts"
import { testEndpoint } from "./ping.ts"
import { deleteSubscription, disableSubscription, enableSubscription, listSubscriptions } from "./subscriptions.ts"

const lift = <A>(run: () => Promise<A>): Effect.Effect<A, DomainError> =>
  Effect.promise(() =>
    run().then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => {
        if (isDomainError(error)) return { ok: false as const, error }
        throw error
      }
    )
  ).pipe(Effect.flatMap((r) => (r.ok ? Effect.succeed(r.value) : Effect.fail(r.error))))

type Op<Args extends ReadonlyArray<unknown>, A> = (deps: WebhookDeps, ...args: Args) => Promise<A>

const bind =
  (deps: WebhookDeps) =>
  <Args extends ReadonlyArray<unknown>, A>(op: Op<Args, A>) =>
  (...args: Args): Effect.Effect<A, DomainError> =>
    lift(() => op(deps, ...args))

export const makeWebhooks = (deps: WebhookDeps) => {
  const b = bind(deps)
  return {
    // admin: endpoints
    createEndpoint: b(createEndpoint),
    updateEndpoint: b(updateEndpoint),
    rotateEndpointSecret: b(rotateEndpointSecret),
    deleteEndpoint: b(deleteEndpoint),
    enableEndpoint: b(enableEndpoint),
    testEndpoint: b(testEndpoint),
    getEndpoint: b(getEndpoint),
    listEndpoints: b(listEndpoints),
    offeredEvents: b(offeredEvents),
    // admin: deliveries
    listEndpointDeliveries: b(listEndpointDeliveries),
    getDelivery: b(getDelivery),
    resendDelivery: b(resendDelivery),
    replayFailed: b(replayFailed),
    // admin: subscriptions made through the API
    listSubscriptions: b(listSubscriptions),
    disableSubscription: b(disableSubscription),
    enableSubscription: b(enableSubscription),
    deleteSubscription: b(deleteSubscription),
    // API: /api/v1/hooks
    createHook: b(createHook),
    listHooks: b(listHooks),
    getHook: b(getHook),
    deleteHook: b(deleteHook),
    listActivity: (input: Parameters<typeof listActivity>[0]) => Effect.provideService(listActivity(input), Sql, { pool: deps.sql })
  }
}

export type WebhooksShape = ReturnType<typeof makeWebhooks>

export class Webhooks extends Context.Service<Webhooks, WebhooksShape>()("service/Webhooks") {}

/** The operations over the Database, configured like the engine (secrets key checked, allowed networks). */
export const WebhooksLive = Layer.effect(
  Webhooks,
  Effect.gen(function* () {
    const { sql } = yield* Database
    const settings = yield* WebhookSettings
    return makeWebhooks({ sql, secretsKey: settings.secretsKey.key, allowed: settings.allowed })
  })
).pipe(Layer.provide(WebhookSettingsLive))

export const webhooksLayer = (deps: WebhookDeps) => Layer.succeed(Webhooks, makeWebhooks(deps))
