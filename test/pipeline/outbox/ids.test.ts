import { describe, expect, it } from "vitest"
import { uuidv7 } from "../../../src/pipeline/outbox/ids.ts"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

describe("uuidv7", () => {
  it("is a version 7, variant 10 UUID", () => {
    for (let i = 0; i < 1000; i++) expect(uuidv7()).toMatch(UUID)
  })

  it("carries its millisecond timestamp in the first 48 bits", () => {
    const ms = Date.UTC(2026, 10, 22, 4, 5, 6, 789)
    const id = uuidv7(ms)
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(ms)
  })

  it("sorts by time across milliseconds, so outbox inserts append to the index", () => {
    const ids = Array.from({ length: 200 }, (_, i) => uuidv7(1_700_000_000_000 + i))
    expect([...ids].sort()).toEqual(ids)
  })

  it("does not repeat, also across refills of its random pool", () => {
    const ids = new Set(Array.from({ length: 5000 }, () => uuidv7(1_700_000_000_000)))
    expect(ids.size).toBe(5000)
  })

  it("grows within a millisecond too (one batch's ids), so a batch's inserts append to the index", () => {
    const ids = Array.from({ length: 5000 }, () => uuidv7(1_800_000_000_000))
    expect(ids.every((id) => UUID.test(id))).toBe(true)
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(ids).size).toBe(5000)
    // and the random part does not run in plain steps of one
    const steps = new Set(
      ids.slice(1, 50).map((id, i) => BigInt(`0x${id.slice(24)}`) - BigInt(`0x${ids[i]!.slice(24)}`))
    )
    expect(steps.size).toBeGreaterThan(40)
  })
})
