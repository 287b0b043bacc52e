// Housekeeping: releasing held deliveries whose destination is back, and retention. (The
// partitions' heartbeat is partitions.ts's.)
import { Effect } from "effect"
import { purgeOld, releaseHeld } from "./housekeeping-queries.ts"
import { db, now, survive, waitFor, type EngineEnv, type Wake } from "./runtime.ts"

export const makeHousekeeping = (env: EngineEnv, wakes: { readonly release: Wake; readonly claim: Wake }) => {
  const stats = { purged: 0 }

  /** Puts held deliveries whose destination can receive again back in the schedule. */
  const releaseLoop = Effect.forever(
    Effect.gen(function* () {
      // Fenced out (platform/db/fence.ts): the database would refuse the writes; a newer process does them.
      if (!env.signals.fenced) {
        const at = yield* now
        const n = yield* survive("release")(db("release", () => releaseHeld(env.sql, at)))
        if (typeof n === "number" && n > 0) wakes.claim.poke()
      }
      yield* waitFor(wakes.release.queue, env.o.pollMs)
    })
  )

  // The first purge comes at a random point of the first period: processes started together
  // do not all scan the tables at once, and a start is not slowed by it.
  const purgeLoop = Effect.sleep(Math.floor(Math.random() * env.o.purgeEveryMs)).pipe(
    Effect.andThen(
      Effect.forever(
        Effect.gen(function* () {
          if (!env.signals.fenced) {
            const at = yield* now
            const r = yield* survive("purge")(
              db("purge", () => purgeOld(env.sql, new Date(at.getTime() - env.o.retentionMs)))
            )
            if (r && typeof r === "object") stats.purged += r.deliveries
          }
          yield* Effect.sleep(env.o.purgeEveryMs)
        })
      )
    )
  )

  return { releaseLoop, purgeLoop, stats }
}
