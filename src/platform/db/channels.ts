// Secrets' encryption contexts and the channel that wakes the delivery engine.
// A blob encrypted for one row does not decrypt for another (AES-GCM additional data).

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

/** Notified when an engine gives up fan-out partitions (shutdown, a new process's share): others take them at once. */
export const PARTITIONS_CHANNEL = "service_webhook_partitions"
