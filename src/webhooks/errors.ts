// The one error of the webhook operations: a message for people and the HTTP status the
// API and admin layers answer with (spec 7: {"error": message}).
import { Data } from "effect"

export type WebhookErrorStatus = 400 | 401 | 403 | 404 | 409

export class WebhookError extends Data.TaggedError("WebhookError")<{
  readonly status: WebhookErrorStatus
  readonly message: string
}> {}

export const badRequest = (message: string) => new WebhookError({ status: 400, message })
/** The calling API key is unknown, revoked or expired (spec 5.6: its next request gets 401). */
export const unauthorized = (message: string) => new WebhookError({ status: 401, message })
export const forbidden = (message: string) => new WebhookError({ status: 403, message })
export const notFound = (message: string) => new WebhookError({ status: 404, message })
export const conflict = (message: string) => new WebhookError({ status: 409, message })

export const isWebhookError = (e: unknown): e is WebhookError => e instanceof WebhookError
