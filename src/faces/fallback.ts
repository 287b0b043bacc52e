// Answers for what no handler answers, in the API's error shape: an unknown path (404), a
// method a path does not take (405 with Allow), a request that cannot be read, and an
// unexpected failure (500). Installed as a global router middleware, so it covers every path.
// Each answer is an error of the one model, answered by errorAnswer (src/faces/http/errors.ts).
import { Cause, Effect } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { invalid, notFound } from "../domain/errors.ts"
import { ApiKeys } from "../access/keys/service.ts"
import { ApiSettings } from "../platform/api-settings.ts"
import { TrustProxySetting } from "../platform/config.ts"
import { badHost, clientOf, hostOf, isHostHeader, rateLimitField, rateLimitPolicy } from "./api/auth.ts"
import { conditional } from "./api/etag.ts"
import { errorAnswer, MethodNotAllowed, ServerFailure } from "./http/errors.ts"
import { checkRequest, isJsonApiPath, nulParameter } from "./http/request-checks.ts"
import { routeTable, type KnownRoute } from "./http/routes.ts"

const pathOf = (url: string) => {
  const q = url.search(/[?#]/)
  const path = q >= 0 ? url.slice(0, q) : url
  try {
    return decodeURI(path)
  } catch {
    return path
  }
}

/** Whether the path's percent-encoding is valid (`%zz` is not: no route can match it). */
const decodable = (url: string) => {
  const q = url.search(/[?#]/)
  try {
    decodeURIComponent(q >= 0 ? url.slice(0, q) : url)
    return true
  } catch {
    return false
  }
}

const isRouteNotFound = (u: unknown): u is HttpServerError.HttpServerError =>
  HttpServerError.isHttpServerError(u) && u.reason._tag === "RouteNotFound"

const STATUS_MESSAGES: Readonly<Record<number, string>> = {
  400: "the request could not be read",
  413: "the request body is too large",
  415: "unsupported content type",
  499: "client closed the request",
  503: "the service is shutting down"
}

/**
 * HttpApi answers a body of a content type an endpoint does not take with its own 415 in
 * plain text ("Unsupported content-type: text/plain"). Every error is JSON, and a body
 * that is not JSON is a bad request body (400, as documented).
 */
const jsonOnly = (response: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  if (
    response.status !== 415 ||
    response.body._tag !== "Uint8Array" ||
    !response.body.contentType.startsWith("text/plain")
  )
    return response
  const given = /^Unsupported content-type: (.*)$/s.exec(new TextDecoder().decode(response.body.body))?.[1]
  if (given === undefined) return response
  return errorAnswer(
    invalid(
      `invalid request body: send JSON with Content-Type: application/json${given === "" ? "" : ` (got ${given})`}`
    ),
    response.headers
  )
}

export const fallbackLayer = (known: ReadonlyArray<KnownRoute>) => {
  const routes = routeTable(known)
  return HttpRouter.middleware(
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const settings = yield* ApiSettings
      const trust = yield* TrustProxySetting
      const policy = rateLimitPolicy(settings.rateLimit, settings.rateWindowSeconds)

      // An answer under /api that no endpoint gave (an unknown path, a method a path does not
      // take) still carries the rate-limit fields, like every API answer, and counts against a
      // key that is good: a client probing wrong paths spends its allowance like any other.
      const rated = (request: HttpServerRequest.HttpServerRequest, answer: HttpServerResponse.HttpServerResponse) => {
        if (!pathOf(request.url).startsWith("/api/")) return Effect.succeed(answer)
        const withPolicy = HttpServerResponse.setHeader(answer, "ratelimit-policy", policy)
        const credential = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1]
        if (credential === undefined) return Effect.succeed(withPolicy)
        // A Host that is not one was refused already (strict, below); this answer is for another refusal.
        if (!isHostHeader(request.headers.host)) return Effect.succeed(withPolicy)
        // Counted in the key's requests too, as what counts against its limit.
        const admission = keys.admit({
          credential,
          host: hostOf(request.headers.host),
          resource: undefined,
          webhooks: false,
          client: clientOf(request, trust)
        })
        return Effect.map(admission, (a) => {
          const fields: Record<string, string> =
            a.rate === undefined
              ? { "ratelimit-policy": policy }
              : { "ratelimit-policy": policy, ratelimit: rateLimitField(a.rate) }
          // Over a limit (the key's, or its address's failed authentications): the 429 itself.
          if (a._tag === "Refused" && a.error._tag === "RateLimited" && a.retryAfter !== undefined)
            return errorAnswer(a.error, { ...fields, "retry-after": String(a.retryAfter) })
          return a.rate === undefined ? withPolicy : HttpServerResponse.setHeaders(answer, fields)
        })
      }

      // The router forgives a trailing slash (for the admin pages); the API does not, as Stripe's
      // does not: `/api/v1/incidents/` is no path at all, not the list nor a record with id "".
      // The JSON APIs refuse what no handler should read (src/faces/http/request-checks.ts).
      const strict = (httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, unknown>) =>
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          const path = pathOf(request.url)
          // A Host that is not one is refused before anything looks at it (auth.ts).
          if (path.startsWith("/api/") && !isHostHeader(request.headers.host))
            return Effect.succeed(HttpServerResponse.setHeader(errorAnswer(badHost()), "ratelimit-policy", policy))
          if (path.length > 5 && path.endsWith("/") && path.startsWith("/api/"))
            return rated(request, errorAnswer(notFound(`no such path: ${path}`)))
          // No route can match these, and a NUL cannot reach the database: say so, on every path.
          if (!decodable(request.url))
            return rated(request, errorAnswer(invalid(`the path is not valid percent-encoding: ${path.slice(0, 200)}`)))
          if (path.includes("\u0000"))
            return rated(request, errorAnswer(invalid("the path contains a NUL character (%00)")))
          const nul = nulParameter(request.url)
          if (nul !== undefined)
            return rated(request, errorAnswer(invalid(`query parameter "${nul}" contains a NUL character (%00)`)))
          if (!isJsonApiPath(path)) return httpEffect
          // Answers the endpoints do not rate (the OpenAPI document) still state the policy.
          // Every answer under /api/ has an ETag, and If-None-Match may make it a 304 (etag.ts).
          const answered = path.startsWith("/api/")
            ? Effect.map(httpEffect, (r) =>
                conditional(
                  request.method,
                  request.headers["if-none-match"],
                  r.headers["ratelimit-policy"] === undefined
                    ? HttpServerResponse.setHeader(r, "ratelimit-policy", policy)
                    : r
                )
              )
            : httpEffect
          return Effect.flatMap(checkRequest(request, routes.bodyFields(request.method, request.url)), (refusal) =>
            refusal === undefined ? answered : rated(request, errorAnswer(refusal))
          )
        })

      return (httpEffect) =>
        Effect.catchCause(Effect.map(strict(httpEffect), jsonOnly), (cause) => {
          const failure = cause.reasons.find((r) => r._tag === "Fail")
          if (failure !== undefined && isRouteNotFound(failure.error)) {
            const request = failure.error.request
            const path = pathOf(request.url)
            const allow = routes.allowedMethods(request.url)
            if (allow.length > 0) {
              const message = `${request.method} is not allowed on ${path}; it takes ${allow.join(", ")}`
              return rated(request, errorAnswer(new MethodNotAllowed({ message }), { allow: allow.join(", ") }))
            }
            return rated(request, errorAnswer(notFound(`no such path: ${path}`)))
          }
          if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
          return Effect.flatMap(HttpServerError.causeResponse(cause), ([response]) => {
            if (response.status < 500 && response.body._tag !== "Empty") return Effect.succeed(response)
            const message =
              STATUS_MESSAGES[response.status] ?? (response.status >= 500 ? "internal error" : "request failed")
            const answer = errorAnswer(new ServerFailure({ status: response.status, message }), response.headers)
            return response.status >= 500
              ? Effect.as(Effect.logError("request failed", Cause.pretty(cause)), answer)
              : Effect.succeed(answer)
          })
          // It handles every failure, but router middleware must keep the "unhandled" error type.
        }) as typeof httpEffect
    }),
    { global: true }
  )
}
