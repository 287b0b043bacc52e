// What the webhook operations need besides the database (the secrets key, the address
// guard's settings); the database comes from `Sql`.
import { Effect } from "effect"
import { writeActivity, type Actor } from "../access/activity.ts"
import { notFound } from "../domain/errors.ts"
import type { AllowedNetworks, Lookup } from "./net/address-guard.ts"
import { DELIVERIES_CHANNEL } from "../platform/db/channels.ts"
import { query, transaction, type Sql } from "../platform/db/Sql.ts"
import type { SendOptions } from "./net/sender.ts"

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
export const wakeDelivery: Effect.Effect<void, never, Sql> = query((sql) =>
  sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`.then(() => {})
)

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
