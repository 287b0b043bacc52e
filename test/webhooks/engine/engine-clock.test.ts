// The default schedule (15m, 1h, 4h, 12h, 1d) on a TestClock: the engine takes its time
// from Effect's Clock, so virtual hours pass in milliseconds while the HTTP is real.
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect } from "vitest"
import { makeEngine } from "../../../src/webhooks/engine/engine.ts"
import { DEFAULT_RETRY_SCHEDULE, parseRetryScheduleOrThrow } from "../../../src/domain/retry-schedule.ts"
import { insertIncident } from "../../support/app.ts"
import { addEndpoint, at, attemptsOf, deliveries, sleep, useWorld, waitFor } from "../../support/world.ts"

const w = useWorld()

const MINUTE = 60_000
const HOUR = 60 * MINUTE

describe("the default retry schedule on a test clock", () => {
  it.effect("attempts at once, then after 15 minutes, 1 hour, 4 hours, 12 hours and 1 day", () =>
    Effect.gen(function* () {
      w.receiver.reply("/clock", { status: 500 })
      yield* Effect.promise(() => addEndpoint(w, "/clock", { name: "clock" }))
      const engine = yield* makeEngine({
        sql: w.deps.sql,
        secretsKey: w.deps.secretsKey,
        allowed: w.deps.allowed,
        ca: w.deps.ca,
        schedule: parseRetryScheduleOrThrow(DEFAULT_RETRY_SCHEDULE),
        timeoutMs: 3_000,
        pollMs: 24 * HOUR // only notifications and pokes drive it here
      })
      const count = () => at(w.receiver, "/clock").length
      const real = (f: () => Promise<unknown>) => Effect.promise(f)

      yield* real(() => insertIncident(w.db.sql, w.company.id))
      yield* real(() => waitFor(() => count() === 1, "the first attempt"))
      // The row is written with the first attempt's outcome, just after the answer.
      const [d] = yield* real(() =>
        waitFor(
          async () => ((await deliveries(w.db.sql)).length === 1 ? deliveries(w.db.sql) : null),
          "the delivery row"
        )
      ) as Effect.Effect<Awaited<ReturnType<typeof deliveries>>>
      yield* real(() => waitFor(async () => (await attemptsOf(w.db.sql, d!.id)).length === 1, "attempt 1 recorded"))

      for (const [n, wait] of [
        [2, 15 * MINUTE],
        [3, HOUR],
        [4, 4 * HOUR],
        [5, 12 * HOUR],
        [6, 24 * HOUR]
      ] as const) {
        // A second short of the wait: nothing is due yet.
        yield* TestClock.adjust(wait - 1_000)
        yield* engine.wake
        yield* real(() => sleep(250))
        expect(count()).toBe(n - 1)
        // The wait is over: the next attempt goes.
        yield* TestClock.adjust(1_000)
        yield* engine.wake
        yield* real(() =>
          waitFor(async () => (await attemptsOf(w.db.sql, d!.id)).length === n, `attempt ${n} recorded`)
        )
        expect(count()).toBe(n)
      }
      const attempts = yield* real(() => attemptsOf(w.db.sql, d!.id)) as Effect.Effect<
        Awaited<ReturnType<typeof attemptsOf>>
      >
      // started_at is on the test clock: the gaps are the schedule exactly.
      const gaps = attempts.slice(1).map((a, i) => a.started_at.getTime() - attempts[i]!.started_at.getTime())
      expect(gaps).toEqual([15 * MINUTE, HOUR, 4 * HOUR, 12 * HOUR, 24 * HOUR])
      const [after] = (yield* real(() => deliveries(w.db.sql))) as Awaited<ReturnType<typeof deliveries>>
      expect([after!.state, after!.attempts]).toEqual(["failed", 6])

      // Nothing more, however long we wait.
      yield* TestClock.adjust(30 * 24 * HOUR)
      yield* engine.wake
      yield* real(() => sleep(250))
      expect(count()).toBe(6)
    }).pipe(Effect.scoped)
  )
})
