import { describe, expect, it } from "vitest"
import { eventId, uuidv7 } from "../../../src/pipeline/outbox/ids.ts"

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

describe("eventId: an event's id from its place in the WAL", () => {
  const ms = Date.UTC(2026, 10, 28, 23, 0, 0, 123)

  it("is a version 7, variant 10 UUID with the commit's millisecond, the same for the same place", () => {
    const id = eventId(ms, 0x1_2345_6789n, 7)
    expect(id).toMatch(UUID)
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(ms)
    expect(eventId(ms, 0x1_2345_6789n, 7)).toBe(id)
  })

  it("holds the LSN's low 42 bits and the seq: distinct places, distinct ids", () => {
    const hex = (id: string) => BigInt(`0x${id.replaceAll("-", "")}`)
    const id = hex(eventId(ms, 0x3ff_ffff_ffffn, 0x7fff_ffff))
    const randA = (id >> 64n) & 0xfffn
    const randB = id & ((1n << 62n) - 1n)
    expect((randA << 62n) | randB).toBe((0x3ff_ffff_ffffn << 32n) | 0x7fff_ffffn)
    const ids = new Set<string>()
    for (const lsn of [0n, 1n, 0x16_0000_0028n, 0x3ff_ffff_ffffn])
      for (const seq of [0, 1, 2, 65_536, 2 ** 31 - 1]) ids.add(eventId(ms, lsn, seq))
    expect(ids.size).toBe(20)
  })

  it("grows in WAL order within a millisecond, and with time across them", () => {
    const places: Array<[number, bigint, number]> = [
      [ms, 0x10n, 0],
      [ms, 0x10n, 1],
      [ms, 0x10n, 300],
      [ms, 0x11n, 0],
      [ms, 0x2_0000_0000n, 5],
      [ms + 1, 0x0fn, 0]
    ]
    const ids = places.map(([t, l, s]) => eventId(t, l, s))
    expect([...ids].sort()).toEqual(ids)
  })
})
