/** An error answer of the API ({"error": "..."}): its status and its message. */
export class SafetyRecordsError extends Error {
  override readonly name = "SafetyRecordsError"
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

/** A webhook delivery that does not verify: answer it with 400. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError"
  /** What to answer the sender. */
  readonly status = 400
}
