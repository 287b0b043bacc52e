// The database's notification channels (and listening on them), and secrets' encryption contexts.
// A blob encrypted for one row does not decrypt for another (AES-GCM additional data).
import { Cause, Effect } from "effect"
import type { Sql } from "postgres"

export const endpointSecretContext = (endpointId: string) => `endpoint:${endpointId}`
export const keySecretContext = (keyId: string) => `key:${keyId}`

/** Notified when deliveries become due outside the schedule (Send Again, Turn On, ...). */
export const DELIVERIES_CHANNEL = "service_deliveries"

/**
 * Notified at commit when a destination changes how or whether it may receive: an endpoint's
 * address, events, secret or switch, a subscription, a key, a company's tier, API or modules
 * (sql/010); and when stored event payloads change (a privacy case scrubbed, src/pipeline/outbox).
 * The engine then hands back what it holds and has not started sending.
 */
export const DESTINATIONS_CHANNEL = "service_webhook_destinations"

/** Notified when a destination's circuit opens, closes or changes (sql/024): every engine re-reads them. */
export const CIRCUITS_CHANNEL = "service_webhook_circuits"

/** Notified when an engine gives up fan-out partitions (shutdown, a new process's share): others take them at once. */
export const PARTITIONS_CHANNEL = "service_webhook_partitions"

/**
 * Notified at each commit of capture that wrote record changes (GET /api/v1/stream's ground), with
 * an empty payload; with `EPOCH_NOTICE` when an epoch began (a first start, a lost slot's
 * rebuild, a fresh snapshot, rebuild-views), which wakes every waiting follower at once.
 */
export const RECORD_CHANGES_CHANNEL = "service_record_changes"
export const EPOCH_NOTICE = "epoch"

/**
 * LISTENs on channels for as long as the scope is open, each callback also called on
 * (re)connect so a change made while the listener was down is not missed. A LISTEN that
 * fails is logged (`<who>: LISTEN failed; relying on the poll`): callers poll anyway.
 */
export const listenScoped = (
  sql: Sql,
  who: string,
  channels: ReadonlyArray<readonly [channel: string, onNotify: () => void]>
) =>
  Effect.acquireRelease(
    Effect.tryPromise(() => Promise.all(channels.map(([channel, f]) => sql.listen(channel, f, f)))).pipe(
      Effect.catchCause((cause) =>
        Effect.logWarning(`${who}LISTEN failed; relying on the poll`, Cause.pretty(cause)).pipe(
          Effect.as([] as Array<{ unlisten(): Promise<void> }>)
        )
      )
    ),
    (ls) => Effect.promise(() => Promise.all(ls.map((l) => l.unlisten().catch(() => undefined))))
  )
