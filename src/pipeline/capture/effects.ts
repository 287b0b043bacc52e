// Small pieces capture's Effect code shares: a promise as a capture error, a step over a pool,
// a log line, a connection's end.
import { Effect } from "effect"
import type { Sql } from "postgres"
import { appSqlLayer, Sql as SqlService } from "../../platform/db/Sql.ts"
import { type CaptureError, toCaptureError } from "./errors.ts"

/** A call into the database (or the plain code), its rejection a capture error. */
export const call = <A>(f: () => Promise<A>): Effect.Effect<A, CaptureError> =>
  Effect.tryPromise({ try: f, catch: toCaptureError })

/** A step written over `Sql` (the publication, the slot, the leader, a rebuild), on capture's
 *  pool (and `app`, the app's database's, when it has its own: AppSql); a database failure (a
 *  defect there) ends the run as any other failure does. */
export const onPool = <A, E extends CaptureError>(
  sql: Sql,
  effect: Effect.Effect<A, E, SqlService>,
  app?: Sql
): Effect.Effect<A, CaptureError> =>
  effect.pipe(
    Effect.provide(SqlService.fromPool(sql)),
    Effect.provide(appSqlLayer(app !== undefined && app !== sql ? app : undefined)),
    Effect.catchDefect((defect) => Effect.fail(toCaptureError(defect)))
  )

/** A log line: its text is the contract (docs/operations.md), its fields are annotations. */
export const log = (level: "info" | "warn" | "error", message: string, fields: Record<string, unknown> = {}) =>
  (level === "info"
    ? Effect.logInfo(message)
    : level === "warn"
      ? Effect.logWarning(message)
      : Effect.logError(message)
  ).pipe(Effect.annotateLogs(fields))

/** Ends a connection; ending it releases its session's advisory lock, also when its server went away. */
export const endConnection = (conn: Sql, timeout: number) => Effect.promise(() => conn.end({ timeout }).catch(() => {}))
