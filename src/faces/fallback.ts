// Answers for what no handler answers, in the API's error shape: an unknown path (404), a
// method a path does not take (405 with Allow), a request that cannot be read, and an
// unexpected failure (500). Installed as a global router middleware, so it covers every path.
import { Cause, Effect } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { checkRequest, isJsonApiPath, nulParameter } from "./http/request-checks.ts"
import { routeTable, type KnownRoute } from "./http/routes.ts"
import { hostOf, rateLimitField, rateLimitPolicy } from "./api/auth.ts"
import { errorResponse } from "./http/errors.ts"
import { conditional } from "./api/etag.ts"
import { KeyDirectory } from "../access/keys/directory.ts"
import { RateLimiter } from "../access/keys/rate-limit.ts"
import { UsageRecorder } from "../access/keys/usage.ts"
import { ApiSettings } from "../platform/api-settings.ts"

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
 * plain text ("Unsupported content-type: text/plain"). Every error is JSON (spec 7, issue
 * 4), and a body that is not JSON is a bad request body (spec 7: 400, as documented).
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
  return errorResponse(
    400,
    `invalid request body: send JSON with Content-Type: application/json${given === "" ? "" : ` (got ${given})`}`,
    response.headers
  )
}

export const fallbackLayer = (known: ReadonlyArray<KnownRoute>) => {
  const routes = routeTable(known)
  return HttpRouter.middleware(
    Effect.gen(function* () {
      const directory = yield* KeyDirectory
      const limiter = yield* RateLimiter
      const usage = yield* UsageRecorder
      const settings = yield* ApiSettings
      const policy = rateLimitPolicy(settings.rateLimit, settings.rateWindowSeconds)

      // An answer under /api that no endpoint gave (an unknown path, a method a path does not
      // take) still carries the rate-limit fields, like every API answer, and counts against a
      // key that is good: a client probing wrong paths spends its allowance like any other.
      const rated = (request: HttpServerRequest.HttpServerRequest, answer: HttpServerResponse.HttpServerResponse) => {
        if (!pathOf(request.url).startsWith("/api/")) return Effect.succeed(answer)
        const withPolicy = HttpServerResponse.setHeader(answer, "ratelimit-policy", policy)
        const credential = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "")?.[1]
        if (credential === undefined) return Effect.succeed(withPolicy)
        return Effect.flatMap(directory.resolve(credential, hostOf(request.headers.host), undefined), (lookup) =>
          lookup._tag === "Refused" && (lookup.refusal.status === 401 || lookup.entry === undefined)
            ? Effect.succeed(withPolicy)
            : Effect.map(limiter.take(lookup.entry!.keyId), (rate) => {
                const headers = { "ratelimit-policy": policy, ratelimit: rateLimitField(rate) }
                if (rate.allowed) {
                  // Counted in the key's requests too, as what counts against its limit.
                  usage.record(lookup.entry!.keyId)
                  return HttpServerResponse.setHeaders(answer, headers)
                }
                return errorResponse(
                  429,
                  `rate limit exceeded: ${rate.limit} requests per ${rate.windowSeconds} seconds; retry in ${rate.reset} seconds`,
                  {
                    ...headers,
                    "retry-after": String(rate.reset)
                  }
                )
              })
        )
      }

      // The router forgives a trailing slash (for the admin pages); the API does not, as Stripe's
      // does not: `/api/v1/incidents/` is no path at all, not the list nor a record with id "".
      // The JSON APIs refuse what no handler should read (src/faces/http/request-checks.ts).
      const strict = (httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, unknown>) =>
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          const path = pathOf(request.url)
          if (path.length > 5 && path.endsWith("/") && path.startsWith("/api/"))
            return rated(request, errorResponse(404, `no such path: ${path}`))
          // No route can match these, and a NUL cannot reach the database: say so, on every path.
          if (!decodable(request.url))
            return rated(request, errorResponse(400, `the path is not valid percent-encoding: ${path.slice(0, 200)}`))
          if (path.includes("\u0000"))
            return rated(request, errorResponse(400, "the path contains a NUL character (%00)"))
          const nul = nulParameter(request.url)
          if (nul !== undefined)
            return rated(request, errorResponse(400, `query parameter "${nul}" contains a NUL character (%00)`))
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
          return Effect.flatMap(checkRequest(request), (refusal) =>
            refusal === undefined ? answered : rated(request, errorResponse(refusal.status, refusal.message))
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
              return rated(
                request,
                errorResponse(405, `${request.method} is not allowed on ${path}; it takes ${allow.join(", ")}`, {
                  allow: allow.join(", ")
                })
              )
            }
            return rated(request, errorResponse(404, `no such path: ${path}`))
          }
          if (Cause.hasInterruptsOnly(cause)) return Effect.failCause(cause)
          return Effect.flatMap(HttpServerError.causeResponse(cause), ([response]) => {
            if (response.status < 500 && response.body._tag !== "Empty") return Effect.succeed(response)
            const message =
              STATUS_MESSAGES[response.status] ?? (response.status >= 500 ? "internal error" : "request failed")
            const answer = errorResponse(response.status, message, response.headers)
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
