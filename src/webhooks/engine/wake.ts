// Wakes the delivery engines from an operation (Send Again, a turned-on destination, a
// replay's step): a notification on DELIVERIES_CHANNEL, which the engines LISTEN to.
import type { Effect } from "effect"
import { DELIVERIES_CHANNEL } from "../../platform/db/channels.ts"
import { query, type Sql } from "../../platform/db/Sql.ts"

/** Wakes delivery engines (they also poll, so a lost notification only delays); in the caller's transaction, sent at its commit. */
export const wakeDelivery: Effect.Effect<void, never, Sql> = query((sql) =>
  sql`select pg_notify(${DELIVERIES_CHANNEL}, '')`.then(() => {})
)
