// Secrets' encryption contexts and the channel that wakes the delivery engine.
// A blob encrypted for one row does not decrypt for another (AES-GCM additional data).

export const endpointSecretContext = (endpointId: string) => `endpoint:${endpointId}`
export const keySecretContext = (keyId: string) => `key:${keyId}`

/** Notified when deliveries become due outside the schedule (Send Again, Turn On, ...). */
export const DELIVERIES_CHANNEL = "service_deliveries"
