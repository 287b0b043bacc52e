// What the composition root adds to the HTTP server for observability: GET /metrics, and
// the per-request middleware labelled by every route the server knows (read API, its
// documents, admin API, health, metrics).
import { Layer } from "effect"
import { HttpMiddleware } from "effect/http"
import { requestObservability } from "./http/requests.ts"
import { MetricsRoutes } from "./ops/metrics-routes.ts"
import { routeTable } from "./http/routes.ts"
import { KNOWN_ROUTES } from "./routes.ts"

/** Requires Metrics and Database; reads Capture and DeliveryEngine when they run here. */
export const ObservabilityRoutes = Layer.mergeAll(MetricsRoutes, requestObservability(KNOWN_ROUTES))

/** Names each request's trace span by its route pattern ("GET /api/v1/incidents/:id"), never by its raw path. */
export const RequestSpanNames = Layer.sync(HttpMiddleware.SpanNameGenerator, () => {
  const routes = routeTable(KNOWN_ROUTES)
  return (request) => `${request.method} ${routes.routeOf(request.method, request.url)}`
})
