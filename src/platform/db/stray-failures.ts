// A database connection's failure that nothing awaited. postgres.js sometimes rejects a promise
// of its own that no caller holds when a server goes away mid-connect (a standby stopped while
// reads were failing over to the primary): Node would end the whole process for it, with every
// request it was serving. Such a failure is logged and the process goes on (what it affected
// has failed, or failed over, on its own); any other unhandled rejection still ends the process.
import { writeLog } from "../logging.ts"

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT"
])

/** True for a connection-level failure (refused, reset, closed, timed out), nothing else. Pure. */
export const isConnectionFailure = (reason: unknown): boolean =>
  reason instanceof Error && CONNECTION_CODES.has(String((reason as { code?: unknown }).code))

/** The server's own refusals while it stops or starts (admin_shutdown, crash_shutdown, cannot_connect_now). */
const GOING_CODES = new Set(["57P01", "57P02", "57P03"])

/** True when the database is not there to answer: a connection failure, or a server stopping or starting. Pure. */
export const isDatabaseUnavailable = (reason: unknown): boolean =>
  isConnectionFailure(reason) ||
  (reason instanceof Error && GOING_CODES.has(String((reason as { code?: unknown }).code)))

let installed = false

/** Installs the process-wide handler (once). */
export const tolerateStrayConnectionFailures = () => {
  if (installed) return
  installed = true
  process.on("unhandledRejection", (reason) => {
    if (!isConnectionFailure(reason)) throw reason
    const e = reason as Error & { code?: string }
    writeLog("warn", "a database connection failed with no request waiting on it", {
      code: e.code,
      error: e.message
    })
  })
}
