// Structured logs: one JSON object per line on stdout, level from LOG_LEVEL.
import { Config, Effect, Layer, Logger, References } from "effect"

export const LoggingLive = Layer.unwrap(
  Effect.gen(function* () {
    const level = yield* Config.LogLevel("LOG_LEVEL").pipe(Config.withDefault("Info" as const))
    return Layer.mergeAll(
      Logger.layer([Logger.consoleJson]),
      Layer.succeed(References.MinimumLogLevel, level)
    )
  })
)
