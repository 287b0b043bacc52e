// The bounded LRU: both bounds hold after every step (entries and bytes), the least recently
// used goes first (a get makes an entry recent, a peek does not), entries expire after their
// time to live, and an entry larger than the byte bound is not kept.
import { describe, expect, it } from "vitest"
import { Lru, stringBytes } from "../../src/platform/lru.ts"

/**
 * Steps as words: `a=4` sets key a to 4, which is also its size; `get:a`, `peek:a` and
 * `delete:a` do that to key a; `@500` moves the clock to 500 ms.
 */
const run = (options: { maxEntries: number; maxBytes: number; ttlMs?: number }, steps: string) => {
  const lru = new Lru<string, number>({ ...options, sizeOf: (_k, size) => size })
  let now = 0
  const seen: Array<number | undefined | boolean> = []
  for (const word of steps.split(" ")) {
    const [op, key] = word.split(/[=:]/) as [string, string]
    if (word.startsWith("@")) now = Number(word.slice(1))
    else if (word.includes("=")) seen.push(lru.set(op, Number(key), now))
    else if (op === "get") seen.push(lru.get(key, now))
    else if (op === "peek") seen.push(lru.peek(key, now))
    else if (op === "delete") lru.delete(key)
    else throw new Error(`not a step: ${word}`)
    const s = lru.stats()
    expect(s.entries).toBeLessThanOrEqual(options.maxEntries)
    expect(s.bytes).toBeLessThanOrEqual(options.maxBytes)
  }
  return { keys: lru.keys(), stats: lru.stats(), seen }
}

describe("Lru", () => {
  it.each<[string, { maxEntries: number; maxBytes: number; ttlMs?: number }, string, Array<string>]>([
    ["keeps what fits", { maxEntries: 3, maxBytes: 100 }, "a=1 b=1 c=1", ["a", "b", "c"]],
    ["the entry bound pushes out the least recently set", { maxEntries: 2, maxBytes: 100 }, "a=1 b=1 c=1", ["b", "c"]],
    ["a get makes an entry the most recent", { maxEntries: 2, maxBytes: 100 }, "a=1 b=1 get:a c=1", ["a", "c"]],
    ["a peek does not", { maxEntries: 2, maxBytes: 100 }, "a=1 b=1 peek:a c=1", ["b", "c"]],
    [
      "setting a key again makes it recent and replaces its size",
      { maxEntries: 3, maxBytes: 10 },
      "a=4 b=4 a=2 c=4",
      ["b", "a", "c"]
    ],
    ["the byte bound pushes out as many as it takes", { maxEntries: 10, maxBytes: 10 }, "a=3 b=3 c=3 d=7", ["c", "d"]],
    [
      "an entry larger than the byte bound is not kept, and pushes nothing out",
      { maxEntries: 10, maxBytes: 10 },
      "a=3 big=11",
      ["a"]
    ],
    ["an entry exactly the byte bound is kept alone", { maxEntries: 10, maxBytes: 10 }, "a=3 b=10", ["b"]],
    ["delete frees its place", { maxEntries: 2, maxBytes: 100 }, "a=1 b=1 delete:a c=1", ["b", "c"]],
    [
      "an expired entry is removed when met",
      { maxEntries: 10, maxBytes: 100, ttlMs: 1000 },
      "a=1 @500 b=1 @1000 get:a get:b",
      ["b"]
    ]
  ])("%s", (_name, options, steps, keys) => expect(run(options, steps).keys).toEqual(keys))

  it.each<[string, string, Array<number | undefined | boolean>]>([
    ["a value is what was set", "a=5 get:a peek:a", [true, 5, 5]],
    ["absent", "get:a peek:a", [undefined, undefined]],
    ["good until its time to live", "a=5 @999 get:a", [true, 5]],
    ["gone at its time to live", "a=5 @1000 peek:a get:a", [true, undefined, undefined]],
    ["setting again starts its time anew", "a=5 @900 a=6 @1500 get:a", [true, true, 6]],
    ["too large: refused", "a=101 get:a", [false, undefined]]
  ])("%s", (_name, steps, seen) =>
    expect(run({ maxEntries: 10, maxBytes: 100, ttlMs: 1000 }, steps).seen).toEqual(seen)
  )

  it("counts bytes and evictions", () => {
    const { stats } = run({ maxEntries: 2, maxBytes: 100 }, "a=10 b=20 c=30 c=5 delete:b")
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
