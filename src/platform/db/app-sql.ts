// Which pool reaches the app's database (kept apart from Sql.ts, which imports Database.ts:
// Database.ts provides this, so neither imports the other's values at load).
import { Context, Layer } from "effect"
import type postgres from "postgres"

/**
 * The app's database, where it is not the service's own (SERVICE_DATABASE_URL set): a pool on
 * it. `pool` undefined (the default, and every test that composes its own layers) means the
 * app's tables sit beside the service's schema in one database, so `appQuery` is `query`
 * there, joining the caller's transaction as before (docs/design.md, "Two databases").
 */
export const AppSql = Context.Reference<{ readonly pool: postgres.Sql | undefined }>("platform/AppSql", {
  defaultValue: () => ({ pool: undefined })
})

/** AppSql over a pool on the app's database (undefined: the same database as the service's). */
export const appSqlLayer = (pool: postgres.Sql | undefined) => Layer.succeed(AppSql, { pool })
