// The admin pages (/admin): server-rendered HTML for admins in a browser, over the same
// operations as the admin API (/admin/v1). Requires Sql, Database and Webhooks, like the API's
// routes; src/main.ts merges AdminWebRoutes into its routes.
import { Layer } from "effect"
import { ActivityRoutes } from "./activity.ts"
import { AssetRoutes } from "./assets.ts"
import { KeysRoutes } from "./keys.ts"
import { ReplaysRoutes } from "./replays.ts"
import { PortalRoutes } from "./portal.ts"
import { SignInRoutes } from "./sign-in.ts"
import { StatusRoutes } from "./status.ts"
import { WebhooksRoutes } from "./webhooks.ts"

export { ADMIN_WEB_ROUTES, PATHS as ADMIN_WEB_PATHS } from "./paths.ts"

export const AdminWebRoutes = Layer.mergeAll(
  SignInRoutes,
  KeysRoutes,
  WebhooksRoutes,
  ReplaysRoutes,
  ActivityRoutes,
  StatusRoutes,
  PortalRoutes,
  AssetRoutes
)
