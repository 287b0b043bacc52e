// Runs an Effect that needs the `Sql` service against a test database's pool (and, with two
// databases, the app's database's pool as AppSql).
import { Effect } from "effect"
import type postgres from "postgres"
import { appSqlLayer, Sql } from "../../src/platform/db/Sql.ts"

export const runSql = <A, E>(pool: postgres.Sql, effect: Effect.Effect<A, E, Sql>, app?: postgres.Sql): Promise<A> =>
  Effect.runPromise(effect.pipe(Effect.provide(Sql.fromPool(pool)), Effect.provide(appSqlLayer(app))))
