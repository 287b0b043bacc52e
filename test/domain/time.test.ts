// Timestamp normalisation: every form capture might hand over becomes UTC with milliseconds.
import { describe, expect, it } from "vitest"
import { toIsoUtc, toIsoUtcOrNull, parseShortDuration } from "../../src/domain/time.ts"

describe("toIsoUtc", () => {
  it.each([
    ["2026-03-04T05:06:07.089Z", "2026-03-04T05:06:07.089Z"],
    ["2026-03-04T05:06:07Z", "2026-03-04T05:06:07.000Z"],
    ["2026-03-04T05:06:07.089123+00:00", "2026-03-04T05:06:07.089Z"],
    ["2026-03-04 05:06:07+02", "2026-03-04T03:06:07.000Z"],
    ["2026-03-04 05:06:07.5+00", "2026-03-04T05:06:07.500Z"],
    ["2026-03-04 05:06:07.12-05", "2026-03-04T10:06:07.120Z"],
    ["2026-03-04T05:06:07+05:30", "2026-03-03T23:36:07.000Z"],
    ["2026-03-04T05:06:07-0930", "2026-03-04T14:36:07.000Z"],
    ["2026-03-04 05:06:07+05:53:28", "2026-03-03T23:12:39.000Z"],
    // rolls over the day, month and year boundaries
    ["2026-01-01 01:00:00+03", "2025-12-31T22:00:00.000Z"],
    // no zone: read as UTC
    ["2026-03-04T05:06:07.089", "2026-03-04T05:06:07.089Z"],
    ["2026-03-04 05:06", "2026-03-04T05:06:00.000Z"],
    ["2026-03-04", "2026-03-04T00:00:00.000Z"],
    ["2024-02-29T12:00:00z", "2024-02-29T12:00:00.000Z"],
    ["  2026-03-04T05:06:07Z  ", "2026-03-04T05:06:07.000Z"]
  ])("%s -> %s", (input, expected) => {
    expect(toIsoUtc(input)).toBe(expected)
  })

  it("truncates beyond milliseconds rather than rounding into the next second", () => {
    expect(toIsoUtc("2026-03-04 23:59:59.999999+00")).toBe("2026-03-04T23:59:59.999Z")
  })

  it("takes a Date", () => {
    expect(toIsoUtc(new Date(Date.UTC(2026, 2, 4, 5, 6, 7, 89)))).toBe("2026-03-04T05:06:07.089Z")
  })

  it.each([
    "",
    "yesterday",
    "2026-3-4",
    "2026-02-30",
    "2025-02-29 00:00:00+00",
    "2026-03-04 24:00:00",
    "2026-03-04 12:60:00",
    "2026-03-04 12:00:60",
    "2026-13-01",
    "2026-03-04T05:06:07+05:99",
    "04/03/2026",
    // canonical-looking but impossible: the fast path for canonical values must not wave them through
    "2026-02-30T00:00:00.000Z",
    "2025-02-29T00:00:00.000Z",
    "2026-03-04T24:00:00.000Z",
    "2026-13-01T00:00:00.000Z"
  ])("refuses %j", (input) => {
    expect(() => toIsoUtc(input)).toThrow(TypeError)
  })

  it("takes every year PostgreSQL does: 5 and 6 digits, BC (ISO's astronomical years), expanded ISO", () => {
    expect(toIsoUtc("12026-03-04 05:06:07+00")).toBe("+012026-03-04T05:06:07.000Z")
    expect(toIsoUtc("12026-03-04T05:06:07+00:00")).toBe("+012026-03-04T05:06:07.000Z") // json_build_object's form
    expect(toIsoUtc("0044-03-15 00:00:00+00 BC")).toBe("-000043-03-15T00:00:00.000Z")
    expect(toIsoUtc("0001-01-01 00:00:00+00 BC")).toBe("0000-01-01T00:00:00.000Z")
    expect(toIsoUtc("+012026-03-04T05:06:07.000Z")).toBe("+012026-03-04T05:06:07.000Z")
    expect(toIsoUtc(new Date(Date.UTC(12026, 2, 4)))).toBe("+012026-03-04T00:00:00.000Z")
  })

  it("refuses an invalid Date", () => {
    expect(() => toIsoUtc(new Date("nope"))).toThrow(TypeError)
  })
})

describe("toIsoUtcOrNull", () => {
  it("null and undefined are null", () => {
    expect(toIsoUtcOrNull(null)).toBeNull()
    expect(toIsoUtcOrNull(undefined)).toBeNull()
  })

  it("PostgreSQL infinity has no ISO form: null", () => {
    expect(toIsoUtcOrNull("infinity")).toBeNull()
    expect(toIsoUtcOrNull("-infinity")).toBeNull()
  })

  it("normalises strings and Dates, refuses other types", () => {
    expect(toIsoUtcOrNull("2026-03-04 05:06:07+02")).toBe("2026-03-04T03:06:07.000Z")
    expect(toIsoUtcOrNull(new Date("2026-03-04T05:06:07.089Z"))).toBe("2026-03-04T05:06:07.089Z")
    expect(() => toIsoUtcOrNull(1772600767089)).toThrow(TypeError)
    expect(() => toIsoUtcOrNull({})).toThrow(TypeError)
  })
})

describe("toIsoUtc on values already canonical", () => {
  it("gives back every canonical instant unchanged, as Date#toISOString would", () => {
    // A spread of instants over four centuries, leap days and the last millisecond of a day.
    const samples = [
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
      Date.UTC(2000, 1, 29),
      Date.UTC(1900, 0, 1),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999)
    ]
    for (let t = Date.UTC(1970, 0, 1); t < Date.UTC(2370, 0, 1); t += 86_400_000 * 97 + 3_600_000 * 7 + 61_001)
      samples.push(t)
    for (const t of samples) {
      const iso = new Date(t).toISOString()
      expect(toIsoUtc(iso)).toBe(iso)
    }
  })

  it.each([
    "1900-02-29T00:00:00.000Z",
    "2023-02-29T00:00:00.000Z",
    "2026-04-31T00:00:00.000Z",
    "2026-00-10T00:00:00.000Z",
    "2026-01-10T12:00:00.00aZ"
  ])("still refuses %j", (input) => {
    expect(() => toIsoUtc(input)).toThrow(TypeError)
  })
})

describe("parseShortDuration (the tools' --duration, --sample)", () => {
  it.each([
    ["500ms", 500],
    ["30s", 30_000],
    ["5m", 300_000],
    ["1h", 3_600_000],
    ["1.5s", 1_500],
    ["45", 45_000],
    [" 10m ", 600_000]
  ] as const)("%s is %i ms", (text, ms) => {
    expect(parseShortDuration(text)).toBe(ms)
  })

  it.each(["", "5x", "1h30m", "-5s", "5 m", "ms", "1d"])("%j is none of the forms", (text) => {
    expect(parseShortDuration(text)).toBeUndefined()
  })
})
