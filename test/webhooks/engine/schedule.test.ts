// Pure pieces of delivery: the retry schedule, the body, what an attempt's result means,
// and the endpoint-health tally.
import { describe, expect, it } from "vitest"
import { deliveryBody } from "../../../src/webhooks/net/body.ts"
import { decide } from "../../../src/webhooks/engine/engine.ts"
import { tallyEndpoints } from "../../../src/webhooks/engine/record-queries.ts"
import type { Claimed, Outcome } from "../../../src/webhooks/engine/item.ts"
import {
  DEFAULT_RETRY_SCHEDULE,
  delayAfter,
  parseRetrySchedule,
  parseRetryScheduleOrThrow
} from "../../../src/domain/retry-schedule.ts"
import type { SendResult } from "../../../src/webhooks/net/sender.ts"

describe("WEBHOOK_RETRY_SCHEDULE", () => {
  it("the default: six attempts, then 15 min, 1 h, 4 h, 12 h, 1 day apart", () => {
    const s = parseRetryScheduleOrThrow(DEFAULT_RETRY_SCHEDULE)
    expect(s.maxAttempts).toBe(6)
    expect(s.delaysMs).toEqual([900_000, 3_600_000, 14_400_000, 43_200_000, 86_400_000])
    expect([1, 2, 3, 4, 5, 6].map((n) => delayAfter(s, n))).toEqual([...s.delaysMs, null])
  })

  it.each([
    ["100ms,100ms", [100, 100]],
    [" 1s , 1.5s ", [1_000, 1_500]],
    ["2h", [7_200_000]],
    ["", []]
  ])("parses %j", (text, delays) => {
    const r = parseRetrySchedule(text)
    expect(r.ok && r.schedule.delaysMs).toEqual(delays)
    expect(r.ok && r.schedule.maxAttempts).toBe(delays.length + 1)
  })

  it.each(["15", "15 minutes", "1w", "-1s", "1h,,1h", "31d"])("refuses %j with a clear message", (text) => {
    const r = parseRetrySchedule(text)
    expect(r.ok).toBe(false)
    expect(!r.ok && r.error).toMatch(/^WEBHOOK_RETRY_SCHEDULE: /)
  })
})

describe("the body", () => {
  it("splices the stored record text in verbatim", () => {
    const payload = '{"id":"a","title":"caf\\u00e9","n":1.50,"z":null}'
    const body = deliveryBody({
      deliveryId: 'd"1',
      event: "incident.created",
      createdAt: "2026-01-02T03:04:05.006Z",
      payload
    })
    expect(body).toBe(
      `{"id":"d\\"1","event":"incident.created","createdAt":"2026-01-02T03:04:05.006Z","data":${payload}}`
    )
    expect(JSON.parse(body).data.n).toBe(1.5)
  })
})

const claimed = (over: Partial<Claimed> = {}): Claimed => ({
  id: "d1",
  eventId: "v1",
  attempts: 0,
  manual: false,
  event: "incident.created",
  endpointId: "e1",
  subscriptionId: null,
  keyId: null,
  url: "https://example.com/",
  secret: Buffer.alloc(0),
  previousSecret: null,
  origin: "example.com",
  eventCreatedAt: "2026-01-01T00:00:00.000Z",
  payload: "{}",
  companyId: "c1",
  rateLimit: null,
  orderingKey: null,
  ...over
})
const result = (over: Partial<SendResult> = {}): SendResult => ({
  ok: false,
  status: 500,
  error: "http 500",
  errorKind: "http",
  durationMs: 5,
  responseSnippet: "",
  addresses: [],
  ...over
})
const schedule = parseRetryScheduleOrThrow("1m,2m")

describe("what an attempt means", () => {
  it("success finishes and resets endpoint health", () => {
    expect(
      decide(claimed(), result({ ok: true, status: 204, error: null, errorKind: null }), 0, 10, schedule)
    ).toMatchObject({
      state: "succeeded",
      nextAt: null,
      health: "reset"
    })
  })

  it("a failure with attempts left is due after the wait, counted from the end of the attempt", () => {
    const o = decide(claimed({ attempts: 1 }), result(), 1_000, 1_500, schedule)
    expect([o.state, o.nextAt?.getTime(), o.health]).toEqual(["pending", 1_500 + 120_000, null])
  })

  it("the last failure finishes the delivery and counts toward switching off; a failed Send Again does not", () => {
    expect(decide(claimed({ attempts: 2 }), result(), 0, 0, schedule)).toMatchObject({
      state: "failed",
      health: "fail"
    })
    expect(decide(claimed({ attempts: 3, manual: true }), result(), 0, 0, schedule)).toMatchObject({
      state: "failed",
      health: null
    })
  })

  it("a Send Again of a finished delivery is one attempt, however few attempts it had used", () => {
    // A delivery that succeeded at its first attempt, sent again to a receiver now failing.
    expect(decide(claimed({ attempts: 1, manual: true }), result(), 0, 0, schedule)).toMatchObject({
      state: "failed",
      nextAt: null,
      health: null
    })
    expect(
      decide(
        claimed({ attempts: 1, manual: true }),
        result({ ok: true, status: 200, error: null, errorKind: null }),
        0,
        0,
        schedule
      )
    ).toMatchObject({
      state: "succeeded",
      nextAt: null
    })
  })

  it("410 from a subscription's receiver ends it at once; from an endpoint's it is a failure like any", () => {
    const sub = claimed({ endpointId: null, subscriptionId: "s1", keyId: "k1" })
    expect(decide(sub, result({ status: 410, error: "http 410" }), 0, 0, schedule)).toMatchObject({
      state: "failed",
      gone: true,
      health: null
    })
    expect(decide(claimed(), result({ status: 410, error: "http 410" }), 0, 0, schedule)).toMatchObject({
      state: "pending",
      gone: false
    })
  })
})

describe("endpoint health tally", () => {
  const o = (endpointId: string, health: Outcome["health"], error: string | null = null): Outcome =>
    ({ endpointId, health, error }) as Outcome
  it("counts failures after the last success, per endpoint, in completion order", () => {
    expect(
      tallyEndpoints([
        o("a", "fail", "x"),
        o("a", "reset"),
        o("a", "fail", "y"),
        o("a", "fail", "z"),
        o("b", "fail", "q"),
        o("c", null)
      ])
    ).toEqual([
      { id: "a", reset: true, lead: 1, peak: 2, fails: 2, lastError: "z" },
      { id: "b", reset: false, lead: 1, peak: 0, fails: 1, lastError: "q" }
    ])
  })

  it("keeps the runs a later success would hide: before the first success, and the longest after one", () => {
    const run = (n: number) => Array.from({ length: n }, (_, i) => o("a", "fail", `e${i}`))
    expect(
      tallyEndpoints([...run(4), o("a", "reset"), ...run(15), o("a", "reset"), ...run(3), o("a", "reset")])
    ).toEqual([{ id: "a", reset: true, lead: 4, peak: 15, fails: 0, lastError: "e2" }])
  })
})
