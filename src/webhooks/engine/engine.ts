// The delivery engine. Durability is paid once per delivery: fan-out reads new outbox events
// and their destinations, a first attempt goes straight from there, and its outcome is
// written afterwards as the delivery row itself, many per statement, with the fan-out
// cursor. Only a delivery that failed, or that waits too long in memory, becomes a
// scheduled row with a lease; those are claimed in batches, sent, and recorded like before.
// A delivery's id is a function of (event, destination), so a crash between a send and its
// record sends again under the same id.
//
// Several processes share the work by partitions of the outbox (an event belongs to one of
// 12, by its id): each process fans out and sends the events of the partitions it owns under
// a lease, and they divide the partitions evenly (sql/020). Scheduled rows are claimed by
// any process. Time that drives the schedule comes from Effect's Clock, so tests can run it
// on a TestClock; partition leases are on the database's clock (liveness, not schedule).
//
// The steps, each in engine/ with its inputs explicit (EngineEnv: fixed; EngineState: what
// this process holds, one object with a note on who writes what):
//   fan-out (fanout.ts)   events of owned partitions -> deliveries in the send queues
//   claim (claim.ts)      due rows -> the send queues
//   send (send.ts)        the send queues -> attempts -> outcomes (the hot path, plain promises)
//   record (record.ts)    outcomes, hand-backs, leased rows and cursors -> one statement
//   housekeeping          partitions (heartbeat), release of held deliveries, purge
// This file wires them: wake-ups from LISTEN, the loops as fibers in the engine's scope, and
// the order they stop in.
import { randomUUID } from "node:crypto"
import { Clock, Context, Effect, Queue, Scope } from "effect"
import { TracingEnabled } from "../../platform/tracing.ts"
import { EVENTS_CHANNEL } from "../../pipeline/outbox/events.ts"
import {
  DELIVERIES_CHANNEL,
  DESTINATIONS_CHANNEL,
  PARTITIONS_CHANNEL,
  listenScoped
} from "../../platform/db/channels.ts"
import { leaveFanout } from "./partitions-queries.ts"
import { makeClaim } from "./claim.ts"
import { makeFanout } from "./fanout.ts"
import { heartbeatLoop, purgeLoop, releaseLoop } from "./housekeeping.ts"
import { resolveSettings, type EngineOptions } from "./options.ts"
import { overdueLoop, recordLast, recordLoop } from "./record.ts"
import { QUEUE_ROUNDS, db, type AttemptObservation, type EngineEnv } from "./runtime.ts"
import { makeSend } from "./send.ts"
import { handBackQueued, makeState, poke, type EngineState, type EngineStats } from "./state.ts"

export { DeliveryQueryFailed, EngineMisconfigured } from "./errors.ts"
export { ENGINE_DEFAULTS, type EngineOptions } from "./options.ts"
export type { AttemptObservation } from "./runtime.ts"
export { decide } from "./send.ts"
export type { EngineStats } from "./state.ts"

export interface DeliveryEngineShape {
  /** This process's lease owner id. */
  readonly instanceId: string
  /** Looks for new events and due deliveries now, as a notification would. */
  readonly wake: Effect.Effect<void>
  readonly stats: Effect.Effect<EngineStats>
}

export class DeliveryEngine extends Context.Service<DeliveryEngine, DeliveryEngineShape>()("service/DeliveryEngine") {}

/** Told of every recorded attempt (metrics: the latency histogram); a no-op unless provided. */
export const AttemptObserver = Context.Reference<(a: AttemptObservation) => void>(
  "service/DeliveryEngine/AttemptObserver",
  {
    defaultValue: () => () => {}
  }
)

/** Builds the engine in the current scope; closing the scope shuts it down gracefully. */
export const makeEngine = (options: EngineOptions) =>
  Effect.gen(function* () {
    const o = yield* resolveSettings(options)
    const clock = yield* Clock.Clock
    // Spans (issue 16.3) only where TracingLive installed a tracer: with tracing off, neither
    // fan-out nor an attempt makes one, and the hot path stays plain promise code.
    const tracing = yield* TracingEnabled
    const env: EngineEnv = {
      sql: options.sql,
      options,
      o,
      owner: randomUUID(),
      maxHeld: o.concurrency * QUEUE_ROUNDS,
      maxOpenPerOrigin: o.perOrigin * QUEUE_ROUNDS,
      nowMs: () => clock.currentTimeMillisUnsafe(),
      observeAttempt: yield* AttemptObserver,
      tracing,
      runTraced: tracing ? Effect.runPromiseWith(yield* Effect.context<never>()) : null
    }
    const s = makeState({
      fanout: yield* Queue.sliding<void>(1),
      claim: yield* Queue.sliding<void>(1),
      release: yield* Queue.sliding<void>(1),
      record: yield* Queue.sliding<void>(1),
      heartbeat: yield* Queue.sliding<void>(1)
    })
    const pump = makeSend(env, s)
    const fanout = makeFanout(env, s, pump)
    const claim = makeClaim(env, s, pump)

    // The engine's own scope, inside the caller's, closing its parts one after another, last
    // registered first. So each stage of the shutdown below is registered before the ones
    // that must stop ahead of it; read from the bottom up: stop taking, finish in-flight
    // sends, write their rows, release partitions, stop listening.
    const scope = yield* Scope.fork(yield* Effect.scope, "sequential")

    // 5. LISTEN wakes the loops at commit; the polls are only a safety net.
    yield* Scope.provide(scope)(
      listenScoped(options.sql, "", [
        [EVENTS_CHANNEL, () => poke(s.wake.fanout)],
        [
          DELIVERIES_CHANNEL,
          () => {
            poke(s.wake.claim)
            poke(s.wake.release)
          }
        ],
        [DESTINATIONS_CHANNEL, () => destinationsChanged(s)],
        [PARTITIONS_CHANNEL, () => poke(s.wake.heartbeat)]
      ])
    )
    // 4. The last writes free every partition with its cursor where everything is written.
    yield* Scope.addFinalizer(
      scope,
      recordLast(env, s).pipe(Effect.andThen(db("leave", () => leaveFanout(options.sql, env.owner))), Effect.ignore)
    )
    // 3. The writer, interrupted between writes (a write once begun finishes).
    yield* Effect.forkIn(recordLoop(env, s), scope)
    // 2. Sends: waiting ones go back at once, those in flight get the grace.
    yield* Scope.addFinalizer(scope, finishSends(env, s))
    // 1. The loops that take work: partitions, events, due and held rows; and the overdue sweep.
    for (const loop of [
      heartbeatLoop(env, s),
      fanout.loop,
      overdueLoop(env, s),
      claim.loop,
      releaseLoop(env, s),
      purgeLoop(env, s)
    ]) {
      yield* Effect.forkIn(loop, scope)
    }
    // 0. First of all: no send starts any more (an attempt ending would start the next).
    yield* Scope.addFinalizer(
      scope,
      Effect.sync(() => {
        s.stopping = true
      })
    )

    return {
      instanceId: env.owner,
      wake: Effect.sync(() => {
        poke(s.wake.fanout)
        poke(s.wake.claim)
        poke(s.wake.release)
      }),
      stats: Effect.sync(() => {
        let queued = 0
        for (const q of s.queues.values()) queued += q.length
        return { ...s.stats, queued }
      })
    } satisfies DeliveryEngineShape
  })

// A destination changed (DESTINATIONS_CHANNEL): what waits for a send slot was read before
// the change, with the old address, secret, payload or eligibility. It goes back as rows
// due at once, and the next claim reads them as the destination now stands (or holds
// them). A claim or fan-out that was running when the change arrived hands its rows back too.
const destinationsChanged = (s: EngineState) => {
  s.generation++
  s.destinations.clear()
  handBackQueued(s)
}

/**
 * Shutdown's sends: waiting for a slot, back at once. Attempts in flight get the grace to
 * finish and be written; whatever is still out after it is cancelled and handed back
 * unattempted, due at once for the next engine.
 */
const finishSends = (env: EngineEnv, s: EngineState) =>
  Effect.gen(function* () {
    handBackQueued(s)
    s.open.clear()
    if (s.inFlight.size > 0) {
      const all = [...s.inFlight.keys()]
      yield* Effect.promise(() => Promise.all(all)).pipe(Effect.timeoutOption(env.o.shutdownGraceMs))
    }
    const late = [...s.inFlight]
    for (const [, abort] of late) abort.abort()
    yield* Effect.promise(() => Promise.all(late.map(([p]) => p)))
  })
