// What the composition root adds to the public HTTP server for observability: the
// per-request middleware (request metrics, labelled by every route the server knows: read API,
// its documents, admin API, health) and trace span names. GET /metrics is on the operations
// port (ops-server.ts).
import { Layer } from "effect"
import { HttpMiddleware } from "effect/http"
import { requestObservability } from "./http/requests.ts"
import { routeTable } from "./http/routes.ts"
import { KNOWN_ROUTES } from "./routes.ts"

/** Requires Metrics. */
export const RequestObservability = requestObservability(KNOWN_ROUTES)

/** Names each request's trace span by its route pattern ("GET /api/v1/incidents/:id"), never by its raw path. */
export const RequestSpanNames = Layer.sync(HttpMiddleware.SpanNameGenerator, () => {
  const routes = routeTable(KNOWN_ROUTES)
  return (request) => `${request.method} ${routes.routeOf(request.method, request.url)}`
})
