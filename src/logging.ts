// Structured logs: one JSON object per line on stdout ({time, level, message, ...fields}),
// level from LOG_LEVEL. Effect's logger and plain code (capture) write the same shape.
import { Cause, Config, Effect, Layer, Logger, References } from "effect"

export type Level = "debug" | "info" | "warn" | "error"

/** Keys whose values never reach a log line, whatever a caller passes. */
const SECRET_KEYS = /^(key|secret|token|authorization|password|signature)$/i

const clean = (fields: Record<string, unknown>) => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(fields)) out[k] = SECRET_KEYS.test(k) ? "[redacted]" : v instanceof Error ? v.message : v
  return out
}

export const writeLog = (level: Level, message: string, fields: Record<string, unknown> = {}) => {
  process.stdout.write(JSON.stringify({ time: new Date().toISOString(), level, message, ...clean(fields) }) + "\n")
}

const jsonLogger = Logger.make<unknown, void>(({ message, logLevel, cause, fiber, date }) => {
  const parts = Array.isArray(message) ? message : [message]
  const text = parts.filter((p) => typeof p === "string").join(" ")
  const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
  for (const p of parts) if (p !== null && typeof p === "object" && !Array.isArray(p)) Object.assign(fields, p)
  if (cause.reasons.length > 0) fields.error = Cause.pretty(cause)
  process.stdout.write(JSON.stringify({ time: date.toISOString(), level: logLevel.toLowerCase(), message: text, ...clean(fields) }) + "\n")
})

export const LoggingLive = Layer.unwrap(
  Effect.gen(function* () {
    const level = yield* Config.LogLevel("LOG_LEVEL").pipe(Config.withDefault("Info" as const))
    return Layer.mergeAll(Logger.layer([jsonLogger]), Layer.succeed(References.MinimumLogLevel, level))
  })
)
