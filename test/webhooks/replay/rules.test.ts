// The replay lane's and pages' rules as pure functions: REPLAY_RATE, the pacing allowance,
// why a replay waits, an endpoint's health, the replay form's query.
import { describe, expect, it } from "vitest"
import { replayFormOf, replayQuery } from "../../../src/faces/pages/replays.ts"
import { allowance, parseReplayRate, replayWindow } from "../../../src/webhooks/replay/lane.ts"
import { waitingReason } from "../../../src/webhooks/replay/jobs.ts"
import { endpointHealth } from "../../../src/webhooks/endpoints/endpoints.ts"

describe("REPLAY_RATE", () => {
  it.each([
    ["10", 10],
    ["0.5", 0.5],
    [" 1000 ", 1000],
    ["1", 1]
  ])("%j is %d per second", (text, rate) => expect(parseReplayRate(text)).toEqual({ ok: true, rate }))
  it.each(["0", "-1", "1001", "", "ten", "1e3", "5/s", "Infinity", "0.0"])("%j is refused", (text) => {
    const r = parseReplayRate(text)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toContain(`not "${text}"`)
  })
  it("hands over at most one second's worth at a time", () => {
    expect([0.5, 1, 2.5, 10, 1000].map(replayWindow)).toEqual([1, 1, 3, 10, 1000])
  })
})

describe("the pacing allowance", () => {
  const now = 1_000_000
  // [a step's input, how many it hands over, where its clock is after]
  const steps: ReadonlyArray<readonly [Omit<Parameters<typeof allowance>[0], "nowMs">, number, number | null]> = [
    // first step: a second's worth at most, the clock advances by what was handed over
    [{ pacedAtMs: null, rate: 10, inEngine: 0, left: 100 }, 10, now],
    [{ pacedAtMs: null, rate: 10, inEngine: 0, left: 3 }, 3, now - 700],
    // 100 ms after the clock at 10/s: one more
    [{ pacedAtMs: now - 100, rate: 10, inEngine: 0, left: 100 }, 1, now],
    // 50 ms: none yet, the clock stays
    [{ pacedAtMs: now - 50, rate: 10, inEngine: 0, left: 100 }, 0, now - 50],
    // the window is full: a slow receiver slows the replay down
    [{ pacedAtMs: now - 1_000, rate: 10, inEngine: 10, left: 100 }, 0, now - 1_000],
    [{ pacedAtMs: now - 1_000, rate: 10, inEngine: 7, left: 100 }, 3, now - 700],
    // after a long wait (endpoint off), no burst: a second's worth at most
    [{ pacedAtMs: now - 3_600_000, rate: 10, inEngine: 0, left: 100 }, 10, now],
    // slower than one a second
    [{ pacedAtMs: now - 1_000, rate: 0.5, inEngine: 0, left: 100 }, 0, now - 1_000],
    [{ pacedAtMs: now - 2_000, rate: 0.5, inEngine: 0, left: 100 }, 1, now],
    [{ pacedAtMs: null, rate: 0.5, inEngine: 0, left: 100 }, 1, now],
    [{ pacedAtMs: now - 3_600_000, rate: 0.5, inEngine: 0, left: 100 }, 1, now],
    // nothing left
    [{ pacedAtMs: now - 1_000, rate: 10, inEngine: 0, left: 0 }, 0, now - 1_000]
  ]
  it.each(steps.map(([input, n, pacedAtMs]) => [input, { n, pacedAtMs }] as const))("%j: %j", (input, expected) =>
    expect(allowance({ nowMs: now, ...input })).toEqual(expected)
  )

  it("keeps the rate over many steps, whatever the tick", () => {
    for (const [rate, tick] of [
      [10, 100],
      [10, 37],
      [3, 250],
      [0.5, 100],
      [100, 20]
    ] as const) {
      let paced: number | null = null
      let sent = 0
      const start = 5_000_000
      for (let t = start; t <= start + 60_000; t += tick) {
        const a = allowance({ nowMs: t, pacedAtMs: paced, rate, inEngine: 0, left: 1_000_000 })
        sent += a.n
        paced = a.pacedAtMs
      }
      // 60 s at `rate`, plus at most the first second's worth, minus at most one tick
      expect(sent, `${rate}/s every ${tick} ms`).toBeGreaterThanOrEqual(
        Math.floor(60 * rate) - Math.ceil((rate * tick) / 1000)
      )
      expect(sent, `${rate}/s every ${tick} ms`).toBeLessThanOrEqual(Math.ceil(61 * rate))
    }
  })
})

describe("why a replay waits", () => {
  it.each([
    [{ state: "running", kind: "endpoint", on: true, behind: null }, null],
    [
      { state: "running", kind: "endpoint", on: false, behind: null },
      "the endpoint is switched off: it goes on once it is turned on"
    ],
    [
      { state: "running", kind: "subscription", on: false, behind: "r1" },
      "the subscription is turned off: it goes on once it is turned on"
    ],
    [{ state: "running", kind: "endpoint", on: true, behind: "r1" }, "another replay to this endpoint runs first (r1)"],
    [{ state: "finished", kind: "endpoint", on: false, behind: null }, null],
    [{ state: "cancelled", kind: "endpoint", on: true, behind: "r1" }, null]
  ] as const)("%j: %j", (input, expected) => expect(waitingReason(input)).toBe(expected))
})

describe("an endpoint's health on the pages", () => {
  it.each([
    [{ enabled: true, consecutiveFailures: 0 }, "ok"],
    [{ enabled: true, consecutiveFailures: 9 }, "ok"],
    [{ enabled: true, consecutiveFailures: 10 }, "failing"],
    [{ enabled: true, consecutiveFailures: 14 }, "failing"],
    [{ enabled: false, consecutiveFailures: 15 }, "off"],
    [{ enabled: false, consecutiveFailures: 0 }, "off"]
  ] as const)("%j: %s", (e, health) => expect(endpointHealth(e)).toBe(health))
})

describe("the replay form's query", () => {
  it("round-trips, keeping only what is set", () => {
    const form = {
      since: "2026-03-01T00:00:00.000Z",
      until: "2026-03-02",
      events: ["incident.created", "permit.closed"],
      failed: true
    }
    const q = replayQuery(form)
    expect(q).toBe(
      "?since=2026-03-01T00%3A00%3A00.000Z&until=2026-03-02&events=incident.created&events=permit.closed&failed=1"
    )
    expect(replayFormOf(new URLSearchParams(q))).toEqual(form)
    expect(replayQuery({ since: "", until: "", events: [], failed: false })).toBe("")
    expect(replayFormOf(new URLSearchParams("failed=yes&events=&since=%20x%20"))).toEqual({
      since: "x",
      until: "",
      events: [],
      failed: false
    })
  })
})
