// The real HTTP server with the real routes (read API, docs, admin API) on a free
// port, against a test database. Several servers may share one database, as several
// service processes would: each has its own connection pool and its own usage counters.
import {
  createServiceServer,
  DEFAULT_HTTP_LIMITS,
  ROUTER_CONFIG,
  ServerDoor,
  type DoorSlot
} from "../../src/platform/http/node-server.ts"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, References, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { AdminWebRoutes } from "../../src/faces/pages/index.ts"
import { makeApiRoutes, makeApiServices, type ApiSettingsShape } from "../../src/faces/routes.ts"
import { ApiKeys, type KeysStats } from "../../src/access/keys/service.ts"
import { TrustProxySetting } from "../../src/platform/config.ts"
import type { TrustProxy } from "../../src/platform/http/client-address.ts"
import { connect, Database } from "../../src/platform/db/Database.ts"
import { Sql } from "../../src/platform/db/Sql.ts"
import { parseAllowedNetworksOrThrow } from "../../src/webhooks/net/address-guard.ts"
import type { WebhookDeps } from "../../src/webhooks/engine/settings.ts"
import { makeWebhooks, Webhooks } from "../../src/webhooks/service.ts"
import { randomBytes } from "node:crypto"

export interface TestServer {
  readonly url: string
  readonly port: number
  /** What the server's keys service holds in memory and the statements its lookups ran. */
  readonly keys: () => KeysStats
  /** Stops the server (flushing key usage, as at shutdown). */
  readonly close: () => Promise<void>
}

export const databaseLayer = (url: string, poolSize = 10) =>
  Layer.effect(
    Database,
    Effect.acquireRelease(
      Effect.sync(() => connect(url, poolSize)),
      (sql) => Effect.promise(() => sql.end({ timeout: 2 }))
    ).pipe(Effect.map((sql) => ({ sql, url, embedded: false })))
  ).pipe((database) => Layer.provideMerge(Sql.layer, database))

/** The webhook operations over the test database: a fresh secrets key, WEBHOOK_ALLOWED_NETWORKS from the environment. */
export const webhooksTestLayer = (overrides: Partial<WebhookDeps> = {}) =>
  Layer.effect(
    Webhooks,
    Effect.map(Sql, (sql) =>
      makeWebhooks(
        {
          secretsKey: randomBytes(32),
          allowed: parseAllowedNetworksOrThrow(process.env.WEBHOOK_ALLOWED_NETWORKS ?? ""),
          ...overrides
        },
        sql
      )
    )
  )

/** The read API, docs and admin API (and the admin pages with `pages`) on a free loopback port. */
export const startServer = async (
  databaseUrl: string,
  settings: Partial<ApiSettingsShape> = {},
  options: {
    readonly poolSize?: number
    readonly webhooks?: Partial<WebhookDeps>
    readonly pages?: boolean
    /** TRUST_PROXY, parsed (default: none, the socket's address). */
    readonly trustProxy?: TrustProxy
    /** The server's door (src/faces/door.ts), as the service has it; false: every request goes to the router. */
    readonly door?: boolean
  } = {}
): Promise<TestServer> => {
  // One Services layer, given to the routes and kept in the output: one keys service, reachable by the test.
  const services = makeApiServices(settings)
  const api = makeApiRoutes(settings, services)
  const routes = options.pages ? Layer.mergeAll(api, AdminWebRoutes) : api
  const door: DoorSlot = { current: undefined }
  const ServerLive = HttpRouter.serve(routes, { disableLogger: true, routerConfig: ROUTER_CONFIG }).pipe(
    Layer.provide(webhooksTestLayer(options.webhooks)),
    Layer.provideMerge(
      NodeHttpServer.layer(() => createServiceServer(DEFAULT_HTTP_LIMITS, door), { port: 0, host: "127.0.0.1" })
    ),
    Layer.provide(options.door === false ? Layer.empty : Layer.succeed(ServerDoor, door)),
    Layer.provideMerge(services),
    Layer.provide(databaseLayer(databaseUrl, options.poolSize)),
    Layer.provide(Layer.succeed(References.MinimumLogLevel, "Error")),
    Layer.provide(options.trustProxy === undefined ? Layer.empty : Layer.succeed(TrustProxySetting, options.trustProxy))
  )
  const scope = Effect.runSync(Scope.make())
  const context = await Effect.runPromise(Layer.buildWithScope(ServerLive, scope))
  const address = Context.get(context, HttpServer.HttpServer).address
  if (address._tag === "UnixPathAddress") throw new Error("expected a TCP address")
  const keys = Context.get(context, ApiKeys)
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    keys: () => keys.stats(),
    close: () => Effect.runPromise(Scope.close(scope, Exit.void))
  }
}
