// Every error answer is JSON {"error": "<message>"} (spec 7). The classes declare the
// statuses for the OpenAPI document and for handlers that fail with them; errorResponse
// builds the same body directly where a response is made by hand (middleware, fallback);
// toHttpError is the one mapping of the domain's errors (domain/errors.ts) to them.
import { ErrorReporter, Schema } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Domain from "../../domain/errors.ts"

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
  description:
    "The key may not read this, the module or the API is turned off, or the company is not on the Company tier"
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

// -----------------------------------------------------------------------------
// The one mapping of domain errors to HTTP, for the read API, the admin API and the pages.

/** Where the API calls a domain field otherwise (its schemas' names). */
const API_NAMES: Readonly<Record<string, string>> = {
  scopes: "read",
  endpoint: "endpointId",
  subscription: "subscriptionId"
}

/** A domain error's message as the API words it. */
export const httpMessage = (e: Domain.DomainError): string => Domain.spell(e, (field) => API_NAMES[field] ?? field)

const STATUS = {
  Invalid: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  Conflict: 409
} as const satisfies Record<Domain.DomainErrorTag, number>

export const httpStatus = <E extends Domain.DomainError>(e: E): (typeof STATUS)[E["_tag"]] =>
  STATUS[e._tag as E["_tag"]]

type HttpErrorOf<E extends Domain.DomainError> = E extends Domain.Invalid
  ? BadRequest
  : E extends Domain.Unauthorized
    ? Unauthorized
    : E extends Domain.Forbidden
      ? Forbidden
      : E extends Domain.NotFound
        ? NotFound
        : Conflict

/** A domain error as the declared HTTP error of its status. */
export const toHttpError = <E extends Domain.DomainError>(e: E): HttpErrorOf<E> => {
  const body = { error: httpMessage(e) }
  const http = {
    Invalid: () => new BadRequest(body),
    Unauthorized: () => new Unauthorized(body),
    Forbidden: () => new Forbidden(body),
    NotFound: () => new NotFound(body),
    Conflict: () => new Conflict(body)
  }[e._tag]()
  return http as HttpErrorOf<E>
}
