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
// One company's dead receivers slow no one else (docs/design.md, "Fair sending"): send slots
// go round robin between companies and, within each, between destinations (fair.ts); a
// receiver origin that has not answered (new, or timing out) gets one attempt at a time and
// keeps two deliveries in memory (health.ts), the rest waiting as rows; after timeouts or
// refused connections in a row a destination's circuit opens and what falls due is recorded
// as not sent until a single probe gets an answer (circuits.ts); a destination's rate spaces
// its starts; a destination that orders by record gets its deliveries through claim only,
// the next of a record when the one before is finished.
//
// The steps, each in its own file with its own queries (<step>-queries.ts), each owning its
// state and reached by the others through a few functions:
//   partitions      which partitions this process owns and their cursors; the heartbeat
//   fan-out         events of owned partitions -> deliveries in the send queues; the destinations read
//   claim           due rows -> the send queues; whether rows were left for lack of room
//   send            the send queues and slots -> attempts -> outcomes (the hot path, plain promises),
//                   with fair.ts (who gets the next slot) and health.ts (receivers as this process sees them)
//   circuits        each destination's breaker, shared by all engines through the database
//   record          what is held until written: outcomes, hand-backs, leased rows and cursors -> one statement
//   housekeeping    release of held deliveries, purge
// This file wires them: wake-ups from LISTEN, the loops under the process's supervisor
// (platform/supervisor.ts), the order they stop in, and the signals every step reads
// (stopping, the generation bumped when a destination changes, and the schema fence).
import { randomUUID } from "node:crypto"
import { Clock, Context, Effect, Layer } from "effect"
import { EVENTS_CHANNEL } from "../../pipeline/outbox/events.ts"
import { Database } from "../../platform/db/Database.ts"
import {
  CIRCUITS_CHANNEL,
  DELIVERIES_CHANNEL,
  DESTINATIONS_CHANNEL,
  PARTITIONS_CHANNEL,
  listenScoped
} from "../../platform/db/channels.ts"
import { currentSupervisor } from "../../platform/supervisor.ts"
import { TracingEnabled } from "../../platform/tracing.ts"
import { makeCircuits } from "./circuits.ts"
import { makeClaim, makeClaimWake } from "./claim.ts"
import { makeFanout } from "./fanout.ts"
import { makeHealth } from "./health.ts"
import { makeHousekeeping } from "./housekeeping.ts"
import { resolveSettings, type EngineOptions } from "./options.ts"
import { leaveFanout } from "./partitions-queries.ts"
import { makePartitions } from "./partitions.ts"
import { makeRecord } from "./record.ts"
import { QUEUE_ROUNDS, db, makeWake, waitFor, type AttemptObservation, type EngineEnv } from "./runtime.ts"
import { ALERTS_CHANNEL, makeFailing } from "../alerts/failing.ts"
import { makeSend } from "./send.ts"
import { checkFence } from "../../platform/db/fence.ts"
import type { DeliveryQueryFailed } from "./errors.ts"
import { WebhookSettings, WebhookSettingsLive } from "./settings.ts"
import { loadMailSettings } from "../alerts/mail.ts"

export { DeliveryQueryFailed, EngineMisconfigured } from "./errors.ts"
export { ENGINE_DEFAULTS, type EngineOptions } from "./options.ts"
export type { AttemptObservation } from "./runtime.ts"
export { decide } from "./send.ts"

export type EngineStats = {
  events: number
  created: number
  attempts: number
  succeeded: number
  failed: number
  retried: number
  inFlight: number
  /** Waiting in memory for a send slot. */
  queued: number
  handedBack: number
  /** Written as leased rows while their first attempt was on the wire (slow receivers). */
  written: number
  switchedOff: number
  subscriptionsGone: number
  purged: number
  /** Fan-out partitions this process owns. */
  partitions: number
  /** Deliveries recorded as not sent: their destination's circuit was open (a failed attempt that held no slot). */
  notSent: number
  /** Circuits this process opened, and closed after an answer. */
  circuitsOpened: number
  circuitsClosed: number
  /** Destinations whose circuit is open or half open now (every engine's, as this one knows them). */
  circuitsOpen: number
}

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

/** Builds the engine under the supervisor in context (or one of the current scope); stopping it shuts the engine down gracefully. */
export const makeEngine = (options: EngineOptions) =>
  Effect.gen(function* () {
    const o = yield* resolveSettings(options)
    const clock = yield* Clock.Clock
    // Spans (docs/operations.md#traces) only where TracingLive installed a tracer: with tracing off, neither
    // fan-out nor an attempt makes one, and the hot path stays plain promise code.
    const tracing = yield* TracingEnabled
    // The only writer of the signals (shutdown, a destination's change, the fence); the steps read them.
    const signals = { stopping: false, generation: 0, fenced: false }
    // The schema fence (platform/db/fence.ts), checked before each claim and fan-out read:
    // once the database takes no writes from this release, the engine takes no more work.
    const writable: Effect.Effect<boolean, DeliveryQueryFailed> = Effect.gen(function* () {
      if (signals.fenced) return false
      const verdict = yield* db("fence", () => checkFence(options.sql))
      if (verdict.writable) return true
      signals.fenced = true
      yield* Effect.logError("delivery stopped by the schema fence: it claims and fans out nothing more", {
        reason: verdict.reason
      })
      return false
    })
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
      runTraced: tracing ? Effect.runPromiseWith(yield* Effect.context<never>()) : null,
      signals,
      writable
    }
    const wakes = {
      fanout: yield* makeWake,
      release: yield* makeWake,
      record: yield* makeWake,
      heartbeat: yield* makeWake,
      circuits: yield* makeWake,
      alerts: yield* makeWake
    }
    const claimWake = makeClaimWake(yield* makeWake)

    // Each step is made with the others' functions it calls (record's writes last: they go
    // through all of them).
    // Which destinations are failing (alerts/failing.ts): read now, again at each change and poll.
    const failing = makeFailing(options.sql)
    yield* db("alerts", () => failing.reload()).pipe(Effect.ignore)
    const record = makeRecord(env, wakes, failing)
    const health = makeHealth({
      perOrigin: o.perOrigin,
      maxHeld: env.maxHeld,
      writeAfterMs: o.writeAfterMs,
      queueRounds: QUEUE_ROUNDS
    })
    const live = () => partitions.live()
    const circuits = makeCircuits(
      env,
      { after: o.circuitAfter, probeMs: o.circuitProbeMs, probeMaxMs: o.circuitProbeMaxMs },
      wakes.circuits,
      (destination) => send.circuitOpened(destination)
    )
    const send = makeSend(env, record.pending, claimWake.roomFreed, health, circuits, live)
    const partitions = makePartitions(env, wakes, (lost) => {
      for (const it of send.takeQueued(lost)) {
        it.state = "done"
        record.pending.forget(it)
      }
    })
    const fanout = makeFanout(env, wakes, partitions, send, record.pending)
    const claim = makeClaim(env, claimWake, send, record.pending, live)
    const housekeeping = makeHousekeeping(env, { release: wakes.release, claim: claimWake })
    const writer = record.writer({ partitions, sends: send, claim: claimWake })

    // A destination changed (DESTINATIONS_CHANNEL): what waits for a send slot was read before
    // the change, with the old address, secret, payload or eligibility. It goes back as rows
    // due at once, and the next claim reads them as the destination now stands (or holds
    // them). A claim or fan-out that was running when the change arrived hands its rows back too.
    const destinationsChanged = () => {
      signals.generation++
      fanout.forgetDestinations()
      send.handBackQueued()
    }

    // Under the supervisor, whose stop goes from the last thing started to the first. So each
    // stage of the shutdown below is started before the ones that must stop ahead of it; read
    // from the bottom up: stop taking, finish in-flight sends, write their rows, release
    // partitions, stop listening.
    const supervisor = yield* currentSupervisor

    // 5. LISTEN wakes the loops at commit; the polls are only a safety net.
    yield* supervisor.hold(
      listenScoped(options.sql, "", [
        [EVENTS_CHANNEL, wakes.fanout.poke],
        [
          DELIVERIES_CHANNEL,
          () => {
            claimWake.poke()
            wakes.release.poke()
          }
        ],
        [DESTINATIONS_CHANNEL, destinationsChanged],
        [PARTITIONS_CHANNEL, wakes.heartbeat.poke],
        [ALERTS_CHANNEL, wakes.alerts.poke],
        [CIRCUITS_CHANNEL, circuits.changed]
      ])
    )
    // 4. The last writes free every partition with its cursor where everything is written.
    yield* supervisor.onStop(
      "delivery: last writes",
      writer.last.pipe(Effect.andThen(db("leave", () => leaveFanout(options.sql, env.owner))), Effect.ignore)
    )
    // 3. The writer, interrupted between writes (a write once begun finishes).
    yield* supervisor.run("delivery record", writer.loop)
    // 2. Sends: waiting ones go back at once, those in flight get the grace.
    yield* supervisor.onStop("delivery: finish sends", send.finish)
    // 1. The loops that take work: partitions, events, due and held rows; and the overdue sweep.
    yield* supervisor.run("delivery heartbeat", partitions.heartbeatLoop)
    yield* supervisor.run("delivery fan-out", fanout.loop)
    yield* supervisor.run("delivery overdue sweep", writer.overdueLoop)
    yield* supervisor.run("delivery claim", claim.loop)
    yield* supervisor.run("delivery release", housekeeping.releaseLoop)
    yield* supervisor.run("delivery purge", housekeeping.purgeLoop)
    yield* supervisor.run("delivery circuits", circuits.loop)
    yield* supervisor.run(
      "delivery alerts",
      Effect.forever(
        Effect.andThen(
          waitFor(wakes.alerts.queue, o.pollMs * 5),
          db("alerts", () => failing.reload()).pipe(Effect.ignore)
        )
      )
    )
    // 0. First of all: no send starts any more (an attempt ending would start the next).
    yield* supervisor.onStop(
      "delivery: stop sending",
      Effect.sync(() => {
        signals.stopping = true
      })
    )

    return {
      instanceId: env.owner,
      wake: Effect.sync(() => {
        wakes.fanout.poke()
        claimWake.poke()
        wakes.release.poke()
      }),
      stats: Effect.sync(
        (): EngineStats => ({
          ...fanout.stats,
          ...record.stats,
          ...housekeeping.stats,
          ...circuits.stats,
          circuitsOpen: circuits.openCount(),
          inFlight: send.sending(),
          queued: send.queued(),
          partitions: partitions.size()
        })
      )
    } satisfies DeliveryEngineShape
  })

/**
 * The engine as a Layer over the Database, configured from the environment
 * (WEBHOOK_RETRY_SCHEDULE, WEBHOOK_ALLOWED_NETWORKS, SECRETS_KEY / DATA_DIR, checked against
 * the database's key).
 */
export const EngineLive = Layer.effect(
  DeliveryEngine,
  Effect.gen(function* () {
    const { sql } = yield* Database
    const settings = yield* WebhookSettings
    const mail = yield* loadMailSettings
    yield* Effect.logInfo("webhook delivery started", {
      schedule: settings.schedule.text,
      attempts: settings.schedule.maxAttempts,
      secretsKey: settings.secretsKey.source
    })
    return yield* makeEngine({
      sql,
      secretsKey: settings.secretsKey.key,
      schedule: settings.schedule,
      allowed: settings.allowed,
      alertMail: mail !== null
    })
  })
).pipe(Layer.provide(WebhookSettingsLive))

/** The engine with explicit options (tests, bench). */
export const deliveryLayer = (options: EngineOptions) => Layer.effect(DeliveryEngine, makeEngine(options))
