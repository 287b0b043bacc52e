// The database as readiness and the operators' status see it: whether it answers with this
// build's schema (every migration applied), and its clock.
import { Effect } from "effect"
import { loadMigrations } from "./migrate.ts"
import { query, type Sql } from "./Sql.ts"

/**
 * A check that every migration of this build is applied: one statement, so it also says the
 * database answers. The build's migrations are listed once, when the check is made.
 */
export const schemaCheck = (): Effect.Effect<boolean, never, Sql> => {
  const names = loadMigrations().map((m) => m.name)
  return query(
    (sql) => sql<{ n: number }[]>`select count(*)::int as n from service.schema_migrations where name = any(${names})`
  ).pipe(Effect.map(([r]) => r!.n === names.length))
}

/** The database's clock now. */
export const databaseNow: Effect.Effect<Date, never, Sql> = query((sql) =>
  sql<{ now: Date }[]>`select now()`.then(([r]) => r!.now)
)
