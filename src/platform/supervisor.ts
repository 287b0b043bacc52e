// The supervisor: every background loop of a process (capture's run, the delivery engine's
// loops, the replay lane) runs under it as a named fiber, and it stops them together. Loops
// and the steps of their stop (a last write, a hand-back, an unlisten) are kept in one
// sequential scope in the order they were started, and stopped in reverse: what started
// last stops first, and each step waits for the ones after it. main.ts starts capture before
// delivery, so a stop lets delivery finish its in-flight work before capture stores its
// checkpoint; the HTTP server, built after both, closes before the supervisor stops anything.
//
// A loop that fails is logged with its name. With a restart policy (capture: runs retried
// with backoff) it starts again on that schedule, and says itself what went wrong each time; a
// run that lived `resetAfter` before it failed starts the schedule over, so that a process whose
// database restarted now and then over months reconnects at the first delay, not the longest;
// without one, the loop keeps its own policy inside (the engine's steps retry a second later)
// and a failure that still escapes it is logged as the loop's end.
import { Cause, Clock, Context, Duration, Effect, Layer, type Schedule, Scope } from "effect"

export type LoopPolicy = {
  /** A failed run starts again on this schedule. */
  readonly restart?: Schedule.Schedule<unknown, unknown> | undefined
  /** A run that lasted this long before failing starts `restart` from its first step. */
  readonly resetAfter?: Duration.Input | undefined
}

/** A run's failure after it lived `resetAfter`: it ends the backoff, which then starts over. */
class Lived {
  readonly error: unknown
  constructor(error: unknown) {
    this.error = error
  }
}

/** `loop` restarted on `policy.restart`, the schedule starting over after a run that lived `policy.resetAfter`. */
export const restarting = <A, E, R>(
  loop: Effect.Effect<A, E, R>,
  policy: { readonly restart: Schedule.Schedule<unknown, unknown>; readonly resetAfter?: Duration.Input | undefined }
): Effect.Effect<A, unknown, R> => {
  if (policy.resetAfter === undefined) return Effect.retry(loop, policy.restart)
  const lives = Duration.toMillis(Duration.fromInputUnsafe(policy.resetAfter))
  const timed = Effect.flatMap(Clock.currentTimeMillis, (started) =>
    Effect.catch(loop, (e) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.fail(now - started >= lives ? new Lived(e) : e))
    )
  )
  const backedOff = Effect.retry(timed, { schedule: policy.restart, while: (e) => !(e instanceof Lived) })
  return Effect.retry(backedOff, { while: (e) => e instanceof Lived })
}

export interface SupervisorShape {
  /** Runs `loop` as a fiber named `name` until the supervisor stops (or the loop ends). */
  readonly run: <A, E, R>(
    name: string,
    loop: Effect.Effect<A, E, R>,
    policy?: LoopPolicy
  ) => Effect.Effect<void, never, R>
  /** A step of the stop, in its turn: after everything started later has stopped. */
  readonly onStop: <R>(name: string, step: Effect.Effect<unknown, unknown, R>) => Effect.Effect<void, never, R>
  /** Acquires a resource released in its turn of the stop (a LISTEN connection, say). */
  readonly hold: <A, E, R>(acquire: Effect.Effect<A, E, R>) => Effect.Effect<A, E, Exclude<R, Scope.Scope>>
}

export class Supervisor extends Context.Service<Supervisor, SupervisorShape>()("platform/Supervisor") {}

/** A supervisor whose loops stop when the current scope closes. */
export const makeSupervisor: Effect.Effect<SupervisorShape, never, Scope.Scope> = Effect.gen(function* () {
  const scope = yield* Scope.fork(yield* Effect.scope, "sequential")
  const failed = (what: string, name: string) => (cause: Cause.Cause<unknown>) =>
    Cause.hasInterruptsOnly(cause)
      ? Effect.void
      : Effect.logError(`${what} failed`, { loop: name, error: Cause.pretty(cause) })
  const run = <A, E, R>(name: string, loop: Effect.Effect<A, E, R>, policy?: LoopPolicy) =>
    Effect.gen(function* () {
      const supervised = (
        policy?.restart ? restarting(loop, { restart: policy.restart, resetAfter: policy.resetAfter }) : loop
      ).pipe(Effect.catchCause(failed("background loop", name)))
      yield* Effect.forkIn(supervised, scope)
    })
  // Stop steps run when the scope closes, with what they needed where they were registered.
  const onStop = <R>(name: string, step: Effect.Effect<unknown, unknown, R>) =>
    Effect.flatMap(Effect.context<R>(), (context) =>
      Scope.addFinalizer(scope, step.pipe(Effect.catchCause(failed("stopping", name)), Effect.provideContext(context)))
    )
  return {
    run,
    onStop,
    hold: (acquire) => Scope.provide(scope)(acquire)
  } satisfies SupervisorShape
})

/** The process's supervisor (main.ts), stopping its loops when its layer is torn down. */
export const SupervisorLive = Layer.effect(Supervisor, makeSupervisor)

/** The supervisor in context, or (tests, benchmarks, tools that run one part) one of the current scope's own. */
export const currentSupervisor: Effect.Effect<SupervisorShape, never, Scope.Scope> = Effect.flatMap(
  Effect.serviceOption(Supervisor),
  (found) => (found._tag === "Some" ? Effect.succeed(found.value) : makeSupervisor)
)
