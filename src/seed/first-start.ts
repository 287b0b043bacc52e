// The first start of an empty embedded database loads demo data and tells a newcomer
// what to do next. A DATABASE_URL server is never seeded unless asked (npm run seed).
import { Effect, Layer } from "effect"
import { HttpConfig, SeedConfig } from "../platform/config.ts"
import { AppDatabase, Database } from "../platform/db/Database.ts"
import { seedDemo } from "./demo.ts"

export const FirstStart = Layer.effectDiscard(
  Effect.gen(function* () {
    const { embedded } = yield* Database
    // The demo plays the app: its rows go into the app's database.
    const app = yield* AppDatabase
    const { demo } = yield* SeedConfig
    const { port, host } = yield* HttpConfig
    if (!embedded || !demo) return
    const rows = yield* Effect.promise(() => app.sql<{ n: number }[]>`select count(*)::int as n from app.companies`)
    if ((rows[0]?.n ?? 0) > 0) return
    const summary = yield* Effect.promise(() => seedDemo(app.sql))
    yield* Effect.logInfo("demo data loaded", summary)
    process.stdout.write(
      `${[
        "",
        `Safety Records Service, first start: demo company "${summary.company}" (${summary.host}) loaded.`,
        `  API:        http://${host}:${port}/api/v1   (Host: ${summary.host} or any host)`,
        `  Make a key: npm run admin -- keys create --company ${summary.host} --name demo --read all --as ${summary.adminEmail}`,
        `  Try it:     curl -H "Authorization: Bearer mk_..." http://${host}:${port}/api/v1/incidents`,
        `  Admin:      http://${host === "0.0.0.0" ? "localhost" : host}:${port}/admin   (sign in with a token: npm run admin -- tokens create --as ${summary.adminEmail})`,
        ""
      ].join("\n")}\n`
    )
  })
)
