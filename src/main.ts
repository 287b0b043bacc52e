// Composition root: configuration, database (embedded or DATABASE_URL), migrations, then
// capture, delivery and the HTTP server; SIGINT/SIGTERM unwind them in reverse order.
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Runtime } from "effect"
import { HttpRouter } from "effect/http"
import { AdminWebRoutes } from "./admin/web/index.ts"
import { ApiRoutes } from "./api/index.ts"
import { CaptureLive } from "./capture/Capture.ts"
import { HttpConfig } from "./config.ts"
import { DeliveryLive } from "./delivery/layer.ts"
import * as Database from "./db/Database.ts"
import { isStartRefused } from "./db/refusal.ts"
import { HealthRoutes } from "./http/health.ts"
import { createServiceServer, ROUTER_CONFIG } from "./http/node-server.ts"
import { LoggingLive } from "./logging.ts"
import { ObservabilityRoutes } from "./observability/http.ts"
import { MetricsLive } from "./observability/metrics.ts"
import { FirstStart } from "./seed/first-start.ts"
import { WebhooksLive } from "./webhooks/service.ts"

const Routes = Layer.mergeAll(HealthRoutes, ApiRoutes, ObservabilityRoutes, AdminWebRoutes)

const HttpLive = Layer.unwrap(
  Effect.gen(function* () {
    const { port, host } = yield* HttpConfig
    return HttpRouter.serve(Routes, { disableLogger: true, routerConfig: ROUTER_CONFIG }).pipe(
      // HttpRouter.serve logs the bound address ("Listening on http://...") once it listens.
      Layer.provide(NodeHttpServer.layer(createServiceServer, { port, host, gracefulShutdownTimeout: "10 seconds" }))
    )
  })
)

// Built in this order (and torn down in reverse): database and migrations, demo data on a
// first start (so it is bootstrapped, not sent as events), capture, webhook delivery and
// operations, then the HTTP server. So a stop closes HTTP first, then lets in-flight
// deliveries finish, then stores capture's checkpoint.
export const MainLive = HttpLive.pipe(
  Layer.provideMerge(Layer.mergeAll(DeliveryLive, WebhooksLive)),
  Layer.provideMerge(CaptureLive),
  Layer.provideMerge(FirstStart),
  Layer.provideMerge(Database.serviceLayer),
  Layer.provideMerge(MetricsLive),
  Layer.provide(LoggingLive)
)

// A stop asked for by SIGINT/SIGTERM that unwound cleanly is a success (exit 0). A start
// refused for a reason an operator must fix (StartRefused) prints that reason alone, exit 1.
Layer.launch(MainLive).pipe(
  Effect.catchIf(isStartRefused, (e) =>
    Effect.sync(() => {
      process.stderr.write(`error: ${e.message}\n`)
      process.exitCode = 1
    })
  ),
  NodeRuntime.runMain({
    teardown: (exit, onExit) => (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit))
  })
)
