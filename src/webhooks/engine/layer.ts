// DeliveryLive: the engine as a Layer over the Database, configured from the environment
// (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_ALLOWED_NETWORKS, SECRETS_KEY / DATA_DIR, checked against
// the database's key).
import { Effect, Layer } from "effect"
import { Database } from "../../platform/db/Database.ts"
import { DeliveryEngine, makeEngine, type EngineOptions } from "./engine.ts"
import { WebhookSettings, WebhookSettingsLive } from "./settings.ts"

export const DeliveryLive = Layer.effect(
  DeliveryEngine,
  Effect.gen(function* () {
    const { sql } = yield* Database
    const settings = yield* WebhookSettings
    yield* Effect.logInfo("webhook delivery started", {
      schedule: settings.schedule.text,
      attempts: settings.schedule.maxAttempts,
      secretsKey: settings.secretsKey.source
    })
    return yield* makeEngine({
      sql,
      secretsKey: settings.secretsKey.key,
      schedule: settings.schedule,
      allowed: settings.allowed
    })
  })
).pipe(Layer.provide(WebhookSettingsLive))

/** The engine with explicit options (tests, bench). */
export const deliveryLayer = (options: EngineOptions) => Layer.effect(DeliveryEngine, makeEngine(options))
