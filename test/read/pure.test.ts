// Table tests of the read model's pure helpers: status filters and name patterns, the name
// filter's day keys and day ranges, cursors, the list request a decoded query makes, and the
// hang-up a waiting stream request listens to, and which stream requests share one read.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { NAME_QUERY, STATUS_QUERY } from "../../src/faces/api/query.ts"
import { cursorKey, decodeCursor, encodeCursor, type CursorBinding } from "../../src/read/cursor.ts"
import { dayKeys, dayRanges, listRequest, namePattern, statusesFor } from "../../src/read/lists.ts"
import { Hangup, sharedReads, type StreamCore, type StreamRead } from "../../src/read/stream.ts"

describe("status filter and name pattern", () => {
  it.each([
    ["open", ["open", "in_progress"]],
    ["closed", ["completed", "verified"]],
    ["in_progress", ["in_progress"]],
    ["completed", ["completed"]],
    ["verified", ["verified"]],
    ["OPEN", undefined],
    ["done", undefined],
    ["toString", undefined]
  ] as const)("status %s", (value, expected) => expect(statusesFor(value)).toEqual(expected))
  it.each([
    ["ana", "%ana%"],
    ["100%", "%100\\%%"],
    ["a_b", "%a\\_b%"],
    ["c:\\x", "%c:\\\\x%"]
  ])("name %j -> %j", (text, pattern) => expect(namePattern(text)).toBe(pattern))
})

describe("the name filter's days", () => {
  /** The days a key stands for: its width and its number, as sql/040_name_days.sql makes them. */
  const daysOf = (key: string): Array<number> => {
    const [company, resource, width, n] = key.split("/")
    expect([company, resource]).toEqual(["c1", "workers"])
    return Array.from({ length: Number(width) }, (_, i) => Number(n) * Number(width) + i)
  }
  it.each([
    [20_422, 20_422, ["c1/workers/1/20422"]],
    [20_480, 20_495, ["c1/workers/16/1280"]],
    [20_479, 20_496, ["c1/workers/1/20479", "c1/workers/16/1280", "c1/workers/1/20496"]],
    [-1, 0, ["c1/workers/1/-1", "c1/workers/1/0"]],
    [-16, -1, ["c1/workers/16/-1"]],
    [-256, 255, ["c1/workers/256/-1", "c1/workers/256/0"]],
    [5, 4, []]
  ])("days %i to %i: %j", (from, to, keys) => expect(dayKeys("c1", "workers", from, to)).toEqual(keys))
  it.each([
    [0, 0],
    [3, 300],
    [-40, 17],
    [20_000, 20_422],
    [1, 25_000],
    [-9_000, 21_000]
  ])("days %i to %i: each day once, in at most 60 keys and one per 256 days", (from, to) => {
    const keys = dayKeys("c1", "workers", from, to)
    expect(keys.flatMap(daysOf)).toEqual(Array.from({ length: to - from + 1 }, (_, i) => from + i))
    expect(keys.length).toBeLessThanOrEqual(60 + Math.floor((to - from + 1) / 256))
  })
  it.each([
    [100, 100, 1, [[100, 100]]],
    [
      0,
      100,
      1,
      [
        [100, 100],
        [96, 99],
        [80, 95],
        [16, 79],
        [0, 15]
      ]
    ],
    [
      0,
      100,
      3,
      [
        [98, 100],
        [86, 97],
        [38, 85],
        [0, 37]
      ]
    ],
    [
      -3,
      1,
      0,
      [
        [1, 1],
        [-3, 0]
      ]
    ]
  ])("ranges of days %i to %i, the first %i long, newest first", (oldest, newest, first, ranges) =>
    expect(dayRanges(oldest, newest, first)).toEqual(ranges)
  )
  it("ranges of 59 years after a walk of one day: eight, newest first, each day once", () => {
    const ranges = dayRanges(0, 21_844, 1)
    expect(ranges).toHaveLength(8)
    expect(ranges.flatMap(([from, to]) => Array.from({ length: to - from + 1 }, (_, i) => to - i))).toEqual(
      Array.from({ length: 21_845 }, (_, i) => 21_844 - i)
    )
  })
})

describe("cursors", () => {
  const key = cursorKey(Buffer.alloc(32, 7))
  const binding: CursorBinding = {
    companyId: "c1",
    resource: "incidents",
    filters: { createdAfter: "2026-01-01T00:00:00.000000Z" }
  }
  const position = { createdAt: "2026-03-04 05:06:07.089123+00", id: "1f2e3d4c-5b6a-4978-8877-665544332211" }
  const cursor = encodeCursor(key, binding, position)

  it("round-trips, opaque and URL-safe", () => {
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
    expect(decodeCursor(key, binding, cursor)).toEqual({ position })
  })
  it("binding ignores undefined filters and key order", () => {
    const same: CursorBinding = {
      companyId: "c1",
      resource: "incidents",
      filters: { name: undefined, createdAfter: "2026-01-01T00:00:00.000000Z" }
    }
    expect(decodeCursor(key, same, cursor)).toEqual({ position })
  })
  it("refuses every single-character change", () => {
    for (let i = 0; i < cursor.length; i++) {
      const c = cursor[i] === "A" ? "B" : "A"
      const changed = cursor.slice(0, i) + c + cursor.slice(i + 1)
      const result = decodeCursor(key, binding, changed)
      expect("error" in result, `position ${i}`).toBe(true)
    }
  })
  it.each([
    ["other resource", { ...binding, resource: "workers" }],
    ["other company", { ...binding, companyId: "c2" }],
    ["other filters", { ...binding, filters: {} }],
    ["added filter", { ...binding, filters: { ...binding.filters, name: "ana" } }]
  ])("%s: other-list", (_, other) =>
    expect(decodeCursor(key, other as CursorBinding, cursor)).toEqual({ error: "other-list" })
  )
  it("another server's key: tampered", () => {
    expect(decodeCursor(cursorKey(Buffer.alloc(32, 8)), binding, cursor)).toEqual({ error: "tampered" })
  })
  it.each(["", "abc", "a.b.c", "....", "x".repeat(600), "AAAA.BBBB", "%%%.###"])("garbage %j", (garbage) => {
    expect("error" in decodeCursor(key, binding, garbage)).toBe(true)
  })
})

describe("listRequest", () => {
  const LIST_QUERY = { ...NAME_QUERY, ...STATUS_QUERY }
  // As the list endpoints decode their query.
  const decoded = Schema.decodeUnknownSync(Schema.Struct(LIST_QUERY), { onExcessProperty: "error", errors: "first" })
  it("parses once, in the schema: a number and canonical timestamps", () => {
    expect(decoded({ limit: "5", createdAfter: "2026-01-01", updatedBefore: "2026-01-01T02:00+02:00" })).toEqual({
      limit: 5,
      createdAfter: "2026-01-01T00:00:00.000000Z",
      updatedBefore: "2026-01-01T00:00:00.000000Z"
    })
  })
  it("defaults and canonical filters", () => {
    const r = listRequest("c1", "workers", decoded({ name: "Ana", createdAfter: "2026-01-01" }))
    expect(r).toEqual({
      limit: 50,
      createdAfter: "2026-01-01T00:00:00.000000Z",
      createdBefore: undefined,
      updatedAfter: undefined,
      updatedBefore: undefined,
      byChange: false,
      name: "Ana",
      statuses: undefined,
      binding: {
        companyId: "c1",
        resource: "workers",
        filters: {
          createdAfter: "2026-01-01T00:00:00.000000Z",
          createdBefore: undefined,
          name: "ana",
          status: undefined
        }
      }
    })
    expect(listRequest("c1", "corrective-actions", decoded({ status: "open", sort: "updatedAt" }))).toMatchObject({
      statuses: statusesFor("open"),
      byChange: true
    })
  })
})

describe("Hangup", () => {
  type Step = "on" | "off" | "abort"
  it.each([
    [["on", "abort"], 1],
    [["on", "abort", "abort"], 1],
    [["abort", "on"], 1],
    [["on", "off", "abort"], 0],
    [["abort", "on", "abort"], 1],
    [["on"], 0]
  ] as ReadonlyArray<readonly [ReadonlyArray<Step>, number]>)("%j calls the listener %i time(s)", (steps, calls) => {
    const h = new Hangup()
    let n = 0
    for (const step of steps) {
      if (step === "on") h.on(() => n++)
      else if (step === "off") h.off()
      else h.abort()
    }
    expect(n).toBe(calls)
    expect(h.aborted).toBe(steps.includes("abort"))
  })
})

describe("stream requests sharing one read", () => {
  /** A core whose reads stay in flight until told; it counts them. */
  const counting = () => {
    const pending: Array<(r: StreamRead) => void> = []
    const core = {
      read: () => new Promise<StreamRead>((resolve) => pending.push(resolve))
    } as unknown as StreamCore
    return { core, pending }
  }
  const key = { keyId: "k1", host: undefined, companyId: "c1" }
  const ask = { resources: undefined, spec: "all", after: "o1", limit: 100 }
  const done: StreamRead = { _tag: "Refused", state: "unknown" }

  it.each([
    ["the same ticket, key and offset: one read", [7, 7], [key, key], [ask, ask], 1],
    ["a notification between them (another ticket): two reads", [7, 8], [key, key], [ask, ask], 2],
    ["another key: two reads", [7, 7], [key, { ...key, keyId: "k2" }], [ask, ask], 2],
    ["another offset: two reads", [7, 7], [key, key], [ask, { ...ask, after: "o2" }], 2]
  ] as const)("%s", async (_, tickets, keys, asks, reads) => {
    const { core, pending } = counting()
    const shared = sharedReads(core)
    const answers = [shared(keys[0], asks[0], tickets[0]), shared(keys[1], asks[1], tickets[1])]
    expect(pending).toHaveLength(reads)
    for (const resolve of pending) resolve(done)
    expect(await Promise.all(answers)).toEqual([done, done])
  })

  it("a read that has answered is not kept: the next request reads again", async () => {
    const { core, pending } = counting()
    const shared = sharedReads(core)
    const first = shared(key, ask, 7)
    pending[0]!(done)
    await first
    void shared(key, ask, 7)
    expect(pending).toHaveLength(2)
  })
})

describe("a follower's next read from where its last answer ended", () => {
  /** A core whose reads answer at once with `answer`, counted; the wake's ticket is `ticket.now`. */
  const core = (answer: StreamRead) => {
    const ticket = { now: 7 }
    let reads = 0
    const c = {
      read: async () => {
        reads++
        return answer
      },
      wake: { ticket: () => ticket.now }
    } as unknown as StreamCore
    return { c, ticket, reads: () => reads }
  }
  const key = { keyId: "k1", host: undefined, companyId: "c1" }
  const ask = { resources: undefined, spec: "all", after: "o1", limit: 100 }
  const page = (more: boolean): StreamRead => ({
    _tag: "Page",
    items: '{"offset":"o2"}',
    count: 1,
    nextOffset: "o2",
    next: { lsn: 5n, ord: 0, resource: "incidents", id: "i1" },
    offsets: ["o2"],
    itemJson: ['{"offset":"o2"}'],
    reads: new Set(["incidents"]),
    head: 5n,
    more
  })
  const next = { ...ask, after: "o2" }

  it("answered from memory when the primary's read reached the end and no notification came since", async () => {
    const { c, reads } = core(page(false))
    let clock = 0
    const shared = sharedReads(c, () => clock)
    await shared(key, ask, 7, true)
    clock = 999
    const r = await shared(key, next, 7, false)
    expect(reads()).toBe(1)
    expect(r).toEqual({ ...page(false), items: "", count: 0, offsets: [], itemJson: [] })
  })

  it.each([
    ["a notification since: read", { ticket: 8 }],
    ["the answer had more to read: read", { more: true }],
    ["the first read could go to a standby: read", { primaryOnly: false }],
    ["a notification came in while it read: read", { landed: 8 }],
    ["a second or more later: read", { clock: 1000 }],
    ["another limit: read", { ask: { ...next, limit: 10 } }],
    ["another stream: read", { ask: { ...next, spec: "incidents" } }],
    ["another key: read", { key: { ...key, keyId: "k2" } }],
    ["from another offset: read", { ask: { ...next, after: "o1" } }]
  ] as const)(
    "%s",
    async (_, o: {
      ticket?: number
      more?: boolean
      primaryOnly?: boolean
      landed?: number
      clock?: number
      ask?: typeof next
      key?: typeof key
    }) => {
      const { c, ticket, reads } = core(page(o.more ?? false))
      let clock = 0
      const shared = sharedReads(c, () => clock)
      const first = shared(key, ask, 7, o.primaryOnly ?? true)
      if (o.landed !== undefined) ticket.now = o.landed
      await first
      clock = o.clock ?? 1
      await shared(o.key ?? key, o.ask ?? next, o.ticket ?? 7, false)
      expect(reads()).toBe(2)
    }
  )
})
