// A transaction's commit time as capture takes it (src/pipeline/capture/large-stream.ts,
// commitDate): pgoutput's microseconds to the millisecond, never before the commit time taken
// before it (PostgreSQL stamps a commit before writing it, so the WAL's order can disagree).
import { describe, expect, it } from "vitest"
import { CommitClock, commitDate } from "../../../src/pipeline/capture/large-stream.ts"

const us = (iso: string, extra = 0n) => BigInt(Date.parse(iso)) * 1000n + extra

describe("commitDate", () => {
  const cases: ReadonlyArray<readonly [string, bigint, Date | null, string]> = [
    ["no floor: the stamp, to the ms", us("2026-03-08T10:15:42.317Z", 999n), null, "2026-03-08T10:15:42.317Z"],
    [
      "a floor before it: the stamp",
      us("2026-03-08T10:15:42.317Z"),
      new Date("2026-03-08T10:15:42.316Z"),
      "2026-03-08T10:15:42.317Z"
    ],
    [
      "a floor equal to it: the stamp",
      us("2026-03-08T10:15:42.317Z"),
      new Date("2026-03-08T10:15:42.317Z"),
      "2026-03-08T10:15:42.317Z"
    ],
    [
      "stamped before the one ahead of it in the WAL: the floor",
      us("2026-03-08T10:15:42.316Z", 998n),
      new Date("2026-03-08T10:15:42.317Z"),
      "2026-03-08T10:15:42.317Z"
    ]
  ]
  for (const [name, stamp, floor, want] of cases) {
    it(name, () => {
      expect(commitDate(stamp, floor).toISOString()).toBe(want)
    })
  }

  it("a run's clock takes each time over the one before, from the time stored with its checkpoint", () => {
    const clock = new CommitClock(new Date("2026-03-08T10:15:42.317Z"))
    expect(clock.take(us("2026-03-08T10:15:42.316Z")).toISOString()).toBe("2026-03-08T10:15:42.317Z")
    expect(clock.take(us("2026-03-08T10:15:42.320Z")).toISOString()).toBe("2026-03-08T10:15:42.320Z")
    expect(clock.take(us("2026-03-08T10:15:42.319Z")).toISOString()).toBe("2026-03-08T10:15:42.320Z")
  })
})
