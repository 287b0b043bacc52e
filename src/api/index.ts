// Everything this part of the service serves: the read API (/api/v1/**), its OpenAPI
// document and docs page, the admin API (/admin/v1/**), and JSON answers for unknown paths
// and methods. Requires Database and Webhooks (src/webhooks/service.ts: WebhooksLive in
// src/main.ts); every other service is provided here.
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { docsPage } from "../http/docs-page.ts"
import { AdminRoutesFor, adminKnownRoutes } from "../admin/http/index.ts"
import { ApiKeyAuthLive } from "./auth.ts"
import { DOCS_PATH, OPENAPI_PATH, ServiceApi } from "./definition.ts"
import { fallbackLayer, routesOf } from "./fallback.ts"
import { ResourceHandlers, RootHandlers } from "./handlers.ts"
import { DeletionsHandlers } from "./deletions-handlers.ts"
import { HooksHandlers } from "./hooks-handlers.ts"
import { EventsHandlers } from "../operations/events-handlers.ts"
import { KeyDirectory } from "./keys.ts"
import { ApiPool } from "./pool.ts"
import { RequestErrorsLive } from "./request-errors.ts"
import { RateLimiter } from "./rate-limit.ts"
import { ApiSettings, type ApiSettingsShape } from "./settings.ts"
import { UsageRecorder } from "./usage.ts"
import { Views } from "./views.ts"

export { ServiceApi } from "./definition.ts"
export { ApiSettings, type ApiSettingsShape } from "./settings.ts"

/** The routes with explicit settings (tests, bench); ApiRoutes reads them from the environment. */
export const makeApiRoutes = (settings?: Partial<ApiSettingsShape>) => {
  const SettingsLive = settings === undefined ? ApiSettings.fromEnv : ApiSettings.layer(settings)
  const Services = Layer.mergeAll(KeyDirectory.layer, RateLimiter.layer, UsageRecorder.layer, Views.layer).pipe(
    Layer.provideMerge(ApiPool.layer),
    Layer.provideMerge(SettingsLive)
  )
  const ServiceRoutes = HttpApiBuilder.layer(ServiceApi, { openapiPath: OPENAPI_PATH }).pipe(
    Layer.provide([RootHandlers, ResourceHandlers]),
    Layer.provide(HooksHandlers),
    Layer.provide(EventsHandlers),
    Layer.provide(DeletionsHandlers),
    Layer.provide([ApiKeyAuthLive, RequestErrorsLive])
  )
  const Docs = docsPage(ServiceApi, DOCS_PATH)
  const Fallback = fallbackLayer([
    ...routesOf(ServiceApi),
    { method: "GET", path: OPENAPI_PATH },
    { method: "GET", path: DOCS_PATH },
    ...adminKnownRoutes
  ])
  return Layer.mergeAll(ServiceRoutes, Docs, AdminRoutesFor, Fallback).pipe(Layer.provide(Services))
}

/** The routes for src/main.ts: HttpRouter.serve(Layer.mergeAll(HealthRoutes, ApiRoutes)), with Database provided. */
export const ApiRoutes = makeApiRoutes()
