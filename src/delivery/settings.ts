// The webhook settings from configuration, checked once at startup: the retry schedule,
// the allowed networks and the key that encrypts signing secrets.
import { Effect, Option, Redacted } from "effect"
import { DatabaseConfig, WebhookConfig } from "../config.ts"
import { parseAllowedNetworks, type AllowedNetworks } from "./address-guard.ts"
import { parseRetrySchedule, type RetrySchedule } from "./schedule.ts"
import { loadSecretsKey, type SecretsKey } from "./secrets.ts"

export type WebhookSettings = {
  readonly schedule: RetrySchedule
  readonly allowed: AllowedNetworks
  readonly secretsKey: SecretsKey
}

export class WebhookSettingsError extends Error {}

export const loadWebhookSettings = Effect.gen(function* () {
  const config = yield* WebhookConfig
  const { dataDir } = yield* DatabaseConfig
  const schedule = parseRetrySchedule(config.retrySchedule)
  if (!schedule.ok) return yield* Effect.fail(new WebhookSettingsError(schedule.error))
  const allowed = parseAllowedNetworks(config.allowedNetworks)
  if (!allowed.ok) return yield* Effect.fail(new WebhookSettingsError(allowed.error))
  const secretsKey = yield* Effect.try({
    try: () =>
      loadSecretsKey({
        configured: Option.isSome(config.secretsKey) ? Redacted.value(config.secretsKey.value) : undefined,
        dataDir
      }),
    catch: (e) => new WebhookSettingsError((e as Error).message)
  })
  return { schedule: schedule.schedule, allowed: allowed.networks, secretsKey } satisfies WebhookSettings
})
