// The read API's settings, their environment variables and defaults: the keys' rate limit
// and usage flush (src/access/keys/), the API's own pool (db/api-pool.ts). Tests and the
// bench build the routes with explicit values (makeApiRoutes); the service reads them from
// the environment.
import { Config, Context, Duration, Effect, Layer } from "effect"

export interface ApiSettingsShape {
  /** Requests admitted per key within the window (120 per minute by default: docs/api.md#rate-limit). */
  readonly rateLimit: number
  /** The rate-limit window in seconds (60). */
  readonly rateWindowSeconds: number
  /** How often each process writes its keys' last use and request counts. */
  readonly usageFlushMillis: number
  /** Connections of the read API's own pool. */
  readonly poolSize: number
  /**
   * Requests with an unknown, revoked or expired key one client address may make per minute
   * (and at once), in each process, before it gets 429 (src/access/keys/auth-failures.ts).
   */
  readonly authFailuresPerMinute: number
  /**
   * Lookups of credentials a process does not know, per second, from all addresses together
   * (src/access/keys/auth-failures.ts, makeLookupBudget): a flood from many addresses.
   */
  readonly authLookupsPerSecond: number
  /** Requests of one key waiting for changes (long-poll, event streams: GET /api/v1/stream) in each process. */
  readonly streamWaitersPerKey: number
  /** Requests waiting for changes in each process, all keys together. */
  readonly streamWaiters: number
}

export const DEFAULT_API_SETTINGS: ApiSettingsShape = {
  rateLimit: 120,
  rateWindowSeconds: 60,
  usageFlushMillis: 5_000,
  poolSize: 10,
  authFailuresPerMinute: 30,
  authLookupsPerSecond: 200,
  streamWaitersPerKey: 100,
  streamWaiters: 20_000
}

export const ApiSettingsConfig = Config.all({
  rateLimit: Config.Int("API_RATE_LIMIT").pipe(Config.withDefault(DEFAULT_API_SETTINGS.rateLimit)),
  rateWindowSeconds: Config.Int("API_RATE_WINDOW_SECONDS").pipe(
    Config.withDefault(DEFAULT_API_SETTINGS.rateWindowSeconds)
  ),
  usageFlush: Config.Duration("API_USAGE_FLUSH").pipe(
    Config.withDefault(Duration.millis(DEFAULT_API_SETTINGS.usageFlushMillis))
  ),
  poolSize: Config.Int("API_DATABASE_POOL_SIZE").pipe(Config.withDefault(DEFAULT_API_SETTINGS.poolSize)),
  authLookupsPerSecond: Config.Int("AUTH_LOOKUPS_PER_SECOND").pipe(
    Config.withDefault(DEFAULT_API_SETTINGS.authLookupsPerSecond)
  ),
  streamWaitersPerKey: Config.Int("STREAM_WAITERS_PER_KEY").pipe(
    Config.withDefault(DEFAULT_API_SETTINGS.streamWaitersPerKey)
  ),
  streamWaiters: Config.Int("STREAM_WAITERS").pipe(Config.withDefault(DEFAULT_API_SETTINGS.streamWaiters))
})

export class ApiSettings extends Context.Service<ApiSettings, ApiSettingsShape>()("service/api/ApiSettings") {
  static readonly fromEnv = Layer.effect(
    ApiSettings,
    Effect.gen(function* () {
      const c = yield* ApiSettingsConfig
      if (c.rateLimit < 1) return yield* Effect.die(new Error("API_RATE_LIMIT must be at least 1"))
      if (c.rateWindowSeconds < 1 || c.rateWindowSeconds > 3600) {
        return yield* Effect.die(new Error("API_RATE_WINDOW_SECONDS must be from 1 to 3600"))
      }
      if (c.authLookupsPerSecond < 1 || c.authLookupsPerSecond > 100_000) {
        return yield* Effect.die(new Error("AUTH_LOOKUPS_PER_SECOND must be from 1 to 100000"))
      }
      if (c.streamWaitersPerKey < 1 || c.streamWaiters < 1) {
        return yield* Effect.die(new Error("STREAM_WAITERS_PER_KEY and STREAM_WAITERS must be at least 1"))
      }
      return {
        rateLimit: c.rateLimit,
        rateWindowSeconds: c.rateWindowSeconds,
        usageFlushMillis: Duration.toMillis(c.usageFlush),
        poolSize: c.poolSize,
        authFailuresPerMinute: DEFAULT_API_SETTINGS.authFailuresPerMinute,
        authLookupsPerSecond: c.authLookupsPerSecond,
        streamWaitersPerKey: c.streamWaitersPerKey,
        streamWaiters: c.streamWaiters
      }
    })
  )
  static readonly layer = (settings: Partial<ApiSettingsShape>) =>
    Layer.succeed(ApiSettings, { ...DEFAULT_API_SETTINGS, ...settings })
}
