// What every step is given (EngineEnv), its wake-ups, and how the loops call the database,
// wait and survive.
import { Cause, Clock, Effect, Queue } from "effect"
import type { Sql } from "postgres"
import { DeliveryQueryFailed, type EngineStep } from "./errors.ts"
import type { EngineOptions, Settings } from "./options.ts"

/** Told of every recorded attempt (metrics: the latency histogram). */
export type AttemptObservation = {
  readonly ok: boolean
  readonly durationMs: number
  readonly errorKind: string | null
}

/**
 * What changes under every step and only the engine's wiring (engine.ts) writes: the steps
 * read it at their decisions.
 */
export type EngineSignals = {
  /** Shutdown began: no read, claim, heartbeat or send starts any more. */
  readonly stopping: boolean
  /** Bumped when a destination changes: what was read before the change goes back. */
  readonly generation: number
  /**
   * The database's schema fence takes no writes from this release any more: nothing is
   * claimed, fanned out or heartbeaten (the partitions' leases lapse to newer processes).
   */
  readonly fenced: boolean
}

/** The engine's fixed inputs: set once at start, read by every step. */
export type EngineEnv = {
  readonly sql: Sql
  readonly options: EngineOptions
  readonly o: Settings
  /** This process's lease owner id. */
  readonly owner: string
  /**
   * As many as QUEUE_ROUNDS queues of every send slot: an origin whose receiver hangs holds
   * no more of them than of the send slots, so others keep going.
   */
  readonly maxHeld: number
  readonly maxOpenPerOrigin: number
  /** The engine's Clock, read synchronously (the send path is plain promise code). */
  readonly nowMs: () => number
  readonly observeAttempt: (a: AttemptObservation) => void
  /** Spans (docs/operations.md#traces) only where TracingLive installed a tracer. */
  readonly tracing: boolean
  /** Runs an attempt's span in the engine's context; null with tracing off. */
  readonly runTraced: (<E>(effect: Effect.Effect<void, E>) => Promise<void>) | null
  readonly signals: EngineSignals
  /** The schema fence's check, made before each claim and each fan-out read: false once this release may not write. */
  readonly writable: Effect.Effect<boolean, DeliveryQueryFailed>
}

/** A loop's wake-up: a poke makes the loop look now instead of at its next poll. */
export type Wake = { readonly queue: Queue.Queue<void>; readonly poke: () => void }

export const makeWake: Effect.Effect<Wake> = Effect.map(Queue.sliding<void>(1), (queue) => ({
  queue,
  poke: () => void Queue.offerUnsafe(queue, undefined)
}))

/**
 * An origin may hold this many rounds of its send slots, queued or sending: deep enough that
 * one claim feeds a fast receiver for a while. Behind a slow receiver the queue drains slower
 * than leases run; what would start too late to finish within its lease is handed back.
 */
export const QUEUE_ROUNDS = 8

/** The engine's Clock as a Date: time that drives the schedule (a TestClock in tests). */
export const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

/** A query of a step, failing with DeliveryQueryFailed. */
export const db = <A>(step: EngineStep, f: () => Promise<A>) =>
  Effect.tryPromise({
    try: f,
    catch: (e) => new DeliveryQueryFailed({ step, message: e instanceof Error ? e.message : String(e), cause: e })
  })

/** Waits for a poke or the time limit (the engine's Clock), whichever comes first; true when poked. */
export const waitFor = (q: Queue.Queue<void>, ms: number) =>
  Queue.take(q).pipe(
    Effect.timeoutOption(Math.max(0, ms)),
    Effect.map((r) => r._tag === "Some")
  )

/** A loop's step that fails is logged and tried again a second later; interruption passes. */
export const survive =
  (what: EngineStep) =>
  <A, E>(self: Effect.Effect<A, E>) =>
    self.pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause as Cause.Cause<never>)
          : Effect.logWarning(`delivery ${what} failed; retrying in 1 s`, Cause.pretty(cause)).pipe(
              Effect.andThen(Effect.sleep(1_000))
            )
      )
    )

/**
 * Real time, whatever the engine's Clock: partition leases and how long a delivery stays
 * unwritten are about processes and memory, not the schedule (a TestClock leaves them be).
 */
export const realSleep = (ms: number) =>
  Effect.callback<void>((resume) => {
    const t = setTimeout(() => resume(Effect.void), ms)
    t.unref()
    return Effect.sync(() => clearTimeout(t))
  })
export const realWaitFor = (q: Queue.Queue<void>, ms: number) => Effect.raceFirst(Queue.take(q), realSleep(ms))
