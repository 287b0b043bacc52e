// Every error answer is JSON {"error": "<message>"} (spec 7). The classes declare the
// statuses for the OpenAPI document and for handlers that fail with them; errorResponse
// builds the same body directly where a response is made by hand (middleware, fallback).
import { ErrorReporter, Schema } from "effect"
import { HttpServerResponse } from "effect/http"

const fields = { error: Schema.String.annotate({ description: "A human-readable message" }) }

export class BadRequest extends Schema.Error<BadRequest>("BadRequest")(fields, {
  httpApiStatus: 400,
  description: "A malformed parameter: the message names it"
}) {
  override readonly [ErrorReporter.ignore] = true
}

export class Unauthorized extends Schema.Error<Unauthorized>("Unauthorized")(fields, {
  httpApiStatus: 401,
  description: "No key, or a key that is unknown, revoked, expired or of another company"
}) {
  override readonly [ErrorReporter.ignore] = true
}

export class Forbidden extends Schema.Error<Forbidden>("Forbidden")(fields, {
  httpApiStatus: 403,
  description: "The key may not read this, the module or the API is turned off, or the company is not on the Company tier"
}) {
  override readonly [ErrorReporter.ignore] = true
}

export class NotFound extends Schema.Error<NotFound>("NotFound")(fields, {
  httpApiStatus: 404,
  description: "No such record or path"
}) {
  override readonly [ErrorReporter.ignore] = true
}

export class Conflict extends Schema.Error<Conflict>("Conflict")(fields, {
  httpApiStatus: 409,
  description: "The request conflicts with a limit or the current state"
}) {
  override readonly [ErrorReporter.ignore] = true
}

export class TooManyRequests extends Schema.Error<TooManyRequests>("TooManyRequests")(fields, {
  httpApiStatus: 429,
  description: "More requests than the key's rate limit; Retry-After gives the seconds to wait"
}) {
  override readonly [ErrorReporter.ignore] = true
}

/** The JSON text of an error body. */
export const errorBody = (message: string): string => JSON.stringify({ error: message })

/** An error answer made by hand, with the same body the schemas above describe. */
export const errorResponse = (
  status: number,
  message: string,
  headers?: Readonly<Record<string, string>>
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(errorBody(message), {
    status,
    contentType: "application/json",
    ...(headers === undefined ? {} : { headers })
  })

/** /api/v1/hooks: as webhookErrorToHttp, and 401 when the key itself is no longer good. */
export const hookErrorToHttp = (e: { readonly status: number; readonly message: string }): Unauthorized | BadRequest | Forbidden | NotFound | Conflict =>
  e.status === 401 ? new Unauthorized({ error: e.message }) : webhookErrorToHttp(e)

/** A webhook operation's error as the declared HTTP error of the same status; the API and
 *  the admin API map them the same way. */
export const webhookErrorToHttp = (e: { readonly status: number; readonly message: string }): BadRequest | Forbidden | NotFound | Conflict => {
  switch (e.status) {
    case 403:
      return new Forbidden({ error: e.message })
    case 404:
      return new NotFound({ error: e.message })
    case 409:
      return new Conflict({ error: e.message })
    default:
      return new BadRequest({ error: e.message })
  }
}
