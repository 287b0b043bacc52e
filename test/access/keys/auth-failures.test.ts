// The token buckets of failed authentications per client: a burst, then a refill at the rate
// per minute; a token given back for a usable key; the wait a refusal names; clients apart.
import { describe, expect, it } from "vitest"
import { makeAuthFailures, makeLookupBudget } from "../../../src/access/keys/auth-failures.ts"

/**
 * Steps as text, one a word: `a@1000` takes a token for client a at 1000 ms, `+a@0` gives one
 * back at 0 ms. Each step yields take's answer (the wait in seconds, 0 for a token) or "back".
 */
const run = (steps: string, limit = { burst: 3, perMinute: 30 }) => {
  const f = makeAuthFailures(limit)
  return steps.split(" ").map((step) => {
    const [, back, client, at] = /^(\+?)(\w+)@(\d+)$/.exec(step)!
    if (back === "") return f.take(client!, Number(at))
    f.giveBack(client!, Number(at))
    return "back"
  })
}

describe("failed authentications per client", () => {
  it.each<[string, string, Array<number | string>]>([
    [
      "a burst, then the wait until the next token (30 a minute: one every 2 s)",
      "a@0 a@0 a@0 a@0 a@1000",
      [0, 0, 0, 2, 1]
    ],
    ["a token comes back after 2 s", "a@0 a@0 a@0 a@2000", [0, 0, 0, 0]],
    ["refills up to the burst, no more", "a@0 a@600000 a@600000 a@600000 a@600000", [0, 0, 0, 0, 2]],
    ["a token given back can be taken again", "a@0 a@0 a@0 +a@0 a@0 a@0", [0, 0, 0, "back", 0, 2]],
    [
      "giving back never passes the burst",
      "+a@0 a@0 +a@0 +a@0 a@0 a@0 a@0 a@0",
      ["back", 0, "back", "back", 0, 0, 0, 2]
    ],
    ["clients apart", "a@0 a@0 a@0 b@0 a@0", [0, 0, 0, 0, 2]]
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

describe("the process's budget of lookups", () => {
  // 2 a second: a burst of 4, one token every 500 ms.
  it.each<[string, Array<[string, number]>, Array<number | string>]>([
    [
      "a burst of two seconds' worth, then the wait",
      [
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 400]
      ],
      [0, 0, 0, 0, 1, 1]
    ],
    [
      "refills at its rate, up to the burst",
      [
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 500],
        ["take", 500],
        ["take", 60_000],
        ["take", 60_000],
        ["take", 60_000],
        ["take", 60_000],
        ["take", 60_000]
      ],
      [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    ],
    [
      "a token given back (a usable key) is there again",
      [
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["back", 0],
        ["take", 0],
        ["take", 0]
      ],
      [0, 0, 0, 0, "back", 0, 1]
    ],
    [
      "waiting takes nothing",
      [
        ["wait", 0],
        ["take", 0],
        ["take", 0],
        ["take", 0],
        ["wait", 0],
        ["take", 0],
        ["wait", 0]
      ],
      [0, 0, 0, 0, 0, 0, 1]
    ]
  ])("%s", (_name, steps, seen) => {
    const b = makeLookupBudget(2)
    expect(
      steps.map(([op, at]) => {
        if (op === "back") {
          b.giveBack(at)
          return "back"
        }
        return op === "take" ? b.take(at) : b.wait(at)
      })
    ).toEqual(seen)
  })

  it("counts what it refused, taking or at the door", () => {
    const b = makeLookupBudget(1)
    expect([b.take(0), b.take(0), b.take(0), b.wait(0), b.wait(0)]).toEqual([0, 0, 1, 1, 1])
    expect(b.refused()).toBe(3)
  })
})
