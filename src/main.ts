// Composition root: configuration, database (embedded or DATABASE_URL), migrations, then
// capture, delivery and the HTTP server; SIGINT/SIGTERM unwind them in reverse order.
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Runtime } from "effect"
import { HttpRouter } from "effect/http"
import { AdminWebRoutes } from "./admin/web/index.ts"
import { ApiRoutes } from "./api/index.ts"
import { CaptureLive } from "./capture/Capture.ts"
import { HttpConfig } from "./config.ts"
import { SecretsKeyMismatch } from "./delivery/key-check.ts"
import { DeliveryLive } from "./delivery/layer.ts"
import { WebhookSettingsLive } from "./delivery/settings.ts"
import * as Database from "./db/Database.ts"
import { isStartRefused } from "./db/refusal.ts"
import { HealthRoutes } from "./http/health.ts"
import { createServiceServer, ROUTER_CONFIG } from "./http/node-server.ts"
import { LoggingLive, writeLog } from "./logging.ts"
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

// Built in this order (and torn down in reverse): database and migrations, the secrets key
// checked against the database's (before anything runs on a key that cannot read its
// secrets), demo data on a first start (so it is bootstrapped, not sent as events), capture,
// webhook delivery and operations (sharing that one check), then the HTTP server. So a stop
// closes HTTP first, then lets in-flight deliveries finish, then stores capture's checkpoint.
export const MainLive = HttpLive.pipe(
  Layer.provideMerge(Layer.mergeAll(DeliveryLive, WebhooksLive)),
  Layer.provideMerge(CaptureLive),
  Layer.provideMerge(FirstStart),
  Layer.provideMerge(WebhookSettingsLive),
  Layer.provideMerge(Database.serviceLayer),
  Layer.provideMerge(MetricsLive),
  Layer.provide(LoggingLive)
)

/** A refusal the operator must act on (the database or the secrets key does not fit). */
const isRefusal = (e: unknown): e is { readonly message: string } => e instanceof SecretsKeyMismatch || isStartRefused(e)

// A stop asked for by SIGINT/SIGTERM that unwound cleanly is a success (exit 0). A refusal to
// start goes to stderr as plain text (its message, not a stack trace), and to the log, exit 1.
Layer.launch(MainLive).pipe(
  Effect.catchIf(isRefusal, (refused) =>
    Effect.sync(() => {
      writeLog("error", "refused to start", { reason: refused.message })
      process.stderr.write(`error: ${refused.message}\n`)
      process.exitCode = 1
    })
  ),
  NodeRuntime.runMain({
    teardown: (exit, onExit) => (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit))
  })
)
