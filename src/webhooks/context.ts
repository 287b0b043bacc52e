// What the webhook operations need besides the database (the secrets key, the address
// guard's settings); the database comes from `Sql`.
import type { Effect } from "effect"
import type { AllowedNetworks, Lookup } from "../delivery/address-guard.ts"
import { DELIVERIES_CHANNEL } from "../platform/db/channels.ts"
import { query, type Sql } from "../platform/db/Sql.ts"
import type { SendOptions } from "../delivery/sender.ts"

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

/** Wakes delivery engines (they also poll, so a lost notification only delays); in the caller's transaction, sent at its commit. */
export const wakeDelivery: Effect.Effect<void, never, Sql> = query((sql) => sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`.then(() => {}))
