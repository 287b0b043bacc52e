// Structured logs: one JSON object per line on stdout ({time, level, message, ...fields}),
// level from LOG_LEVEL. Effect's logger and plain code (the CLI's refusals) write the same shape.
import { Cause, Config, Effect, Layer, Logger, type LogLevel, References } from "effect"

export type Level = "debug" | "info" | "warn" | "error"

/** Keys whose values never reach a log line, whatever a caller passes. */
const SECRET_KEYS = /^(key|secret|token|authorization|password|signature)$/i

const clean = (fields: Record<string, unknown>) => {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(fields))
    out[k] = SECRET_KEYS.test(k) ? "[redacted]" : v instanceof Error ? v.message : v
  return out
}

/** One log line, as the service writes them; `out` is stdout but for the admin CLI, whose stdout is its answer. */
export const writeLog = (
  level: Level,
  message: string,
  fields: Record<string, unknown> = {},
  out: NodeJS.WritableStream = process.stdout
) => {
  out.write(`${JSON.stringify({ time: new Date().toISOString(), level, message, ...clean(fields) })}\n`)
}

/**
 * Effect's log lines as (level, message, fields): the fields are the fiber's log annotations
 * and any object passed along with the message. The service writes them as JSON; a test
 * (or a benchmark) keeps or drops them.
 */
export const lineLogger = (
  write: (level: string, message: string, fields: Record<string, unknown>, date: Date) => void
) =>
  Logger.make<unknown, void>(({ message, logLevel, cause, fiber, date }) => {
    const parts = Array.isArray(message) ? message : [message]
    const text = parts.filter((p) => typeof p === "string").join(" ")
    const fields: Record<string, unknown> = { ...fiber.getRef(References.CurrentLogAnnotations) }
    for (const p of parts) if (p !== null && typeof p === "object" && !Array.isArray(p)) Object.assign(fields, p)
    if (cause.reasons.length > 0) fields.error = Cause.pretty(cause)
    write(logLevel.toLowerCase(), text, fields, date)
  })

const jsonLogger = lineLogger((level, message, fields, date) => {
  process.stdout.write(`${JSON.stringify({ time: date.toISOString(), level, message, ...clean(fields) })}\n`)
})

const LEVELS: Readonly<Record<string, LogLevel.LogLevel>> = {
  all: "All",
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  warning: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
}

/** LOG_LEVEL in any case, `warn` or `warning` alike (the lines themselves say "warn"). */
export const parseLogLevel = (value: string): LogLevel.LogLevel | undefined => LEVELS[value.trim().toLowerCase()]

export const LoggingLive = Layer.unwrap(
  Effect.gen(function* () {
    const raw = yield* Config.String("LOG_LEVEL").pipe(Config.withDefault("Info"))
    const level = parseLogLevel(raw)
    if (level === undefined) {
      return yield* Effect.die(
        new Error(`LOG_LEVEL must be one of debug, info, warn, error (or trace, fatal, all, none), not "${raw}"`)
      )
    }
    return Layer.mergeAll(Logger.layer([jsonLogger]), Layer.succeed(References.MinimumLogLevel, level))
  })
)
