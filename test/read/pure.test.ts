// Table tests of the read model's pure helpers: status filters and name patterns, cursors, and
// the list request a decoded query makes.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { NAME_QUERY, STATUS_QUERY } from "../../src/faces/api/query.ts"
import { cursorKey, decodeCursor, encodeCursor, type CursorBinding } from "../../src/read/cursor.ts"
import { listRequest, namePattern, statusesFor } from "../../src/read/lists.ts"

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
