// The batcher behind the read API's statements (src/read/batch.ts), without a database.
import { describe, expect, it } from "vitest"
import { makeBatcher } from "../../src/read/batch.ts"

describe("makeBatcher", () => {
  const recording = (fail: (items: ReadonlyArray<number>) => boolean = () => false) => {
    const batches: Array<ReadonlyArray<number>> = []
    const batcher = makeBatcher(async (items: ReadonlyArray<number>) => {
      batches.push(items)
      if (fail(items)) throw new Error(`batch ${items.join(",")} failed`)
      return items.map((n) => n * 10)
    }, 4)
    return { batches, load: batcher.load }
  }

  it("runs what is asked in one turn as one batch, and answers each by its place", async () => {
    const { batches, load } = recording()
    expect(await Promise.all([load(1), load(2), load(3)])).toEqual([10, 20, 30])
    expect(batches).toEqual([[1, 2, 3]])
  })

  it("a lone request is a batch of one, run at the end of its turn", async () => {
    const { batches, load } = recording()
    expect(await load(7)).toBe(70)
    expect(await load(8)).toBe(80)
    expect(batches).toEqual([[7], [8]])
  })

  it("never puts more than the maximum in one batch", async () => {
    const { batches, load } = recording()
    expect(await Promise.all([1, 2, 3, 4, 5, 6].map(load))).toEqual([10, 20, 30, 40, 50, 60])
    expect(batches).toEqual([
      [1, 2, 3, 4],
      [5, 6]
    ])
  })

  it("when a batch fails, each request is tried alone and fails only for its own reasons", async () => {
    const { batches, load } = recording((items) => items.includes(2))
    const results = await Promise.allSettled([load(1), load(2), load(3)])
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"])
    expect(results[0]).toMatchObject({ value: 10 })
    expect(results[1]).toMatchObject({ reason: new Error("batch 2 failed") })
    expect(batches).toEqual([[1, 2, 3], [1], [2], [3]])
  })
})
