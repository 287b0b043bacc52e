/** An error answer of the API ({"error": "..."}): its status and its message. */
export class SafetyRecordsError extends Error {
  override readonly name: string = "SafetyRecordsError"
  /** The HTTP status: 400, 401, 403, 404, 429 (after the retries ran out), 5xx. */
  readonly status: number
  /** On a 429: the seconds the API asked to wait (Retry-After). */
  readonly retryAfter: number | undefined

  constructor(status: number, message: string, retryAfter?: number) {
    super(message)
    this.status = status
    this.retryAfter = retryAfter
  }
}

/**
 * 409 from the stream (GET /api/v1/stream, a consumer's stream): the stream cannot be continued
 * from the offset given. Copy the records again from the lists, then follow from after=now.
 */
export class MustRefetchError extends SafetyRecordsError {
  override readonly name = "MustRefetchError"
  readonly mustRefetch = true
  /** The commit time of the offset given: the copy was complete up to it. */
  readonly since: string

  constructor(message: string, since: string) {
    super(409, message)
    this.since = since
  }
}

/** A webhook delivery that does not verify: answer it with 400. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
  /** What to answer the sender. */
  readonly status = 400
}
