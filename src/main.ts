// Composition root: configuration, database (embedded or DATABASE_URL), migrations, then
// capture, delivery and the HTTP server, as SERVICE_ROLES asks; SIGINT/SIGTERM unwind them
// in reverse order.
import { NodeHttpServer, NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer, Runtime } from "effect"
import { HttpRouter } from "effect/http"
import { AdminWebRoutes } from "./faces/pages/index.ts"
import { ApiRoutes, ApiServices } from "./faces/routes.ts"
import { CaptureLive } from "./pipeline/capture/Capture.ts"
import {
  HttpConfig,
  OpsConfig,
  loadHttpLimits,
  loadServiceRoles,
  loadTrustProxy,
  serviceRolesLayer,
  trustProxyLayer,
  type HttpLimits,
  type ServiceRole
} from "./platform/config.ts"
import { SecretsKeyMismatch } from "./platform/secrets/key-check.ts"
import { DeliveryLive } from "./webhooks/background.ts"
import { WebhookSettingsLive } from "./webhooks/engine/settings.ts"
import * as Database from "./platform/db/Database.ts"
import { Sql } from "./platform/db/Sql.ts"
import { ReadReplicasLive } from "./platform/db/read-replicas.ts"
import { isStartRefused } from "./platform/db/refusal.ts"
import { PublicHealthRoutes } from "./faces/ops/health.ts"
import { OpsListenLog, OpsRoutes } from "./faces/ops-server.ts"
import { createServiceServer, ROUTER_CONFIG, ServerDoor, type DoorSlot } from "./platform/http/node-server.ts"
import { LoggingLive, writeLog } from "./platform/logging.ts"
import { RequestObservability, RequestSpanNames } from "./faces/observability.ts"
import { MetricsLive } from "./faces/ops/metrics.ts"
import { ReplayRateLive } from "./webhooks/replay/lane.ts"
import { SupervisorLive } from "./platform/supervisor.ts"
import { ProcessRegistryLive } from "./platform/processes.ts"
import { TracingLive } from "./platform/tracing.ts"
import { FirstStart } from "./seed/first-start.ts"
import { WebhooksLive } from "./webhooks/service.ts"
import { tolerateStrayConnectionFailures } from "./platform/db/stray-failures.ts"

tolerateStrayConnectionFailures()

// The public port: with the api role, the read API and the admin API and pages, over the
// webhook operations behind their hooks and forms; every process answers /healthz and a
// /readyz that says ready or not there. The operations port serves /metrics and the detailed
// /readyz, whatever the roles.
const httpFor = (roles: ReadonlyArray<ServiceRole>, limits: HttpLimits) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const { port, host } = yield* HttpConfig
      const ops = yield* OpsConfig
      // The API installs its door on the public server (src/faces/door.ts): the refusals a
      // flood makes, answered before the router.
      const door: DoorSlot = { current: undefined }
      const serverAt = (at: { readonly port: number; readonly host: string }, slot?: DoorSlot) =>
        NodeHttpServer.layer(() => createServiceServer(limits, slot), { ...at, gracefulShutdownTimeout: "10 seconds" })
      // HttpRouter.serve logs the public address ("Listening on http://...") once it listens.
      const options = { disableLogger: true, routerConfig: ROUTER_CONFIG }
      const publicPort = roles.includes("api")
        ? HttpRouter.serve(
            Layer.mergeAll(PublicHealthRoutes, RequestObservability, ApiRoutes, AdminWebRoutes),
            options
          ).pipe(
            Layer.provide(serverAt({ port, host }, door)),
            Layer.provide(WebhooksLive),
            // The same layer as the API's (memoized): the pages share its keys service, so one
            // count of failed authentications per client.
            Layer.provide(ApiServices),
            Layer.provide(Layer.succeed(ServerDoor, door))
          )
        : HttpRouter.serve(Layer.mergeAll(PublicHealthRoutes, RequestObservability), options).pipe(
            Layer.provide(serverAt({ port, host }))
          )
      const opsPort = Layer.merge(
        HttpRouter.serve(OpsRoutes, { ...options, disableListenLog: true }),
        OpsListenLog
      ).pipe(
        Layer.provide(serverAt({ port: ops.port, host: ops.host })),
        // With the API, /metrics shows its keys service's caches: the same instance (memoized).
        Layer.provide(roles.includes("api") ? ApiServices : Layer.empty)
      )
      return Layer.merge(publicPort, opsPort)
    })
  )

// Built in this order (and torn down in reverse): database and migrations (and the schema
// fence: a release too old for the database is refused there), the secrets key checked
// against the database's (before anything runs on a key that cannot read its secrets; only
// where the API or delivery use it), demo data on a first start (so it is bootstrapped, not
// sent as events), the supervisor, the process's entry in the registry of releases running,
// capture, webhook delivery (the engine and the replay lane), then the HTTP server. Capture's and delivery's loops run under the
// supervisor, which stops them last started first. So a stop closes HTTP first, then lets
// in-flight deliveries finish, then stores capture's checkpoint. SERVICE_ROLES (read first,
// so a bad value is refused before anything starts) leaves out capture, delivery or the API;
// /readyz and /metrics find out what runs here (Effect.serviceOption), so nothing else needs
// to know.
export const MainLive = Layer.unwrap(
  Effect.gen(function* () {
    const roles = yield* loadServiceRoles
    const limits = yield* loadHttpLimits
    const trustProxy = yield* loadTrustProxy
    // Typed as providing nothing: what reads them asks whether they run here.
    const capture: Layer.Layer<never, unknown, Database.Database | Database.AppDatabase> = roles.includes("capture")
      ? CaptureLive
      : Layer.empty
    const delivery: Layer.Layer<never, unknown, Database.Database> = roles.includes("delivery")
      ? DeliveryLive
      : Layer.empty
    const settings: Layer.Layer<never, unknown, Database.Database> =
      roles.includes("api") || roles.includes("delivery") ? WebhookSettingsLive : Layer.empty
    // The read API's standbys (READ_DATABASE_URL), measured only where the API runs.
    const replicas: Layer.Layer<never, unknown, Database.Database> = roles.includes("api")
      ? ReadReplicasLive
      : Layer.empty
    yield* Effect.logInfo("service roles", { roles })
    return httpFor(roles, limits).pipe(
      Layer.provideMerge(delivery),
      Layer.provideMerge(capture),
      Layer.provideMerge(ProcessRegistryLive),
      Layer.provideMerge(SupervisorLive),
      Layer.provideMerge(FirstStart),
      Layer.provideMerge(settings),
      Layer.provideMerge(replicas),
      Layer.provideMerge(Sql.layer),
      Layer.provideMerge(Database.serviceLayer),
      Layer.provideMerge(MetricsLive),
      Layer.provideMerge(ReplayRateLive),
      Layer.provideMerge(serviceRolesLayer(roles)),
      Layer.provideMerge(trustProxyLayer(trustProxy))
    )
  })
  // Traces (when OTEL_EXPORTER_OTLP_ENDPOINT is set) around everything: spans still queued are sent last.
).pipe(Layer.provide(Layer.merge(TracingLive, RequestSpanNames)), Layer.provide(LoggingLive))

/** A refusal the operator must act on (the database or the secrets key does not fit). */
const isRefusal = (e: unknown): e is { readonly message: string } =>
  e instanceof SecretsKeyMismatch || isStartRefused(e)

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
    teardown: (exit, onExit) =>
      Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
  })
)
