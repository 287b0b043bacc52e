// Per request: a request id (X-Request-Id on the answer, and a log annotation on every log
// line written while it is served), a count by method, route pattern and status, its
// duration, 429s of the API's rate limit, and one log line at REQUEST_LOG_LEVEL naming the
// API key that made it by id. Routes are labelled by their pattern (/api/v1/incidents/:id),
// never by the raw path: ids and unknown paths would make a series per request. Nothing
// from the request's headers, query or body is logged: keys, secrets and cursors stay out
// of the logs. With tracing on, the request's span gets the same route, request id and key id.
import { randomUUID } from "node:crypto"
import { Config, Effect, type LogLevel } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import { RequestNote, type RequestNoteShape } from "./request-note.ts"
import { parseLogLevel } from "../../platform/logging.ts"
import { Metrics } from "../ops/metrics.ts"
import { TracingEnabled } from "../../platform/tracing.ts"
import { routeTable, type KnownRoute } from "./routes.ts"

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

const INCOMING_ID = /^[A-Za-z0-9._-]{8,64}$/

/** The caller's X-Request-Id when it is a plain token (so it cannot forge log lines), else a new one. */
export const requestIdOf = (header: string | undefined): string =>
  header !== undefined && INCOMING_ID.test(header) ? header : randomUUID()

export const REQUEST_ID_HEADER = "x-request-id"

/** REQUEST_LOG_LEVEL: the level of each request's log line (default debug; none: no line). */
export const RequestLogLevelConfig = Config.String("REQUEST_LOG_LEVEL").pipe(Config.withDefault("debug"))

const requestLogLevel = Effect.gen(function* () {
  const raw = yield* RequestLogLevelConfig
  const level = parseLogLevel(raw)
  if (level === undefined) {
    return yield* Effect.die(
      new Error(`REQUEST_LOG_LEVEL must be one of debug, info, warn, error (or none), not "${raw}"`)
    )
  }
  return level
})

/**
 * Counts one request's answer into a series per method, route and status, with its duration,
 * and a 429 under the API into the rate-limited count. Each series is resolved once, not on
 * every request (there are a few dozen, all known routes).
 */
export const requestRecorder = (m: Metrics["Service"], apiPrefix = "/api/") => {
  const counts = new Map<string, { readonly inc: () => void }>()
  const durations = new Map<string, { readonly observe: (seconds: number) => void }>()
  return (method: string, route: string, status: number, seconds: number) => {
    const key = `${method} ${route}`
    let timed = durations.get(key)
    if (timed === undefined) durations.set(key, (timed = m.httpSeconds.labels({ method, route })))
    timed.observe(seconds)
    const countKey = `${key} ${status}`
    let counted = counts.get(countKey)
    if (counted === undefined)
      counts.set(countKey, (counted = m.httpRequests.labels({ method, route, status: String(status) })))
    counted.inc()
    if (status === 429 && route.startsWith(apiPrefix)) m.rateLimited.inc()
  }
}

/** The method as metrics label it: a known one, or OTHER. */
export const methodLabel = (method: string): string => (METHODS.has(method) ? method : "OTHER")

/** A global router middleware: install once, beside every route (e.g. in main.ts's Routes). */
export const requestObservability = (
  known: ReadonlyArray<KnownRoute>,
  options: { readonly apiPrefix?: string } = {}
) => {
  const routes = routeTable(known)
  const apiPrefix = options.apiPrefix ?? "/api/"
  return HttpRouter.middleware(
    Effect.gen(function* () {
      const m = yield* Metrics
      const level: LogLevel.LogLevel = yield* requestLogLevel
      const logRequest = level === "None" ? undefined : Effect.logWithLevel(level === "All" ? "Trace" : level)
      const tracing = yield* TracingEnabled
      const record = requestRecorder(m, apiPrefix)
      return (httpEffect) =>
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          const started = performance.now()
          const requestId = requestIdOf(request.headers[REQUEST_ID_HEADER])
          const note: RequestNoteShape = { keyId: undefined }
          const done = (status: number) => {
            const seconds = (performance.now() - started) / 1000
            const route = routes.routeOf(request.method, request.url)
            const method = methodLabel(request.method)
            record(method, route, status, seconds)
            const keyId = note.keyId ?? null
            const annotated = tracing
              ? Effect.annotateCurrentSpan({
                  "http.route": route,
                  "request.id": requestId,
                  ...(keyId === null ? {} : { "api.key_id": keyId })
                })
              : Effect.void
            return logRequest === undefined
              ? annotated
              : Effect.andThen(
                  annotated,
                  logRequest("request", { requestId, method, route, status, ms: Math.round(seconds * 1000), keyId })
                )
          }
          const served = Effect.provideService(
            Effect.annotateLogs(httpEffect, "requestId", requestId),
            RequestNote,
            note
          )
          return Effect.matchCauseEffect(served, {
            onSuccess: (response) =>
              Effect.as(done(response.status), HttpServerResponse.setHeader(response, REQUEST_ID_HEADER, requestId)),
            // A failure here is answered further out (the API's fallback); its status is the one it will get.
            onFailure: (cause) =>
              Effect.flatMap(HttpServerError.causeResponse(cause), ([response]) =>
                Effect.andThen(done(response.status), Effect.failCause(cause))
              )
          })
        })
    }),
    { global: true }
  )
}
