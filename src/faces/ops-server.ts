// The operations port (OPS_PORT, OPS_HOST): /metrics, /healthz and the detailed /readyz, apart
// from the public port, so that figures and capture's last error reach the scraper and the
// operator but not whoever reaches the public port. Anything else there is a JSON 404.
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { notFound } from "../domain/errors.ts"
import { errorAnswer } from "./http/errors.ts"
import { OpsHealthRoutes } from "./ops/health.ts"
import { MetricsRoutes } from "./ops/metrics-routes.ts"

const Unknown = HttpRouter.add(
  "*",
  "/*",
  Effect.succeed(errorAnswer(notFound("no such path on the operations port: /healthz, /readyz and /metrics")))
)

/** Its one log line, with the bound address (OPS_PORT=0 takes any free port). */
const ListenLog = Layer.effectDiscard(
  HttpServer.addressFormattedWith((address) => Effect.logInfo(`Operations on ${address}`))
)

/** Served by its own router on its own server: provide it an HttpServer. */
export const OpsRoutes = Layer.mergeAll(OpsHealthRoutes, MetricsRoutes, Unknown)

export { ListenLog as OpsListenLog }
