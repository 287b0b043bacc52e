// The demo's copy of the app's tables (sql/demo/app.sql). The service's migrations never
// touch `app`: on a real deployment those tables belong to the app. Only demo tools apply
// this: the embedded first start, `npm run seed` and `npm run seed -- --schema-only`.
import { readFileSync } from "node:fs"
import type { Sql } from "postgres"
import { migrate } from "./migrate.ts"

export const DEMO_APP_SQL = new URL("../../../sql/demo/app.sql", import.meta.url)

const APP_LOCK = 7_351_009_003 // two demo tools starting together make the schema once

/** True when the database has an `app` schema (whatever is in it). */
export const hasAppSchema = async (sql: Sql): Promise<boolean> => {
  const [row] = await sql<{ ok: boolean }[]>`select exists (select 1 from pg_namespace where nspname = 'app') as ok`
  return row?.ok ?? false
}

/** Creates the demo app tables unless an `app` schema exists; true when it created them. */
export const ensureDemoAppSchema = async (sql: Sql): Promise<boolean> =>
  sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${APP_LOCK})`
    const [row] = await tx<{ ok: boolean }[]>`select exists (select 1 from pg_namespace where nspname = 'app') as ok`
    if (row?.ok) return false
    await tx.unsafe(readFileSync(DEMO_APP_SQL, "utf8"))
    return true
  })

/** A demo or test database: the demo's app tables, then the service's migrations. */
export const prepareDemoDatabase = async (sql: Sql): Promise<ReadonlyArray<string>> => {
  await ensureDemoAppSchema(sql)
  return migrate(sql)
}
