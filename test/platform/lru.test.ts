// The bounded LRU: both bounds hold after every step (entries and bytes), the least recently
// used goes first (a get makes an entry recent, a peek does not), entries expire after their
// time to live, and an entry larger than the byte bound is not kept.
import { describe, expect, it } from "vitest"
import { Lru, stringBytes } from "../../src/platform/lru.ts"

type Step =
  | readonly ["set", string, number] // key, size (the value is the size)
  | readonly ["get", string]
  | readonly ["peek", string]
  | readonly ["delete", string]
  | readonly ["at", number] // the clock moves to this time

const run = (options: { maxEntries: number; maxBytes: number; ttlMs?: number }, steps: ReadonlyArray<Step>) => {
  const lru = new Lru<string, number>({ ...options, sizeOf: (_k, size) => size })
  let now = 0
  const seen: Array<number | undefined | boolean> = []
  for (const step of steps) {
    if (step[0] === "set") seen.push(lru.set(step[1], step[2], now))
    else if (step[0] === "get") seen.push(lru.get(step[1], now))
    else if (step[0] === "peek") seen.push(lru.peek(step[1], now))
    else if (step[0] === "delete") lru.delete(step[1])
    else now = step[1]
    const s = lru.stats()
    expect(s.entries).toBeLessThanOrEqual(options.maxEntries)
    expect(s.bytes).toBeLessThanOrEqual(options.maxBytes)
  }
  return { keys: lru.keys(), stats: lru.stats(), seen }
}

describe("Lru", () => {
  it.each<[string, { maxEntries: number; maxBytes: number; ttlMs?: number }, ReadonlyArray<Step>, Array<string>]>([
    [
      "keeps what fits",
      { maxEntries: 3, maxBytes: 100 },
      [
        ["set", "a", 1],
        ["set", "b", 1],
        ["set", "c", 1]
      ],
      ["a", "b", "c"]
    ],
    [
      "the entry bound pushes out the least recently set",
      { maxEntries: 2, maxBytes: 100 },
      [
        ["set", "a", 1],
        ["set", "b", 1],
        ["set", "c", 1]
      ],
      ["b", "c"]
    ],
    [
      "a get makes an entry the most recent",
      { maxEntries: 2, maxBytes: 100 },
      [
        ["set", "a", 1],
        ["set", "b", 1],
        ["get", "a"],
        ["set", "c", 1]
      ],
      ["a", "c"]
    ],
    [
      "a peek does not",
      { maxEntries: 2, maxBytes: 100 },
      [
        ["set", "a", 1],
        ["set", "b", 1],
        ["peek", "a"],
        ["set", "c", 1]
      ],
      ["b", "c"]
    ],
    [
      "setting a key again makes it recent and replaces its size",
      { maxEntries: 3, maxBytes: 10 },
      [
        ["set", "a", 4],
        ["set", "b", 4],
        ["set", "a", 2],
        ["set", "c", 4]
      ],
      ["b", "a", "c"]
    ],
    [
      "the byte bound pushes out as many as it takes",
      { maxEntries: 10, maxBytes: 10 },
      [
        ["set", "a", 3],
        ["set", "b", 3],
        ["set", "c", 3],
        ["set", "d", 7]
      ],
      ["c", "d"]
    ],
    [
      "an entry larger than the byte bound is not kept, and pushes nothing out",
      { maxEntries: 10, maxBytes: 10 },
      [
        ["set", "a", 3],
        ["set", "big", 11]
      ],
      ["a"]
    ],
    [
      "an entry exactly the byte bound is kept alone",
      { maxEntries: 10, maxBytes: 10 },
      [
        ["set", "a", 3],
        ["set", "b", 10]
      ],
      ["b"]
    ],
    [
      "delete frees its place",
      { maxEntries: 2, maxBytes: 100 },
      [
        ["set", "a", 1],
        ["set", "b", 1],
        ["delete", "a"],
        ["set", "c", 1]
      ],
      ["b", "c"]
    ],
    [
      "an expired entry is removed when met",
      { maxEntries: 10, maxBytes: 100, ttlMs: 1000 },
      [
        ["set", "a", 1],
        ["at", 500],
        ["set", "b", 1],
        ["at", 1000],
        ["get", "a"],
        ["get", "b"]
      ],
      ["b"]
    ]
  ])("%s", (_name, options, steps, keys) => expect(run(options, steps).keys).toEqual(keys))

  it.each<[string, ReadonlyArray<Step>, Array<number | undefined | boolean>]>([
    [
      "a value is what was set",
      [
        ["set", "a", 5],
        ["get", "a"],
        ["peek", "a"]
      ],
      [true, 5, 5]
    ],
    [
      "absent",
      [
        ["get", "a"],
        ["peek", "a"]
      ],
      [undefined, undefined]
    ],
    [
      "good until its time to live",
      [
        ["set", "a", 5],
        ["at", 999],
        ["get", "a"]
      ],
      [true, 5]
    ],
    [
      "gone at its time to live",
      [
        ["set", "a", 5],
        ["at", 1000],
        ["peek", "a"],
        ["get", "a"]
      ],
      [true, undefined, undefined]
    ],
    [
      "setting again starts its time anew",
      [
        ["set", "a", 5],
        ["at", 900],
        ["set", "a", 6],
        ["at", 1500],
        ["get", "a"]
      ],
      [true, true, 6]
    ],
    [
      "too large: refused",
      [
        ["set", "a", 101],
        ["get", "a"]
      ],
      [false, undefined]
    ]
  ])("%s", (_name, steps, seen) =>
    expect(run({ maxEntries: 10, maxBytes: 100, ttlMs: 1000 }, steps).seen).toEqual(seen)
  )

  it("counts bytes and evictions", () => {
    const { stats } = run({ maxEntries: 2, maxBytes: 100 }, [
      ["set", "a", 10],
      ["set", "b", 20],
      ["set", "c", 30],
      ["set", "c", 5],
      ["delete", "b"]
    ])
    expect(stats).toEqual({ entries: 1, bytes: 5, maxEntries: 2, maxBytes: 100, evictions: 1 })
  })

  it("stays within its bounds under a stream of unique keys", () => {
    const lru = new Lru<string, string>({
      maxEntries: 1000,
      maxBytes: 50_000,
      sizeOf: (k, v) => stringBytes(k) + stringBytes(v)
    })
    for (let i = 0; i < 100_000; i++) lru.set(`host-${i}.example`, "x".repeat(i % 300), i)
    const s = lru.stats()
    expect(s.bytes).toBeLessThanOrEqual(50_000)
    expect(s.entries).toBeLessThanOrEqual(1000)
    expect(s.evictions).toBe(100_000 - s.entries)
    expect(lru.peek("host-99999.example", 0)).toBe("x".repeat(99_999 % 300))
  })

  it("refuses bounds that hold nothing", () => {
    expect(() => new Lru({ maxEntries: 0, maxBytes: 10, sizeOf: () => 1 })).toThrow(/at least one entry/)
    expect(() => new Lru({ maxEntries: 10, maxBytes: Number.NaN, sizeOf: () => 1 })).toThrow(/at least one entry/)
  })
})
