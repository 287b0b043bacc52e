// The database as an Effect service: where it is (embedded or DATABASE_URL), a scoped
// postgres.js pool, and the preflight and migrations that must pass before anything runs.
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import postgres from "postgres"
import { DatabaseConfig } from "../config.ts"
import { markService, startEmbedded } from "./embedded.ts"
import { ensureDemoAppSchema } from "./demo-schema.ts"
import { checkAppContract } from "./app-contract.ts"
import { migrate } from "./migrate.ts"
import { requirePostgresPatched } from "./postgres-patch.ts"
import { preflight } from "./preflight.ts"
import { isStartRefused, type StartRefused } from "./refusal.ts"

export interface DatabaseShape {
  readonly sql: postgres.Sql
  /** Connection URL, for the replication connection and child tools. */
  readonly url: string
  readonly embedded: boolean
}

/** A pool or a transaction. */
// biome-ignore lint/complexity/noBannedTypes: postgres.js names "no custom types" as {}
export type Tx = postgres.ISql<{}>

/** A transaction (capture's batch, a rebuild): work that must commit together. */
export type Transaction = postgres.TransactionSql<Record<string, unknown>>

export class Database extends Context.Service<Database, DatabaseShape>()("service/Database") {}

export const connect = (
  url: string,
  max = 10,
  options: { readonly keepForever?: boolean; readonly arrays?: false } = {}
) =>
  postgres(url, {
    max,
    onnotice: () => {},
    connection: { application_name: "safety-records-service" },
    // A connection that holds session state (capture's leader lock) must not be recycled:
    // postgres.js closes connections after a random 30 to 60 minutes by default.
    ...(options.keepForever ? { max_lifetime: null, idle_timeout: 0 } : {}),
    // No array parameters: postgres.js then skips its array-type query on connecting, whose
    // failure, when the network cuts the connection right then, nothing awaits (an unhandled rejection).
    ...(options.arrays === false ? { fetch_types: false } : {})
  })

/** The database could not be started, reached or readied (migrations, the app's tables), in the driver's words. */
export class DatabaseError extends Data.TaggedError("DatabaseError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** A failure on the way to a ready database: a refusal stays one (it says what to fix), anything else is a DatabaseError. */
const failed = (cause: unknown): StartRefused | DatabaseError =>
  isStartRefused(cause)
    ? cause
    : new DatabaseError({ message: cause instanceof Error ? cause.message : String(cause), cause })

/** Who opens the database: the service (which marks the data directory it runs on) or a tool. */
export type Role = "service" | "tool"

/** Where the database is: DATABASE_URL, or the embedded server (started if needed). */
export const locate = Effect.fn("Database.locate")(function* (role: Role = "tool") {
  const config = yield* DatabaseConfig
  if (Option.isSome(config.url)) {
    return { url: Redacted.value(config.url.value), embedded: false, owned: false, stop: () => Promise.resolve() }
  }
  const server = yield* Effect.tryPromise({
    try: () => startEmbedded({ dataDir: config.dataDir, port: config.embeddedPort, notUnderService: role === "tool" }),
    catch: failed
  })
  if (server.owned) yield* Effect.logInfo("embedded PostgreSQL started", { dataDir: config.dataDir })
  const unmark = role === "service" ? markService(config.dataDir) : () => {}
  return {
    url: server.url,
    embedded: true,
    owned: server.owned,
    stop: async () => {
      unmark()
      await server.stop()
    }
  }
})

/**
 * Pool, preflight, the app's tables (the embedded demo database gets the demo's copy; any
 * other must already have them: checked, never created), then the service's own migrations.
 * Releases the pool and stops an embedded server it started.
 */
const layerFor = (role: Role) =>
  Layer.effect(
    Database,
    Effect.gen(function* () {
      yield* Effect.try({ try: () => requirePostgresPatched(), catch: failed })
      const config = yield* DatabaseConfig
      const where = yield* Effect.acquireRelease(locate(role), (w) =>
        Effect.promise(() => w.stop()).pipe(
          Effect.tap(() => (w.owned ? Effect.logInfo("embedded PostgreSQL stopped") : Effect.void))
        )
      )
      const sql = yield* Effect.acquireRelease(
        Effect.sync(() => connect(where.url, config.poolSize)),
        (sql) => Effect.promise(() => sql.end({ timeout: 5 }))
      )
      yield* Effect.tryPromise({ try: () => preflight(sql), catch: failed })
      if (where.embedded && (yield* Effect.tryPromise({ try: () => ensureDemoAppSchema(sql), catch: failed }))) {
        yield* Effect.logInfo("demo app tables created (embedded database)")
      }
      const unfit = yield* Effect.tryPromise({ try: () => checkAppContract(sql), catch: failed })
      // Not a refusal: capture holds those tables' records until they fit (docs/design.md, "Quarantine").
      if (unfit.length > 0)
        yield* Effect.logWarning("app tables that no longer fit what the service reads", { problems: unfit })
      const applied = yield* Effect.tryPromise({ try: () => migrate(sql), catch: failed })
      if (applied.length > 0) yield* Effect.logInfo("migrations applied", { applied })
      return { sql, url: where.url, embedded: where.embedded }
    })
  )

/** For the admin CLI and the seeder. */
export const layer = layerFor("tool")
/** For the service. */
export const serviceLayer = layerFor("service")
