// The admin HTTP API's routes, its OpenAPI document and docs page.
import { Layer } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { docsPage } from "../http/docs-page.ts"
import { routesOf, type KnownRoute } from "../http/routes.ts"
import { ADMIN_DOCS_PATH, ADMIN_OPENAPI_PATH, AdminApi } from "./definition.ts"
import { AdminAuthLive, AdminRequestErrorsLive, AdminRootHandlers, KeysHandlers, TokensHandlers } from "./handlers.ts"
import { ReplaysHandlers } from "./replays-handlers.ts"
import { WebhooksHandlers } from "./webhooks-handlers.ts"

export { AdminApi } from "./definition.ts"

/** The admin routes; they require Sql, Database and Webhooks. */
export const AdminRoutesFor = Layer.mergeAll(
  HttpApiBuilder.layer(AdminApi, { openapiPath: ADMIN_OPENAPI_PATH }).pipe(
    Layer.provide([AdminRootHandlers, KeysHandlers, TokensHandlers]),
    Layer.provide([WebhooksHandlers, ReplaysHandlers]),
    Layer.provide([AdminAuthLive, AdminRequestErrorsLive])
  ),
  docsPage(AdminApi, ADMIN_DOCS_PATH)
)

export const adminKnownRoutes: ReadonlyArray<KnownRoute> = [
  ...routesOf(AdminApi),
  { method: "GET", path: ADMIN_OPENAPI_PATH },
  { method: "GET", path: ADMIN_DOCS_PATH }
]
