// Fair sending, as a rule: which waiting delivery gets the next send slot.
import { describe, expect, it } from "vitest"
import { fairLimits, makeScheduler, type FairLimits, type Lane } from "../../../src/webhooks/engine/fair.ts"
import { isUnanswered, makeHealth } from "../../../src/webhooks/engine/health.ts"

type It = { readonly name: string; readonly lane: Lane }

/** Items named "<company>/<flow>/<n>", each flow on its own origin unless `origins` says. */
const items = (spec: Record<string, number>, origins: Record<string, string> = {}): Array<It> => {
  const out: Array<It> = []
  for (const [key, n] of Object.entries(spec)) {
    const company = key.split("/")[0]!
    for (let i = 0; i < n; i++)
      out.push({ name: `${key}/${i}`, lane: { company, flow: key, origin: origins[key] ?? `${key}.example:443` } })
  }
  return out
}

const setup = (
  limits: FairLimits,
  spec: Record<string, number>,
  originLimit: (origin: string) => number = () => 100,
  origins: Record<string, string> = {}
) => {
  const s = makeScheduler<It>(limits, originLimit)
  for (const it of items(spec, origins)) s.enqueue(it, it.lane)
  /** Starts as many as may start now; their names. */
  const drain = (now = 0): Array<string> => {
    const out: Array<string> = []
    for (let it = s.next(now); it !== null; it = s.next(now)) out.push(it.name)
    return out
  }
  return { s, drain }
}

const WIDE: FairLimits = { concurrency: 100, perFlow: 100, reserve: 0, minimum: 0 }

describe("fair sending", () => {
  it("the reserve is an eighth of the slots, the minimum half of it", () => {
    expect(fairLimits(64, 8)).toEqual({ concurrency: 64, perFlow: 8, reserve: 8, minimum: 4 })
    expect(fairLimits(4, 2)).toEqual({ concurrency: 4, perFlow: 2, reserve: 1, minimum: 1 })
  })

  it.each([
    [
      "companies take turns, whatever their backlogs",
      { "a/1": 5, "b/1": 2 },
      ["a/1/0", "b/1/0", "a/1/1", "b/1/1", "a/1/2", "a/1/3", "a/1/4"]
    ],
    [
      "a company's destinations take turns within its turns",
      { "a/1": 3, "a/2": 3, "b/1": 3 },
      ["a/1/0", "b/1/0", "a/2/0", "b/1/1", "a/1/1", "b/1/2", "a/2/1", "a/1/2", "a/2/2"]
    ],
    ["one company alone goes in order", { "a/1": 3 }, ["a/1/0", "a/1/1", "a/1/2"]]
  ])("%s", (_, spec, order) => {
    expect(setup(WIDE, spec).drain()).toEqual(order)
  })

  it("a company above its minimum leaves the reserve free; another company still gets a slot at once", () => {
    const limits: FairLimits = { concurrency: 8, perFlow: 8, reserve: 2, minimum: 1 }
    const { s, drain } = setup(limits, { "a/1": 10, "a/2": 10 })
    // a hangs: it keeps every slot it takes
    expect(drain()).toHaveLength(6)
    expect(s.inFlightOf("a")).toBe(6)
    for (const it of items({ "b/1": 3, "c/1": 3 })) s.enqueue(it, it.lane)
    // b and c each get their minimum from the reserve, and no more while a holds the rest
    expect(drain().sort()).toEqual(["b/1/0", "c/1/0"])
    expect(s.sending()).toBe(8)
    expect(drain()).toEqual([])
  })

  it("a slot freed by one company's attempt goes to another's waiting delivery", () => {
    const limits: FairLimits = { concurrency: 2, perFlow: 2, reserve: 0, minimum: 0 }
    const s = makeScheduler<It>(limits, () => 100)
    const a = items({ "a/1": 5 })
    for (const it of a) s.enqueue(it, it.lane)
    expect([s.next(0)?.name, s.next(0)?.name]).toEqual(["a/1/0", "a/1/1"])
    for (const it of items({ "b/1": 2 })) s.enqueue(it, it.lane)
    expect(s.next(0)).toBeNull()
    s.done(a[0]!, 0)
    expect(s.next(0)?.name).toBe("b/1/0")
    s.done(a[1]!, 0)
    expect(s.next(0)?.name).toBe("a/1/2")
  })

  it("keeps each destination and each receiver origin to its limit", () => {
    const limits: FairLimits = { concurrency: 100, perFlow: 2, reserve: 0, minimum: 0 }
    // a/1 and a/2 share an origin that may have one attempt at a time (not heard from yet)
    const origins = { "a/1": "shared:443", "a/2": "shared:443" }
    const { drain } = setup(limits, { "a/1": 3, "a/2": 3, "a/3": 3 }, (o) => (o === "shared:443" ? 1 : 100), origins)
    expect(drain().sort()).toEqual(["a/1/0", "a/3/0", "a/3/1"])
  })

  it("starts a destination with a rate no sooner than its interval, and says when it may", () => {
    const s = makeScheduler<It>(WIDE, () => 100)
    for (const it of items({ "a/1": 3 })) s.enqueue(it, it.lane, 200)
    for (const it of items({ "b/1": 1 })) s.enqueue(it, it.lane)
    expect(s.next(1_000)?.name).toBe("a/1/0")
    expect(s.next(1_000)?.name).toBe("b/1/0")
    expect(s.next(1_000)).toBeNull()
    expect(s.takeWakeAt()).toBe(1_200)
    expect(s.next(1_199)).toBeNull()
    expect(s.next(1_200)?.name).toBe("a/1/1")
    // a late look does not bunch them up: the next is an interval after this start
    expect(s.next(1_500)?.name).toBe("a/1/2")
  })

  it("takes waiting items out, puts one at the front, and forgets what is idle", () => {
    const s = makeScheduler<It>(WIDE, () => 100)
    const all = items({ "a/1": 3, "b/1": 2 })
    for (const it of all) s.enqueue(it, it.lane)
    expect(s.take((it) => it.lane.company === "b").map((it) => it.name)).toEqual(["b/1/0", "b/1/1"])
    expect(s.remove(all[2]!, 0)).toBe(true)
    expect(s.remove(all[2]!, 0)).toBe(false)
    s.enqueueFront(all[2]!, all[2]!.lane)
    expect(s.remove(all[1]!, 0)).toBe(true)
    expect(s.openByFlow()).toEqual(new Map([["a/1", 2]]))
    const started = [s.next(0)!, s.next(0)!]
    expect(started.map((it) => it.name)).toEqual(["a/1/2", "a/1/0"])
    expect(s.next(0)).toBeNull()
    for (const it of started) s.done(it, 0)
    s.sweep(0)
    expect(s.size()).toEqual({ flows: 0, companies: 0, origins: 0 })
    expect([s.sending(), s.queued()]).toEqual([0, 0])
  })
})

describe("receivers' health", () => {
  const limits = { perOrigin: 8, maxHeld: 512, writeAfterMs: 2_000, queueRounds: 8 }

  it("gives an origin one attempt at a time until it answers, and again after a timeout or a refused connection", () => {
    const h = makeHealth(limits)
    expect(h.limit("a:443")).toBe(1)
    h.observe("a:443", 503, "http", 20)
    expect(h.limit("a:443")).toBe(8)
    h.observe("a:443", null, "tls", 20) // a failure that is not a silence
    expect(h.limit("a:443")).toBe(8)
    h.observe("a:443", null, "timeout", 10_000)
    expect(h.limit("a:443")).toBe(1)
    h.observe("a:443", 200, null, 5)
    expect(h.limit("a:443")).toBe(8)
    h.observe("a:443", null, "connection", 1)
    expect(h.limit("a:443")).toBe(1)
  })

  it.each([
    ["an origin not heard from, its first attempt not started: a queue's worth", [], null, 64],
    ["a fast one: as much as memory allows", [[200, null, 2]], null, 512],
    ["one answering in a second: what it sends in 2 s", [[200, null, 1_000]], null, 16],
    ["one that times out: its one attempt", [[null, "timeout", 10_000]], null, 1],
    ["a fast one with a rate of 5/s: 2 s of it", [[200, null, 2]], 5, 10],
    ["a rate below one a second: still one", [[200, null, 2]], 0.1, 1]
  ] as const)("holds in memory for %s", (_, seen, rate, cap) => {
    const h = makeHealth(limits)
    for (const [status, kind, ms] of seen) h.observe("o:443", status, kind, ms)
    expect(h.capOf("o:443", rate)).toBe(cap)
  })

  it("keeps two of an origin whose first attempt has gone unanswered for 200 ms, a queue's worth before", () => {
    let now = 1_000
    const h = makeHealth(limits, () => now)
    h.started("slow:443")
    expect(h.capOf("slow:443", null)).toBe(64)
    now += 199
    expect(h.capOf("slow:443", null)).toBe(64)
    now += 1
    expect(h.capOf("slow:443", null)).toBe(2)
    h.started("slow:443") // a second attempt does not restart the grace
    expect(h.capOf("slow:443", null)).toBe(2)
    h.observe("slow:443", 200, null, 250)
    expect(h.capOf("slow:443", null)).toBe(64) // 2000 ms * 8 / 250 ms
  })

  it("counts timeouts and refused connections as unanswered, nothing else", () => {
    expect(["timeout", "connection", "http", "tls", "dns", "refused", "circuit", null].map(isUnanswered)).toEqual([
      true,
      true,
      false,
      false,
      false,
      false,
      false,
      false
    ])
  })
})
