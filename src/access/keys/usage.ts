// Each key's last use and request count, for the admin key list, without a database write
// on every request: counted in memory and written every few seconds and at shutdown.
import { Duration, Effect, Schedule, type Scope } from "effect"
import type postgres from "postgres"

export interface UsageRecorder {
  readonly record: (keyId: string) => void
  /** Writes what was recorded so far (also runs on a timer and at shutdown). */
  readonly flush: Effect.Effect<void>
}

/** Counts in memory, written on `sql` every `flushMillis` and when the scope closes. */
export const makeUsageRecorder = (
  sql: postgres.Sql,
  flushMillis: number
): Effect.Effect<UsageRecorder, never, Scope.Scope> =>
  Effect.gen(function* () {
    let pending = new Map<string, { count: number; at: number }>()

    const flush = Effect.suspend(() => {
      if (pending.size === 0) return Effect.void
      const batch = pending
      pending = new Map()
      const ids = [...batch.keys()]
      const counts = ids.map((id) => batch.get(id)!.count)
      const ats = ids.map((id) => new Date(batch.get(id)!.at).toISOString())
      return Effect.tryPromise(
        () => sql`
            update service.api_keys k
               set request_count = k.request_count + u.n,
                   last_used_at = greatest(k.last_used_at, u.at)
              from unnest(${ids}::uuid[], ${counts}::bigint[], ${ats}::timestamptz[]) as u(id, n, at)
             where k.id = u.id`
      ).pipe(
        Effect.asVoid,
        Effect.catch((error) =>
          Effect.sync(() => {
            // keep the counts for the next attempt
            for (const [id, v] of batch) {
              const now = pending.get(id)
              pending.set(id, now === undefined ? v : { count: now.count + v.count, at: Math.max(now.at, v.at) })
            }
          }).pipe(
            Effect.andThen(Effect.logWarning("could not record API key usage; will retry", { error: String(error) }))
          )
        )
      )
    })

    yield* flush.pipe(Effect.repeat(Schedule.spaced(Duration.millis(flushMillis))), Effect.forkScoped)
    yield* Effect.addFinalizer(() => flush)

    return {
      record: (keyId) => {
        const now = Date.now()
        const v = pending.get(keyId)
        if (v === undefined) pending.set(keyId, { count: 1, at: now })
        else {
          v.count++
          v.at = now
        }
      },
      flush
    } satisfies UsageRecorder
  })
