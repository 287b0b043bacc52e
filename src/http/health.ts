// /healthz: the process answers. /readyz: the database answers and capture is streaming
// and not too far behind (an orchestrator should not route traffic to stale views).
import { Effect, Layer } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Capture } from "../capture/Capture.ts"
import { captureStatus } from "../capture/status.ts"
import { Database } from "../db/Database.ts"

const MAX_LAG_SECONDS = 60
const CHECK_TIMEOUT_MS = 1_000

export const HealthRoutes = Layer.mergeAll(
  HttpRouter.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
  HttpRouter.add(
    "GET",
    "/readyz",
    Effect.gen(function* () {
      const db = yield* Database
      const capture = yield* Capture
      // A database that does not answer within the bound is down, for this check: an
      // orchestrator polling readiness gets its 503 at once, not after a connect timeout.
      const status = yield* Effect.tryPromise(() => captureStatus(db.sql, capture.slot)).pipe(
        Effect.timeout(CHECK_TIMEOUT_MS),
        Effect.option
      )
      const checks = {
        database: status._tag === "Some",
        capture: capture.stats.streaming,
        lagSeconds: status._tag === "Some" ? status.value.lagSeconds : null
      }
      const ready = checks.database && checks.capture && (checks.lagSeconds ?? 0) <= MAX_LAG_SECONDS
      return HttpServerResponse.jsonUnsafe({ status: ready ? "ready" : "not ready", ...checks, lastError: capture.stats.lastError }, { status: ready ? 200 : 503 })
    })
  )
)
