// The delivery body (docs/events.md#the-delivery-request): {"id","event","createdAt","data"}.
// data is the outbox payload, already the exact JSON text the API returns for the record, spliced in byte for byte:
// parsing and re-serialising it could change what GET /api/v1/<resource>/<id> showed.

export type BodyInput = {
  readonly deliveryId: string
  readonly event: string
  /** ISO 8601 UTC with milliseconds. */
  readonly createdAt: string
  /** JSON text of the record. */
  readonly payload: string
}

export const deliveryBody = (b: BodyInput): string =>
  `{"id":${JSON.stringify(b.deliveryId)},"event":${JSON.stringify(b.event)},"createdAt":${JSON.stringify(b.createdAt)},"data":${b.payload}}`

export const PING_EVENT = "ping"

/** A destination's payload mode (docs/events.md#thin-payloads): the record, or only where to read it. */
export type PayloadMode = "full" | "thin"

/**
 * A thin body's data: the record's id, its company and its API address, and nothing else of
 * the record (signed like any body). Only record events are made thin: an alert carries no record.
 */
export const thinData = (resource: string, recordId: string, companyId: string): string =>
  `{"id":${JSON.stringify(recordId)},"companyId":${JSON.stringify(companyId)},"url":${JSON.stringify(`/api/v1/${resource}/${recordId}`)}}`
