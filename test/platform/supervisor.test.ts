// The supervisor: loops and stop steps stop in reverse order of start, each stop step waiting
// for what started after it; a failing loop is logged with its name, and restarted where its
// policy says so.
import { it as effectIt } from "@effect/vitest"
import { Clock, Data, Effect, Exit, Fiber, Logger, Schedule, Scope } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import { lineLogger } from "../../src/platform/logging.ts"
import { makeSupervisor, restarting } from "../../src/platform/supervisor.ts"

class Broken extends Data.TaggedError("Broken")<{ readonly n: number }> {}

/** Waits (a few ms at a time) until `cond` holds; the test's time limit bounds it. */
const waitUntil = (cond: () => boolean): Effect.Effect<void> =>
  Effect.suspend(() => (cond() ? Effect.void : Effect.sleep(5).pipe(Effect.andThen(waitUntil(cond)))))

type Line = { readonly level: string; readonly message: string; readonly fields: Record<string, unknown> }

/** Runs `body` with a supervisor in a scope it then closes; returns the log lines. */
const withSupervisor = async (
  body: (s: Effect.Success<typeof makeSupervisor>) => Effect.Effect<void>
): Promise<Array<Line>> => {
  const lines: Array<Line> = []
  const logger = Logger.layer([lineLogger((level, message, fields) => lines.push({ level, message, fields }))])
  await Effect.runPromise(
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const s = yield* makeSupervisor.pipe(Scope.provide(scope))
      yield* body(s)
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(logger))
  )
  return lines
}

describe("supervisor", () => {
  it("stops loops and stop steps last started first, each after those started later have ended", async () => {
    const events: Array<string> = []
    const started = new Set<string>()
    // A loop that runs until interrupted, and says when it has ended.
    const loop = (name: string) =>
      Effect.sync(() => started.add(name)).pipe(
        Effect.andThen(Effect.never),
        Effect.onInterrupt(() => Effect.sync(() => events.push(`${name} ended`)))
      )
    await withSupervisor((s) =>
      Effect.gen(function* () {
        yield* s.onStop(
          "first step",
          Effect.sync(() => events.push("first step"))
        )
        yield* s.run("a", loop("a"))
        yield* s.onStop("slow step", Effect.sleep(30).pipe(Effect.andThen(Effect.sync(() => events.push("slow step")))))
        yield* s.hold(Effect.acquireRelease(Effect.void, () => Effect.sync(() => events.push("held released"))))
        yield* s.run("b", loop("b"))
        yield* waitUntil(() => started.size === 2)
        events.push("stop")
      })
    )
    expect(events).toEqual(["stop", "b ended", "held released", "slow step", "a ended", "first step"])
  })

  it("logs a loop that fails with its name, and the others run on", async () => {
    let ticks = 0
    const lines = await withSupervisor((s) =>
      Effect.gen(function* () {
        yield* s.run("doomed", Effect.fail(new Broken({ n: 1 })))
        yield* s.run("steady", Effect.forever(Effect.sleep(5).pipe(Effect.andThen(Effect.sync(() => ticks++)))))
        yield* waitUntil(() => ticks > 2)
      })
    )
    const failures = lines.filter((l) => l.message === "background loop failed")
    expect(failures).toHaveLength(1)
    expect(failures[0]!.level).toBe("error")
    expect(failures[0]!.fields.loop).toBe("doomed")
    expect(String(failures[0]!.fields.error)).toContain("Broken")
  })

  it("restarts a failed loop on its policy's schedule, until it runs on", async () => {
    const runs: Array<number> = []
    const lines = await withSupervisor((s) =>
      Effect.gen(function* () {
        // Fails its first two runs, then runs until stopped.
        const loop = Effect.suspend(() => {
          runs.push(runs.length + 1)
          return runs.length <= 2 ? Effect.fail(new Broken({ n: runs.length })) : Effect.never
        })
        yield* s.run("flaky", loop, { restart: Schedule.spaced("5 millis") })
        yield* waitUntil(() => runs.length === 3)
      })
    )
    expect(runs).toEqual([1, 2, 3])
    // Each failure is the loop's to report; the supervisor logs only a loop that ends failed.
    expect(lines.filter((l) => l.message === "background loop failed")).toEqual([])
  })

  it("logs a stop step that fails with its name, and goes on with the stop", async () => {
    const events: Array<string> = []
    const lines = await withSupervisor((s) =>
      Effect.gen(function* () {
        yield* s.onStop(
          "after",
          Effect.sync(() => events.push("after"))
        )
        yield* s.onStop("breaks", Effect.fail(new Broken({ n: 0 })))
      })
    )
    expect(events).toEqual(["after"])
    const failed = lines.filter((l) => l.message === "stopping failed")
    expect(failed.map((l) => l.fields.loop)).toEqual(["breaks"])
  })

  effectIt.effect("starts the backoff over after a run that lived resetAfter, and only then", () =>
    Effect.gen(function* () {
      // Runs 1–4 fail at once, run 5 lives 1 s, run 6 lives 0.4 s (under resetAfter), then all fail at once.
      const lives = [0, 0, 0, 0, 1_000, 400, 0, 0]
      const starts: Array<number> = []
      const loop = Effect.gen(function* () {
        starts.push(yield* Clock.currentTimeMillis)
        const n = starts.length
        if (n > lives.length) return yield* Effect.never
        yield* Effect.sleep(lives[n - 1]!)
        return yield* Effect.fail(new Broken({ n }))
      })
      const backoff = Schedule.exponential("10 millis", 2)
      const fiber = yield* Effect.forkChild(restarting(loop, { restart: backoff, resetAfter: "500 millis" }))
      for (let i = 0; i < 40 && starts.length <= lives.length; i++) yield* TestClock.adjust(50)
      yield* Fiber.interrupt(fiber)
      const gaps = starts.slice(1).map((t, i) => t - starts[i]! - lives[i]!)
      // 10, 20, 40, 80 ms; after the run that lived, at once; then from 10 ms again (not 160), and
      // the run of 0.4 s, under resetAfter, did not start it over: 10, 20, 40.
      expect(gaps).toEqual([10, 20, 40, 80, 0, 10, 20, 40])
    })
  )
})
