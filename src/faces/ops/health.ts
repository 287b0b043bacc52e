// /healthz: the process answers. /readyz: the process can serve, i.e. the database answers
// and this build's migrations are applied. Every replica serves the API, so capture's role
// (leader, standby, or off), its lag and its last error are in the body for people and
// dashboards, never a reason to take a replica out of a load balancer. That body is for the
// operations port only: the public port's /readyz says ready or not, and nothing else (an
// error text or the roles a process runs are not for whoever reaches the public port).
// The body also lists the read replicas (READ_DATABASE_URL) with their lag and whether reads
// go to them now, and the release: this build's version and schema generation, the database's
// generation and the oldest release it takes writes from, and whether that is this one. A
// process the schema fence stopped stays ready: its API serves reads, it writes nothing.
import { Effect, Layer, Option } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { Capture } from "../../pipeline/capture/Capture.ts"
import { captureStatus } from "../../pipeline/capture/status.ts"
import { CaptureConfig, ServiceRoles } from "../../platform/config.ts"
import { query, Sql } from "../../platform/db/Sql.ts"
import { schemaCheck } from "../../platform/db/health.ts"
import { checkFence } from "../../platform/db/fence.ts"
import { RELEASE } from "../../platform/release.ts"
import { ReadReplicas } from "../../platform/db/read-replicas.ts"

const CHECK_TIMEOUT_MS = 1_000

/** `detailed`: the operations port's /readyz (roles, capture); else only ready or not. */
const healthRoutes = (detailed: boolean) =>
  Layer.unwrap(
    Effect.gen(function* () {
      const sql = yield* Sql
      const roles = yield* ServiceRoles
      const capture = yield* Effect.serviceOption(Capture)
      const replicas = yield* ReadReplicas
      // Without capture here, lag still reads from the database: what this replica serves is that far behind.
      const slot = Option.isSome(capture) ? capture.value.slot : (yield* CaptureConfig).slot
      // The public answer needs no capture figures: the load balancer's polls stay one query.
      const lag = detailed
        ? captureStatus(slot).pipe(Effect.catchDefect(() => Effect.succeed(null)))
        : Effect.succeed(null)
      const fence = detailed ? query((sql) => checkFence(sql)) : Effect.succeed(null)
      const check = Effect.all([schemaCheck(), lag, fence], { concurrency: "unbounded" }).pipe(
        Effect.map(([migrations, status, verdict]) => ({
          migrations,
          lagSeconds: status?.lagSeconds ?? null,
          verdict
        })),
        Effect.provideService(Sql, sql)
      )
      return Layer.mergeAll(
        HttpRouter.add("GET", "/healthz", HttpServerResponse.jsonUnsafe({ status: "ok" })),
        HttpRouter.add(
          "GET",
          "/readyz",
          Effect.gen(function* () {
            // A database that does not answer within the bound is down, for this check: an
            // orchestrator polling readiness gets its 503 at once, not after a connect timeout.
            const result = yield* check.pipe(
              Effect.timeout(CHECK_TIMEOUT_MS),
              Effect.option,
              Effect.catchDefect(() => Effect.succeedNone)
            )
            const database = Option.isSome(result)
            const applied = database && result.value.migrations
            const stats = Option.isSome(capture) ? capture.value.stats : null
            const status = applied ? "ready" : "not ready"
            if (!detailed) return HttpServerResponse.jsonUnsafe({ status }, { status: applied ? 200 : 503 })
            const verdict = database ? result.value.verdict : null
            const body = {
              status,
              database,
              migrations: applied,
              // Which release runs here, and whether the database's schema fence still lets it write.
              release: {
                version: RELEASE.version,
                generation: RELEASE.generation,
                writable: verdict?.writable ?? null,
                database:
                  verdict?.database == null
                    ? null
                    : { generation: verdict.database.generation, oldestWriter: verdict.database.oldestWriter },
                fenceReason: verdict?.reason ?? null
              },
              roles,
              capture: {
                role: stats === null ? "off" : stats.role,
                streaming: stats?.streaming ?? false,
                lagSeconds: database ? result.value.lagSeconds : null,
                lastError: stats?.lastError ?? null
              },
              // A replica skipped is never a reason to be unready: its reads go to another or the primary.
              readReplicas: replicas.report()
            }
            return HttpServerResponse.jsonUnsafe(body, { status: applied ? 200 : 503 })
          })
        )
      )
    })
  )

/** On the public port: /healthz, and /readyz as ready or not. */
export const PublicHealthRoutes = healthRoutes(false)

/** On the operations port: /healthz, and /readyz with the database, migrations, roles and capture. */
export const OpsHealthRoutes = healthRoutes(true)
