// The databases as Effect services: where they are (embedded, or DATABASE_URL and
// SERVICE_DATABASE_URL), scoped postgres.js pools, and the preflight and migrations that must
// pass before anything runs. `Database` is the service's own state; `AppDatabase` is the app's
// database it follows (the same one when SERVICE_DATABASE_URL is unset: docs/design.md,
// "Two databases").
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import postgres from "postgres"
import { DatabaseConfig } from "../config.ts"
import { markService, startEmbedded } from "./embedded.ts"
import { ensureDemoAppSchema } from "./demo-schema.ts"
import { checkAppContract } from "./app-contract.ts"
import { migrate, type MigrationEvent } from "./migrate.ts"
import { checkFence, RELEASE_SETTING } from "./fence.ts"
import { RELEASE } from "../release.ts"
import { requirePostgresPatched } from "./postgres-patch.ts"
import { preflight, preflightOwnDatabase } from "./preflight.ts"
import { isStartRefused, StartRefused } from "./refusal.ts"
import { AppSql } from "./app-sql.ts"

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

/** The service's own database: its schema (mirror, views, outbox, deliveries, keys...) and capture's leader lock. */
export class Database extends Context.Service<Database, DatabaseShape>()("service/Database") {}

export interface AppDatabaseShape {
  /** A pool on the app's database; the service's own pool when both are one database. */
  readonly sql: postgres.Sql
  /** The app's database, for the replication connection and the slot's exported snapshot. */
  readonly url: string
  /** True when the service's state is in a database of its own (SERVICE_DATABASE_URL, or the embedded default). */
  readonly separate: boolean
}

/** The app's database the service follows: replication, the first snapshot, the publication, its WAL. */
export class AppDatabase extends Context.Service<AppDatabase, AppDatabaseShape>()("service/AppDatabase") {}

/** The embedded server's database for the service's own state, beside the demo app's `postgres`. */
export const EMBEDDED_SERVICE_DATABASE = "safety_records"

/** The same server's URL, another database. */
export const databaseUrl = (url: string, database: string) => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * Where the embedded server keeps the service's state: its own database (made on the first
 * start), unless the app's database already holds the service's schema, as versions before
 * the split made it. That data is kept where it is (one database), never moved behind the
 * operator's back: `legacy` says so, to log. Two processes starting together make it once.
 */
export const embeddedServiceDatabase = async (appUrl: string): Promise<{ url: string | null; legacy: boolean }> => {
  const admin = connect(appUrl, 1)
  try {
    const [r] = await admin<{ own: boolean; legacy: boolean }[]>`
      select exists (select 1 from pg_database where datname = ${EMBEDDED_SERVICE_DATABASE}) as own,
             exists (select 1 from pg_namespace where nspname = 'service') as legacy`
    if (r!.legacy && !r!.own) return { url: null, legacy: true }
    if (!r!.own) {
      await admin.unsafe(`create database ${EMBEDDED_SERVICE_DATABASE}`).catch((e: { code?: string }) => {
        // Made by another process meanwhile (42P04 once committed, 23505 while its CREATE was open).
        if (e.code !== "42P04" && e.code !== "23505") throw e
      })
    }
    return { url: databaseUrl(appUrl, EMBEDDED_SERVICE_DATABASE), legacy: false }
  } finally {
    await admin.end({ timeout: 2 })
  }
}

export const connect = (
  url: string,
  max = 10,
  options: { readonly keepForever?: boolean; readonly arrays?: false } = {}
) =>
  postgres(url, {
    max,
    onnotice: () => {},
    // Every connection says which release it is: the schema fence's guard refuses writes from
    // one older than the database takes (fence.ts).
    connection: { application_name: "safety-records-service", [RELEASE_SETTING]: RELEASE.version },
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

/** Where the databases are: DATABASE_URL (and SERVICE_DATABASE_URL), or the embedded server (started if needed). */
export const locate = Effect.fn("Database.locate")(function* (role: Role = "tool") {
  const config = yield* DatabaseConfig
  const own = Option.map(config.serviceUrl, Redacted.value)
  if (Option.isSome(config.url)) {
    const appUrl = Redacted.value(config.url.value)
    const url = Option.getOrElse(own, () => appUrl)
    return {
      url,
      appUrl,
      separate: url !== appUrl,
      legacy: false,
      embedded: false,
      owned: false,
      stop: () => Promise.resolve()
    }
  }
  if (Option.isSome(own)) {
    return yield* new StartRefused({
      message:
        "SERVICE_DATABASE_URL is set but DATABASE_URL is not: the service's own database follows the app's database, which DATABASE_URL names. Set both, or neither (the embedded PostgreSQL under DATA_DIR)."
    })
  }
  const server = yield* Effect.tryPromise({
    try: () =>
      startEmbedded({
        dataDir: config.dataDir,
        port: config.embeddedPort,
        notUnderService: role === "tool",
        adoptOrphan: role === "service"
      }),
    catch: failed
  })
  if (server.owned) yield* Effect.logInfo("embedded PostgreSQL started", { dataDir: config.dataDir })
  const unmark = role === "service" ? markService(config.dataDir) : () => {}
  const stop = async () => {
    unmark()
    await server.stop()
  }
  const found = yield* Effect.tryPromise({ try: () => embeddedServiceDatabase(server.url), catch: failed }).pipe(
    Effect.tapError(() => Effect.promise(stop))
  )
  return {
    url: found.url ?? server.url,
    appUrl: server.url,
    separate: found.url !== null,
    legacy: found.legacy,
    embedded: true,
    owned: server.owned,
    stop
  }
})

/** Each migration as it is applied, and each lock it had to wait for, in the log. */
const migrationLog = Effect.map(Effect.context<never>(), (context) => {
  const log = (effect: Effect.Effect<void>) => void Effect.runForkWith(context)(effect)
  return (e: MigrationEvent) => {
    if (e.kind === "applied") log(Effect.logInfo("migration applied", { migration: e.name, ms: e.ms }))
    else if (e.kind === "start" && e.from > 0)
      log(Effect.logInfo("migration resumed", { migration: e.name, fromStep: e.from + 1, steps: e.steps }))
    else if (e.kind === "lock-timeout")
      log(
        Effect.logWarning("migration waits for a lock; trying again", {
          migration: e.name,
          attempt: e.attempt,
          lockTimeoutMs: e.timeoutMs,
          longTransactions: e.holders
        })
      )
  }
})

/** Connections of the pool on the app's database when it is not the service's (capture's reads and messages, admins' identity). */
const APP_POOL_SIZE = 5

/**
 * Pools, preflight, the app's tables (the embedded demo database gets the demo's copy; any
 * other must already have them: checked, never created), then the service's own migrations,
 * in its own database. Releases the pools and stops an embedded server it started.
 */
const layerFor = (role: Role) =>
  Layer.effectContext(
    Effect.gen(function* () {
      yield* Effect.try({ try: () => requirePostgresPatched(), catch: failed })
      const config = yield* DatabaseConfig
      const where = yield* Effect.acquireRelease(locate(role), (w) =>
        Effect.promise(() => w.stop()).pipe(
          Effect.tap(() => (w.owned ? Effect.logInfo("embedded PostgreSQL stopped") : Effect.void))
        )
      )
      if (where.legacy)
        yield* Effect.logInfo(
          "embedded PostgreSQL: the service's state stays in the app's database, where an earlier version made it (one database); docs/deployment.md#one-database-or-two says how to move it into a database of its own"
        )
      const sql = yield* Effect.acquireRelease(
        Effect.sync(() => connect(where.url, config.poolSize)),
        (sql) => Effect.promise(() => sql.end({ timeout: 5 }))
      )
      const app = where.separate
        ? yield* Effect.acquireRelease(
            Effect.sync(() => connect(where.appUrl, Math.min(config.poolSize, APP_POOL_SIZE))),
            (sql) => Effect.promise(() => sql.end({ timeout: 5 }))
          )
        : sql
      yield* Effect.tryPromise({ try: () => preflight(app), catch: failed })
      if (where.separate) yield* Effect.tryPromise({ try: () => preflightOwnDatabase(sql), catch: failed })
      if (where.embedded && (yield* Effect.tryPromise({ try: () => ensureDemoAppSchema(app), catch: failed }))) {
        yield* Effect.logInfo("demo app tables created (embedded database)")
      }
      const unfit = yield* Effect.tryPromise({ try: () => checkAppContract(app), catch: failed })
      // Not a refusal: capture holds those tables' records until they fit (docs/design.md, "Quarantine").
      if (unfit.length > 0)
        yield* Effect.logWarning("app tables that no longer fit what the service reads", { problems: unfit })
      const log = yield* migrationLog
      const applied = yield* Effect.tryPromise({ try: () => migrate(sql, undefined, { onEvent: log }), catch: failed })
      if (applied.length > 0) yield* Effect.logInfo("migrations applied", { applied })
      const fence = yield* Effect.tryPromise({ try: () => checkFence(sql), catch: failed })
      // A process too old for the database writes nothing: the service does not start; a tool
      // (status, a read) goes on, and the database refuses its writes (docs/deployment.md#upgrades).
      if (!fence.writable) {
        if (role === "service") return yield* new StartRefused({ message: `schema fence: ${fence.reason}` })
        yield* Effect.logWarning("schema fence: this tool's release may not write", { reason: fence.reason })
      }
      return Context.make(Database, { sql, url: where.url, embedded: where.embedded }).pipe(
        Context.add(AppDatabase, { sql: app, url: where.appUrl, separate: where.separate }),
        Context.add(AppSql, { pool: where.separate ? app : undefined })
      )
    })
  )

/** For the admin CLI and the seeder. */
export const layer = layerFor("tool")
/** For the service. */
export const serviceLayer = layerFor("service")
