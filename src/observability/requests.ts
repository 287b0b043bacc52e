// Per request: a request id (X-Request-Id on the answer, and a log annotation on every log
// line written while it is served), a count by method, route pattern and status, its
// duration, and 429s of the API's rate limit. Routes are labelled by their pattern
// (/api/v1/incidents/:id), never by the raw path: ids and unknown paths would make a series
// per request. Nothing from the request's headers, query or body is logged: keys, secrets
// and cursors stay out of the logs.
import { randomUUID } from "node:crypto"
import { Effect, Exit } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { Metrics } from "./metrics.ts"

export interface RoutePattern {
  readonly method: string
  /** Router syntax: /api/v1/incidents/:id */
  readonly path: string
}

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

/** The label for a request's route: its pattern, or "unmatched". HEAD counts as its GET route. */
export const routeMatcher = (routes: ReadonlyArray<RoutePattern>) => {
  const compiled = routes.map((r) => ({
    method: r.method.toUpperCase(),
    path: r.path,
    re: new RegExp("^" + r.path.split("/").map((s) => (s.startsWith(":") ? "[^/]+" : s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))).join("/") + "/?$")
  }))
  return (method: string, url: string): string => {
    const q = url.search(/[?#]/)
    const path = q >= 0 ? url.slice(0, q) : url
    const m = method.toUpperCase() === "HEAD" ? "GET" : method.toUpperCase()
    // Literal segments before parameters: /api/v1/hooks wins over /api/v1/:x if both exist.
    for (const r of compiled) if (r.method === m && r.re.test(path) && !r.path.includes(":")) return r.path
    for (const r of compiled) if (r.method === m && r.re.test(path)) return r.path
    // A known path with another method is still that route (its 405 is counted there).
    for (const r of compiled) if (r.re.test(path)) return r.path
    return "unmatched"
  }
}

const INCOMING_ID = /^[A-Za-z0-9._-]{8,64}$/

/** The caller's X-Request-Id when it is a plain token (so it cannot forge log lines), else a new one. */
export const requestIdOf = (header: string | undefined): string =>
  header !== undefined && INCOMING_ID.test(header) ? header : randomUUID()

export const REQUEST_ID_HEADER = "x-request-id"

/** A global router middleware: install once, beside every route (e.g. in main.ts's Routes). */
export const requestObservability = (routes: ReadonlyArray<RoutePattern>, options: { readonly apiPrefix?: string } = {}) => {
  const routeOf = routeMatcher(routes)
  const apiPrefix = options.apiPrefix ?? "/api/"
  return HttpRouter.middleware(
    Effect.gen(function* () {
      const m = yield* Metrics
      return (httpEffect) =>
        Effect.gen(function* () {
          const request = yield* HttpServerRequest.HttpServerRequest
          const started = performance.now()
          const requestId = requestIdOf(request.headers[REQUEST_ID_HEADER])
          const route = routeOf(request.method, request.url)
          const method = METHODS.has(request.method) ? request.method : "OTHER"
          const exit = yield* Effect.exit(Effect.annotateLogs(httpEffect, "requestId", requestId))
          // A failure here is answered further out (the API's fallback); its status is the one it will get.
          const status = Exit.isSuccess(exit) ? exit.value.status : (yield* HttpServerError.causeResponse(exit.cause))[0].status
          const seconds = (performance.now() - started) / 1000
          m.httpRequests.inc({ method, route, status: String(status) })
          m.httpSeconds.observe({ method, route }, seconds)
          if (status === 429 && route.startsWith(apiPrefix)) m.rateLimited.inc()
          yield* Effect.logDebug("request", { requestId, method, route, status, ms: Math.round(seconds * 1000) })
          if (Exit.isSuccess(exit)) return HttpServerResponse.setHeader(exit.value, REQUEST_ID_HEADER, requestId)
          return yield* exit
        })
    }),
    { global: true }
  )
}
