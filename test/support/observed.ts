// The real HTTP servers as main.ts composes them (the public one: health, read API, admin API
// and the request middleware; the operations one: /metrics and the detailed /readyz), over a
// test database with the test's own capture and delivery engine, and the service's JSON logs
// captured from stdout.
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { createServer } from "node:http"
import type { Sql } from "postgres"
import { makeApiRoutes, type ApiSettingsShape } from "../../src/faces/routes.ts"
import { API_KEY_PREFIX, newSecret } from "../../src/access/keys/bearer-secrets.ts"
import { Capture } from "../../src/pipeline/capture/Capture.ts"
import type { CaptureStats } from "../../src/pipeline/capture/run.ts"
import { Database } from "../../src/platform/db/Database.ts"
import { Sql as SqlService } from "../../src/platform/db/Sql.ts"
import { DeliveryEngine, type DeliveryEngineShape } from "../../src/webhooks/engine/engine.ts"
import { PublicHealthRoutes } from "../../src/faces/ops/health.ts"
import { OpsRoutes } from "../../src/faces/ops-server.ts"
import { LoggingLive } from "../../src/platform/logging.ts"
import { RequestObservability } from "../../src/faces/observability.ts"
import { attemptObserver, Metrics, type ServiceMetrics } from "../../src/faces/ops/metrics.ts"
import { makeWebhooks, Webhooks } from "../../src/webhooks/service.ts"
import { startEngine, type RunningEngine, type TestDeps } from "./world.ts"

/** A delivery engine whose attempts feed the metrics' latency histogram, as in the service. */
export const startObservedEngine = (
  deps: TestDeps,
  metrics: ServiceMetrics,
  retrySchedule = "100ms,100ms"
): Promise<RunningEngine> =>
  startEngine(deps, { retrySchedule, pollMs: 300, replayLane: false, observer: attemptObserver(metrics) })

export interface ObservedServer {
  /** The public port. */
  readonly url: string
  /** The operations port: /metrics, the detailed /readyz. */
  readonly opsUrl: string
  readonly close: () => Promise<void>
}

export const startObservedServer = async (options: {
  readonly sql: Sql
  readonly url: string
  readonly deps: TestDeps
  readonly metrics: ServiceMetrics
  readonly capture: { readonly stats: CaptureStats; readonly slot: string }
  readonly engine?: DeliveryEngineShape
  readonly settings?: Partial<ApiSettingsShape>
}): Promise<ObservedServer> => {
  const Routes = Layer.mergeAll(PublicHealthRoutes, makeApiRoutes(options.settings ?? {}), RequestObservability)
  const Services = Layer.mergeAll(
    Layer.succeed(Database, { sql: options.sql, url: options.url, embedded: false }),
    SqlService.fromPool(options.sql),
    Layer.succeed(Metrics, options.metrics),
    Layer.succeed(Capture, options.capture),
    Layer.succeed(Webhooks, makeWebhooks(options.deps, { pool: options.sql })),
    options.engine ? Layer.succeed(DeliveryEngine, options.engine) : Layer.empty
  )
  const server = () => NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })
  const PublicLive = HttpRouter.serve(Routes, { disableLogger: true }).pipe(
    Layer.provideMerge(server()),
    Layer.provide(Services),
    Layer.provide(LoggingLive)
  )
  const OpsLive = HttpRouter.serve(OpsRoutes, { disableLogger: true }).pipe(
    Layer.provideMerge(server()),
    Layer.provide(Services),
    Layer.provide(LoggingLive)
  )
  const scope = Effect.runSync(Scope.make())
  const urlOf = (context: Context.Context<HttpServer.HttpServer>) => {
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
    return `http://127.0.0.1:${address.port}`
  }
  const url = urlOf(await Effect.runPromise(Layer.buildWithScope(PublicLive, scope)))
  const opsUrl = urlOf(await Effect.runPromise(Layer.buildWithScope(OpsLive, scope)))
  return { url, opsUrl, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

/** An API key row with a known key (as keys create makes it). */
export const apiKey = async (sql: Sql, companyId: string, scopes: ReadonlyArray<string>) => {
  const s = newSecret(API_KEY_PREFIX)
  const [row] = await sql<{ id: string }[]>`
    insert into service.api_keys (company_id, name, fingerprint, scopes)
    values (${companyId}, 'metrics test', ${s.fingerprint}, ${scopes as string[]}) returning id::text`
  return { id: row!.id, key: s.secret }
}

/** Every line the service's logger writes to stdout while `f` runs and until `stop` is called. */
export const captureStdout = () => {
  const lines: string[] = []
  const original = process.stdout.write.bind(process.stdout)
  process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    lines.push(typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"))
    return (original as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest)
  }) as typeof process.stdout.write
  return {
    lines: () =>
      lines
        .join("")
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    text: () => lines.join(""),
    stop: () => {
      process.stdout.write = original
    }
  }
}

/** A sample's value in Prometheus text: `name{a="b",...}`; labels must match exactly. */
export const sample = (text: string, name: string, labels: Record<string, string> = {}): number | undefined => {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .join(",")
  const prefix = want === "" ? `${name} ` : `${name}{${want}} `
  const line = text.split("\n").find((l) => l.startsWith(prefix))
  return line === undefined ? undefined : Number(line.slice(prefix.length))
}
