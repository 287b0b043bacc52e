// The one place where errors become HTTP answers, for the read API, the admin API and the
// pages. Every error answer is JSON {"error": "<message>"} with the status its error
// carries (the domain's errors are annotated with it in domain/errors.ts, HTTP's own refusals
// below):
// - the schemas the endpoints and middleware declare (the OpenAPI document's error answers),
//   with which HttpApi encodes a domain error a handler fails with;
// - errorAnswer, the same answer where HttpApi does not answer (the router's fallback);
// - httpMessage and httpStatus, the message with the API's names for fields and the status
//   (the pages show both).
import { type Effect, ErrorReporter, Schema, SchemaTransformation } from "effect"
import { HttpServerResponse } from "effect/http"
import * as Domain from "../../domain/errors.ts"

// -----------------------------------------------------------------------------
// HTTP's own refusals: about the request itself, no domain rule involved

/** A method the path does not take (405; the answer's Allow lists the ones it does). */
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()(
  "MethodNotAllowed",
  { message: Schema.String },
  { httpApiStatus: 405 }
) {
  override readonly [ErrorReporter.ignore] = true
}

/** A request body over the JSON APIs' bound (413). */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()(
  "PayloadTooLarge",
  { message: Schema.String },
  { httpApiStatus: 413 }
) {
  override readonly [ErrorReporter.ignore] = true
}

/** What the HTTP server itself answered (a request it could not read, a client gone, a shutdown, a failure): its status stands. */
export class ServerFailure extends Schema.TaggedError<ServerFailure>()("ServerFailure", {
  message: Schema.String,
  status: Schema.Number
}) {
  override readonly [ErrorReporter.ignore] = true
}

export type HttpError = Domain.DomainError | MethodNotAllowed | PayloadTooLarge | ServerFailure

// -----------------------------------------------------------------------------
// Status and message

/** The status each kind is annotated with (the one HttpApi answers it with), read once. */
const STATUS = new Map<unknown, number>(
  [...Domain.DOMAIN_ERRORS, MethodNotAllowed, PayloadTooLarge].map((Kind) => [
    Kind,
    Kind.ast.annotations!.httpApiStatus as number
  ])
)

export const httpStatus = (e: HttpError): number => (e instanceof ServerFailure ? e.status : STATUS.get(e.constructor)!)

/** Where the API calls a domain field otherwise (its schemas' names). */
const API_NAMES: Readonly<Record<string, string>> = {
  scopes: "read",
  endpoint: "endpointId",
  subscription: "subscriptionId"
}

/** An error's message as the API words it. */
export const httpMessage = (e: { readonly message: string; readonly words?: Domain.Words | undefined }): string =>
  Domain.spell(e, (field) => API_NAMES[field] ?? field)

// -----------------------------------------------------------------------------
// The answers HttpApi encodes: a domain error as {"error": message} with its status

const ErrorBody = Schema.Struct({ error: Schema.String.annotate({ description: "A human-readable message" }) })

type Answerable = Schema.Top & {
  readonly Type: { readonly message: string; readonly words?: Domain.Words | undefined }
  new (props: { readonly message: string }): Schema.Top["Type"]
}

/** The error as its answer: the body is its message (decoded back, a client gets the message only). */
const answerOf = <S extends Answerable>(Kind: S, identifier: string, description: string) =>
  ErrorBody.pipe(
    Schema.decodeTo(
      Schema.toType(Kind),
      SchemaTransformation.transform({
        decode: ({ error }) => new Kind({ message: error }) as S["Type"],
        encode: (e: S["Type"]) => ({ error: httpMessage(e) })
      })
    )
  ).annotate({ identifier, description })

// The OpenAPI document names their bodies BadRequestEncoded, UnauthorizedEncoded ... (the
// client's generated types use those names).
export const BadRequest = answerOf(Domain.Invalid, "BadRequest", "A malformed parameter: the message names it")
export const Unauthorized = answerOf(
  Domain.Unauthorized,
  "Unauthorized",
  "No key, or a key that is unknown, revoked, expired or of another company"
)
export const Forbidden = answerOf(
  Domain.Forbidden,
  "Forbidden",
  "The key may not read this, the module or the API is turned off, or the company is not on the Company tier"
)
export const NotFound = answerOf(Domain.NotFound, "NotFound", "No such record or path")
export const Conflict = answerOf(Domain.Conflict, "Conflict", "The request conflicts with a limit or the current state")
export const TooManyRequests = answerOf(
  Domain.RateLimited,
  "TooManyRequests",
  "More requests than the key's rate limit, or too many with unknown keys from the caller's address; Retry-After gives the seconds to wait"
)

/**
 * An operation's domain errors as an endpoint's answers. The webhook and replay operations are
 * typed as failing with any DomainError; each endpoint declares the kinds it answers (the
 * OpenAPI document lists those), and HttpApi answers a kind it does not declare as a failure
 * of the service (500, logged), as for any defect.
 */
export const answering = <A, R>(operation: Effect.Effect<A, Domain.DomainError, R>): Effect.Effect<A, never, R> =>
  operation as unknown as Effect.Effect<A, never, R>

// -----------------------------------------------------------------------------
// The same answer outside HttpApi

/** The JSON text of an error body. */
const errorBody = (message: string): string => JSON.stringify({ error: message })

/** An error's answer where HttpApi does not give it (the router's fallback): the same status and body. */
export const errorAnswer = (
  e: HttpError,
  headers?: Readonly<Record<string, string>>
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.text(errorBody(httpMessage(e)), {
    status: httpStatus(e),
    contentType: "application/json",
    ...(headers === undefined ? {} : { headers })
  })
