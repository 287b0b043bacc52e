// The token buckets of failed authentications per client: a burst, then a refill at the rate
// per minute; a token given back for a usable key; the wait a refusal names; clients apart.
import { describe, expect, it } from "vitest"
import { makeAuthFailures } from "../../../src/access/keys/auth-failures.ts"

type Step = readonly ["take", string, number] | readonly ["back", string, number]

const run = (steps: ReadonlyArray<Step>, limit = { burst: 3, perMinute: 30 }) => {
  const f = makeAuthFailures(limit)
  return steps.map((s) => {
    if (s[0] === "take") return f.take(s[1], s[2])
    f.giveBack(s[1], s[2])
    return "back"
  })
}

describe("failed authentications per client", () => {
  it.each<[string, ReadonlyArray<Step>, Array<number | string>]>([
    [
      "a burst, then the wait until the next token (30 a minute: one every 2 s)",
      [
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 1000]
      ],
      [0, 0, 0, 2, 1]
    ],
    [
      "a token comes back after 2 s",
      [
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 2000]
      ],
      [0, 0, 0, 0]
    ],
    [
      "refills up to the burst, no more",
      [
        ["take", "a", 0],
        ["take", "a", 600_000],
        ["take", "a", 600_000],
        ["take", "a", 600_000],
        ["take", "a", 600_000]
      ],
      [0, 0, 0, 0, 2]
    ],
    [
      "a token given back can be taken again",
      [
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["back", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0]
      ],
      [0, 0, 0, "back", 0, 2]
    ],
    [
      "giving back never passes the burst",
      [
        ["back", "a", 0],
        ["take", "a", 0],
        ["back", "a", 0],
        ["back", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0]
      ],
      ["back", 0, "back", "back", 0, 0, 0, 2]
    ],
    [
      "clients apart",
      [
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "a", 0],
        ["take", "b", 0],
        ["take", "a", 0]
      ],
      [0, 0, 0, 0, 2]
    ]
  ])("%s", (_name, steps, seen) => expect(run(steps)).toEqual(seen))

  it("the wait is whole seconds, at least one", () => {
    const f = makeAuthFailures({ burst: 1, perMinute: 1 })
    expect(f.take("a", 0)).toBe(0)
    expect(f.take("a", 0)).toBe(60)
    expect(f.take("a", 59_500)).toBe(1)
    expect(f.take("a", 60_000)).toBe(0)
  })

  it("its clients are bounded", () => {
    const f = makeAuthFailures()
    for (let i = 0; i < 50_000; i++) f.take(`198.51.${i >> 8}.${i & 255}`, i)
    expect(f.stats().entries).toBeLessThanOrEqual(f.stats().maxEntries)
    expect(f.stats().bytes).toBeLessThanOrEqual(f.stats().maxBytes)
  })
})
