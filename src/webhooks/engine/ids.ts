// A delivery's id is a function of (event, destination): a first attempt is sent before its
// row is written, and a crash in between sends it again under the same id (receivers drop
// repeats by it). The database's service.webhook_delivery_id (sql/020) computes the same.
// UUID version 8: the event id's first 48 bits (a UUIDv7's time: rows land at the right
// edge of the primary key), then SHA-256 of the event id's text, 'e' or 's', and the
// destination id's text (lower case, as PostgreSQL writes them).
import { createHash } from "node:crypto"

export const deliveryId = (eventId: string, endpointId: string | null, subscriptionId: string | null): string => {
  const h = createHash("sha256")
    .update(endpointId !== null ? `${eventId}e${endpointId}` : `${eventId}s${subscriptionId}`)
    .digest("hex")
  // Hash bytes 0-9 are the id's bytes 6-15, with the version (8) and variant (10) bits set.
  const variant = ((parseInt(h[4]!, 16) & 3) | 8).toString(16)
  return `${eventId.slice(0, 8)}-${eventId.slice(9, 13)}-8${h.slice(1, 4)}-${variant}${h.slice(5, 8)}-${h.slice(8, 20)}`
}
