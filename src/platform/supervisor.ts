// The supervisor: every background loop of a process (capture's run, the delivery engine's
// loops, the replay lane) runs under it as a named fiber, and it stops them together. Loops
// and the steps of their stop (a last write, a hand-back, an unlisten) are kept in one
// sequential scope in the order they were started, and stopped in reverse: what started
// last stops first, and each step waits for the ones after it. main.ts starts capture before
// delivery, so a stop lets delivery finish its in-flight work before capture stores its
// checkpoint; the HTTP server, built after both, closes before the supervisor stops anything.
//
// A loop that fails is logged with its name. With a restart policy (capture: runs retried
// with backoff) it starts again on that schedule, and says itself what went wrong each time;
// without one, the loop keeps its own policy inside (the engine's steps retry a second later)
// and a failure that still escapes it is logged as the loop's end.
import { Cause, Context, Effect, Layer, type Schedule, Scope } from "effect"

export type LoopPolicy = {
  /** A failed run starts again on this schedule. */
  readonly restart?: Schedule.Schedule<unknown, unknown> | undefined
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
      const supervised = (policy?.restart ? Effect.retry(loop, policy.restart) : loop).pipe(
        Effect.catchCause(failed("background loop", name))
      )
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
