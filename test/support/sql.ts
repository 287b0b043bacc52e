// Runs an Effect that needs the `Sql` service against a test database's pool.
import { Effect } from "effect"
import type postgres from "postgres"
import { Sql } from "../../src/platform/db/Sql.ts"

export const runSql = <A, E>(pool: postgres.Sql, effect: Effect.Effect<A, E, Sql>): Promise<A> =>
  Effect.runPromise(Effect.provide(effect, Sql.fromPool(pool)))
