// Everything this part of the service serves: the read API (/api/v1/**), its OpenAPI
// document and docs page, the admin API (/admin/v1/**), and JSON answers for unknown paths
// and methods. Requires Database and Webhooks (src/webhooks/service.ts: WebhooksLive in
// src/main.ts); every other service is provided here.
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { docsPage } from "./http/docs-page.ts"
import { AdminRoutesFor, adminKnownRoutes } from "./admin-api/index.ts"
import { ApiKeyAuthLive } from "./api/auth.ts"
import { DOCS_PATH, OPENAPI_PATH, ServiceApi } from "./api/definition.ts"
import { doorLayer } from "./door.ts"
import { fallbackLayer } from "./fallback.ts"
import { NoStore } from "./http/no-store.ts"
import { routesOf, type KnownRoute } from "./http/routes.ts"
import { ADMIN_WEB_ROUTES } from "./pages/paths.ts"
import { ResourceHandlers, RootHandlers } from "./api/handlers.ts"
import { DeletionsHandlers } from "./api/deletions-handlers.ts"
import { StreamHandlers } from "./api/stream-handlers.ts"
import { HooksHandlers } from "./api/hooks-handlers.ts"
import { EventsHandlers } from "./api/events-handlers.ts"
import { RequestErrorsLive } from "./api/request-errors.ts"
import { ApiKeys } from "../access/keys/service.ts"
import { ApiPool } from "../platform/db/api-pool.ts"
import { ApiSettings, type ApiSettingsShape } from "../platform/api-settings.ts"
import { Deletions } from "../read/deletions.ts"
import { StreamFeed } from "../read/stream.ts"
import { EventsFeed } from "../read/events.ts"
import { Views } from "../read/views.ts"

export { ServiceApi } from "./api/definition.ts"
export { ApiSettings, type ApiSettingsShape } from "../platform/api-settings.ts"

/**
 * The route table: every route this part of the service serves. The fallback answers 405 (with
 * Allow) for a known path and another method, 404 for an unknown path; metrics and trace spans
 * are labelled by these patterns.
 */
export const SERVED_ROUTES: ReadonlyArray<KnownRoute> = [
  ...routesOf(ServiceApi),
  { method: "GET", path: OPENAPI_PATH },
  { method: "GET", path: DOCS_PATH },
  ...adminKnownRoutes,
  // The admin pages, served beside the admin API.
  ...ADMIN_WEB_ROUTES
]

/** With the health checks, served by their own router: every route the public server knows. */
export const KNOWN_ROUTES: ReadonlyArray<KnownRoute> = [
  ...SERVED_ROUTES,
  { method: "GET", path: "/healthz" },
  { method: "GET", path: "/readyz" }
]

/** The keys service and the read model, on the API's own pool, with explicit settings or from the environment. */
export const makeApiServices = (settings?: Partial<ApiSettingsShape>) => {
  const SettingsLive = settings === undefined ? ApiSettings.fromEnv : ApiSettings.layer(settings)
  return Layer.mergeAll(Views.layer, EventsFeed.layer, Deletions.layer, StreamFeed.layer).pipe(
    Layer.provideMerge(ApiKeys.layer),
    Layer.provideMerge(ApiPool.layer),
    Layer.provideMerge(SettingsLive)
  )
}

/**
 * The routes with explicit settings (tests, bench); ApiRoutes reads them from the environment.
 * A test that also wants the services themselves passes the same `Services` layer it builds
 * beside the routes: one build makes one of each.
 */
export const makeApiRoutes = (
  settings?: Partial<ApiSettingsShape>,
  Services: ReturnType<typeof makeApiServices> = makeApiServices(settings)
) => {
  const ServiceRoutes = HttpApiBuilder.layer(ServiceApi, { openapiPath: OPENAPI_PATH }).pipe(
    Layer.provide([RootHandlers, ResourceHandlers]),
    Layer.provide(HooksHandlers),
    Layer.provide(EventsHandlers),
    Layer.provide(DeletionsHandlers),
    Layer.provide(StreamHandlers),
    Layer.provide([ApiKeyAuthLive, RequestErrorsLive])
  )
  const Docs = docsPage(ServiceApi, DOCS_PATH)
  const Fallback = fallbackLayer(SERVED_ROUTES)
  // Where the server has a door (src/platform/http/node-server.ts), the flood's refusals are answered there.
  const Door = doorLayer(SERVED_ROUTES)
  return Layer.mergeAll(ServiceRoutes, Docs, AdminRoutesFor, Fallback, NoStore, Door).pipe(Layer.provide(Services))
}

/** The keys service and read model of src/main.ts, from the environment: one layer, so one of each however often provided. */
export const ApiServices = makeApiServices()

/** The routes for src/main.ts: HttpRouter.serve(Layer.mergeAll(PublicHealthRoutes, ApiRoutes)), with Database provided. */
export const ApiRoutes = makeApiRoutes(undefined, ApiServices)
