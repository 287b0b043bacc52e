// What the composition root adds to the HTTP server for observability: GET /metrics, and
// the per-request middleware labelled by every route the server knows (read API, its
// documents, admin API, health, metrics).
import { Layer } from "effect"
import { HttpMiddleware } from "effect/http"
import { adminKnownRoutes } from "../admin/http/index.ts"
import { DOCS_PATH, OPENAPI_PATH, ServiceApi } from "../api/definition.ts"
import { routesOf } from "../api/fallback.ts"
import { requestObservability, routeMatcher } from "./requests.ts"
import { METRICS_PATH, MetricsRoutes } from "./routes.ts"

export const KNOWN_ROUTES = [
  ...routesOf(ServiceApi),
  { method: "GET", path: OPENAPI_PATH },
  { method: "GET", path: DOCS_PATH },
  ...adminKnownRoutes,
  { method: "GET", path: "/healthz" },
  { method: "GET", path: "/readyz" },
  { method: "GET", path: METRICS_PATH }
]

/** Requires Metrics and Database; reads Capture and DeliveryEngine when they run here. */
export const ObservabilityRoutes = Layer.mergeAll(MetricsRoutes, requestObservability(KNOWN_ROUTES))

/** Names each request's trace span by its route pattern ("GET /api/v1/incidents/:id"), never by its raw path. */
export const RequestSpanNames = Layer.sync(HttpMiddleware.SpanNameGenerator, () => {
  const routeOf = routeMatcher(KNOWN_ROUTES)
  return (request) => `${request.method} ${routeOf(request.method, request.url)}`
})
