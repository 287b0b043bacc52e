// The read API's own connection pool, for the key lookups (src/access/keys/) and the reads
// (src/read/) that serve its requests. Its statements are prepared once per connection and
// always run with their generic plan (plan_cache_mode = force_generic_plan): the key check
// joined to a page read plans in about as long as it runs, and the generic plan is the
// same index scan for every company and page.
import { Context, Effect, Layer } from "effect"
import postgres from "postgres"
import { Database } from "./Database.ts"
import { ApiSettings } from "../api-settings.ts"

export class ApiPool extends Context.Service<ApiPool, { readonly sql: postgres.Sql }>()("service/api/ApiPool") {
  static readonly layer = Layer.effect(
    ApiPool,
    Effect.gen(function* () {
      const { url } = yield* Database
      const { poolSize } = yield* ApiSettings
      const sql = yield* Effect.acquireRelease(
        Effect.sync(() =>
          postgres(url, {
            max: poolSize,
            onnotice: () => {},
            connection: { application_name: "safety-records-service/api", plan_cache_mode: "force_generic_plan" }
          })
        ),
        (sql) => Effect.promise(() => sql.end({ timeout: 5 }))
      )
      return { sql }
    })
  )
}
