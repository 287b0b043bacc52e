// The one normal form of app row values (pure).
import { describe, expect, it } from "vitest"
import { normalizeRow, normalizeValue } from "../../../src/pipeline/capture/normalize.ts"

describe("normalizeValue", () => {
  it("dates become canonical ISO text; invalid dates become null", () => {
    expect(normalizeValue(new Date(Date.UTC(2026, 2, 4, 5, 6, 7, 89)))).toBe("2026-03-04T05:06:07.089Z")
    expect(normalizeValue(new Date("nope"))).toBeNull()
  })

  it("numeric text of numeric types becomes a number, other text stays text", () => {
    expect(normalizeValue("12.50", 1700)).toBe(12.5)
    expect(normalizeValue("42", 23)).toBe(42)
    expect(normalizeValue("42", 25)).toBe("42") // text column
    expect(normalizeValue("NaN", 1700)).toBe("NaN")
    expect(normalizeValue(10n)).toBe(10)
  })

  it("infinite timestamps (pg-types reads 'infinity' as a number) are null, as the snapshot reads them", () => {
    expect(normalizeValue(Infinity, 1184)).toBeNull()
    expect(normalizeValue(-Infinity, 1082)).toBeNull()
  })

  it("null and undefined are null; bytea is dropped", () => {
    expect(normalizeValue(null)).toBeNull()
    expect(normalizeValue(undefined)).toBeNull()
    expect(normalizeValue(Buffer.from("x"))).toBeNull()
  })
})

describe("normalizeRow", () => {
  const types = new Map([
    ["id", 2950],
    ["score", 1700],
    ["description", 25],
    ["created_at", 1184]
  ])

  it("normalises every column by its type", () => {
    const row = normalizeRow({ id: "a", score: "3", description: "text", created_at: new Date(0) }, types)
    expect(row).toEqual({ id: "a", score: 3, description: "text", created_at: "1970-01-01T00:00:00.000Z" })
  })

  it("keeps an unchanged TOAST value (undefined) undefined, so the mirror keeps the stored value", () => {
    const tuple = Object.assign(Object.create(null) as Record<string, unknown>, {
      id: "a",
      score: null,
      description: undefined
    })
    const row = normalizeRow(tuple, types)
    expect("description" in row).toBe(true)
    expect(row.description).toBeUndefined()
    expect(row.score).toBeNull()
  })
})
