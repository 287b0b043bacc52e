// The webhook settings from configuration, checked once at startup: the retry schedule,
// the allowed networks and the key that encrypts signing secrets, which must be the key the
// database's secrets are under (key-check.ts).
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import { DatabaseConfig, WebhookConfig } from "../../platform/config.ts"
import { Sql } from "../../platform/db/Sql.ts"
import { parseAllowedNetworks, type AllowedNetworks, type Lookup } from "../net/address-guard.ts"
import type { SendOptions } from "../net/sender.ts"
import { checkSecretsKey } from "../../platform/secrets/key-check.ts"
import { parseRetrySchedule, type RetrySchedule } from "../../domain/retry-schedule.ts"
import { loadSecretsKey, type SecretsKey } from "../../platform/secrets/secrets-key.ts"

export type WebhookSettingsShape = {
  readonly schedule: RetrySchedule
  readonly allowed: AllowedNetworks
  readonly secretsKey: SecretsKey
}

/** What the webhook operations (endpoints, hooks, pings) are given from the settings, and tests' DNS and CA. */
export interface WebhookDeps {
  /** 32 bytes (loadSecretsKey). */
  readonly secretsKey: Uint8Array
  /** WEBHOOK_ALLOWED_NETWORKS, parsed; empty allows public unicast only. */
  readonly allowed: AllowedNetworks
  /** Tests: a DNS table. */
  readonly lookup?: Lookup
  /** Tests: a CA made at run time (production uses NODE_EXTRA_CA_CERTS). */
  readonly ca?: SendOptions["ca"]
  /** Time limit of a test ping (default 10 s, as deliveries). */
  readonly pingTimeoutMs?: number
}

/** A setting that cannot be used (the retry schedule, the allowed networks, the secrets key file); the message says which and why. */
export class WebhookSettingsError extends Data.TaggedError("WebhookSettingsError")<{ readonly message: string }> {}

/** The settings from configuration alone (no database, no key check). */
export const loadWebhookSettings = Effect.gen(function* () {
  const config = yield* WebhookConfig
  const { dataDir } = yield* DatabaseConfig
  const schedule = parseRetrySchedule(config.retrySchedule)
  if (!schedule.ok) return yield* Effect.fail(new WebhookSettingsError({ message: schedule.error }))
  const allowed = parseAllowedNetworks(config.allowedNetworks)
  if (!allowed.ok) return yield* Effect.fail(new WebhookSettingsError({ message: allowed.error }))
  const secretsKey = yield* Effect.try({
    try: () =>
      loadSecretsKey({
        configured: Option.isSome(config.secretsKey) ? Redacted.value(config.secretsKey.value) : undefined,
        dataDir
      }),
    catch: (e) => new WebhookSettingsError({ message: (e as Error).message })
  })
  return { schedule: schedule.schedule, allowed: allowed.networks, secretsKey } satisfies WebhookSettingsShape
})

export class WebhookSettings extends Context.Service<WebhookSettings, WebhookSettingsShape>()(
  "service/WebhookSettings"
) {}

/**
 * The settings, with the secrets key checked against the database's (recorded there on a
 * first start). Every process that uses the key gets it here: the service's engine and
 * operations share one build, the admin CLI's webhook commands build it too. A process with
 * another key fails with SecretsKeyMismatch.
 */
export const WebhookSettingsLive = Layer.effect(
  WebhookSettings,
  Effect.gen(function* () {
    const settings = yield* loadWebhookSettings
    // On the Database's pool: this layer (and the engine's, the CLI's) need only the Database.
    const check = yield* checkSecretsKey(settings.secretsKey).pipe(Effect.provide(Sql.layer))
    if (!check.ok) return yield* Effect.fail(check.error)
    if (check.recorded)
      yield* Effect.logInfo("secrets key fingerprint recorded in the database", {
        secretsKey: settings.secretsKey.source
      })
    if (check.undecryptable.length > 0) {
      yield* Effect.logWarning("stored webhook signing secrets that this secrets key does not decrypt: rotate them", {
        count: check.undecryptable.length,
        secrets: check.undecryptable.slice(0, 20)
      })
    }
    return settings
  })
)
