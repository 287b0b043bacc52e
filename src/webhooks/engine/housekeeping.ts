// Housekeeping: the fan-out partitions this process owns (taken and renewed by the heartbeat,
// given up when its share shrinks, lost when another process took them), releasing held
// deliveries whose destination is back, and retention.
import { Effect } from "effect"
import { comparePos } from "./positions.ts"
import { heartbeat, type OwnedPart } from "./partitions-queries.ts"
import { purgeOld, releaseHeld } from "./housekeeping-queries.ts"
import { db, now, realWaitFor, survive, waitFor, type EngineEnv } from "./runtime.ts"
import { dequeue, poke, type EngineState, type Part } from "./state.ts"

const newPart = (p: OwnedPart): Part => ({
  part: p.part,
  read: p.cursor,
  durable: p.cursor,
  recheck: comparePos(p.recorded, p.cursor) > 0 ? p.recorded : null,
  recorded: p.recorded,
  outstanding: [],
  draining: false,
  releasing: false
})

/** Another process owns the partition now: it reads its unwritten events again. */
export const lose = (s: EngineState, p: Part) => {
  if (s.owned.get(p.part) !== p) return
  s.owned.delete(p.part)
  for (const queue of s.queues.values()) {
    for (const it of [...queue]) {
      if (it.src?.entry.part !== p || it.persisted) continue
      dequeue(s, it)
      it.state = "done"
      it.dropped = true
      s.held--
    }
  }
  s.stats.partitions = s.owned.size
}

/** Renews this process's partitions, takes its share, gives up its extras (drained by record). */
export const heartbeatOnce = (env: EngineEnv, s: EngineState) =>
  Effect.gen(function* () {
    if (s.stopping) return
    const epoch = s.partEpoch
    const r = yield* db("heartbeat", () => heartbeat(env.sql, env.owner, env.o.partitionLeaseMs))
    const mine = new Set(r.owned.map((p) => p.part))
    for (const p of [...s.owned.values()]) if (!mine.has(p.part)) lose(s, p)
    let taken = false
    for (const p of r.owned) {
      // Freed by a write meanwhile: the database no longer says so.
      if (!s.owned.has(p.part) && epoch === s.partEpoch) {
        s.owned.set(p.part, newPart(p))
        taken = true
      }
    }
    // Keep `share` partitions: give up the highest-numbered extras, or keep ones being given up.
    const parts = [...s.owned.values()].sort((a, b) => a.part - b.part)
    parts.forEach((p, i) => {
      const extra = i >= r.share
      if (extra && !p.draining) poke(s.wake.record)
      p.draining = extra || p.releasing
    })
    s.stats.partitions = s.owned.size
    if (taken) poke(s.wake.fanout)
  })

export const heartbeatLoop = (env: EngineEnv, s: EngineState) =>
  Effect.forever(
    Effect.gen(function* () {
      yield* survive("heartbeat")(heartbeatOnce(env, s))
      yield* realWaitFor(s.wake.heartbeat, env.o.heartbeatMs)
    })
  )

/** Puts held deliveries whose destination can receive again back in the schedule. */
export const releaseLoop = (env: EngineEnv, s: EngineState) =>
  Effect.forever(
    Effect.gen(function* () {
      const at = yield* now
      const n = yield* survive("release")(db("release", () => releaseHeld(env.sql, at)))
      if (typeof n === "number" && n > 0) poke(s.wake.claim)
      yield* waitFor(s.wake.release, env.o.pollMs)
    })
  )

// The first purge comes at a random point of the first period: processes started together
// do not all scan the tables at once, and a start is not slowed by it.
export const purgeLoop = (env: EngineEnv, s: EngineState) =>
  Effect.sleep(Math.floor(Math.random() * env.o.purgeEveryMs)).pipe(
    Effect.andThen(
      Effect.forever(
        Effect.gen(function* () {
          const at = yield* now
          const r = yield* survive("purge")(
            db("purge", () => purgeOld(env.sql, new Date(at.getTime() - env.o.retentionMs)))
          )
          if (r && typeof r === "object") s.stats.purged += r.deliveries
          yield* Effect.sleep(env.o.purgeEveryMs)
        })
      )
    )
  )
