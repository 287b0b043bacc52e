// Table tests of the read API's pure helpers: filter dates, limits, cursors, query
// messages, Host parsing, Allow lists, lease sizes and the key rules.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { hostOf, rateLimitHeaders } from "../../../src/faces/api/auth.ts"
import { cursorKey, decodeCursor, encodeCursor, type CursorBinding } from "../../../src/read/cursor.ts"
import { parseFilterDate } from "../../../src/domain/dates.ts"
import { routeTable } from "../../../src/faces/http/routes.ts"
import { refusalFor, type KeyEntry } from "../../../src/access/keys/directory.ts"
import {
  BASE_QUERY,
  describeQueryIssue,
  namePattern,
  NAME_QUERY,
  parseLimit,
  STATUS_QUERY,
  statusesFor
} from "../../../src/faces/api/query.ts"
import { leaseSize } from "../../../src/access/keys/rate-limit.ts"
import { listRequest } from "../../../src/read/views.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"

describe("parseFilterDate", () => {
  const cases: ReadonlyArray<readonly [string, string | undefined]> = [
    ["2026-03-04", "2026-03-04T00:00:00.000000Z"],
    ["2026-03-04T05:06", "2026-03-04T05:06:00.000000Z"],
    ["2026-03-04T05:06:07", "2026-03-04T05:06:07.000000Z"],
    ["2026-03-04T05:06:07Z", "2026-03-04T05:06:07.000000Z"],
    ["2026-03-04t05:06:07z", "2026-03-04T05:06:07.000000Z"],
    ["2026-03-04T05:06:07.1Z", "2026-03-04T05:06:07.100000Z"],
    ["2026-03-04T05:06:07.123456Z", "2026-03-04T05:06:07.123456Z"],
    ["2026-03-04T05:06:07.123456789Z", "2026-03-04T05:06:07.123456Z"],
    ["2026-03-04T05:06:07+02:00", "2026-03-04T03:06:07.000000Z"],
    ["2026-03-04T05:06:07+0200", "2026-03-04T03:06:07.000000Z"],
    ["2026-03-04T01:06:07-05:30", "2026-03-04T06:36:07.000000Z"],
    ["2026-03-04T00:30:00+01:00", "2026-03-03T23:30:00.000000Z"],
    ["2024-02-29", "2024-02-29T00:00:00.000000Z"],
    ["0001-01-01", "0001-01-01T00:00:00.000000Z"],
    ["2025-02-29", undefined],
    ["2026-02-30", undefined],
    ["2026-13-01", undefined],
    ["2026-00-10", undefined],
    ["2026-03-04T24:00:00Z", undefined],
    ["2026-03-04T23:60:00Z", undefined],
    ["2026-03-04T23:59:60Z", undefined],
    ["2026-03-04T05:06:07+15:00", undefined],
    ["2026-03-04 05:06:07", undefined],
    ["2026-3-4", undefined],
    ["20260304", undefined],
    ["yesterday", undefined],
    ["", undefined],
    ["2026-03-04T05", undefined],
    ["2026-03-04T05:06:07.Z", undefined],
    ["0000-12-31", undefined],
    ["9999-12-31T23:00:00-02:00", undefined]
  ]
  it.each(cases)("%s -> %s", (input, expected) => {
    expect(parseFilterDate(input)?.iso).toBe(expected)
  })
  it("gives epoch milliseconds in UTC", () => {
    expect(parseFilterDate("1970-01-01T01:00:00+01:00")?.epochMillis).toBe(0)
  })
})

describe("parseLimit", () => {
  const cases: ReadonlyArray<readonly [string, number | undefined]> = [
    ["1", 1],
    ["50", 50],
    ["200", 200],
    ["007", 7],
    ["0", undefined],
    ["201", undefined],
    ["-1", undefined],
    ["1.5", undefined],
    ["1e2", undefined],
    ["abc", undefined],
    ["", undefined],
    [" 5", undefined],
    ["99999", undefined],
    ["0x10", undefined]
  ]
  it.each(cases)("%j -> %s", (input, expected) => expect(parseLimit(input)).toBe(expected))
})

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

// Query parameters decoded as HttpApi decodes them (a repeated one arrives as an array).
const decode = (fields: Record<string, Schema.Top>, query: Record<string, string | Array<string>>) => {
  const schema = Schema.toCodecArrayFromSingle(Schema.Struct(fields as any))
  const result = Schema.decodeUnknownExit(schema as any, { onExcessProperty: "error", errors: "first" })(query)
  return result
}
const known = ["limit", "cursor", "createdAfter", "createdBefore"]
const message = (fields: Record<string, Schema.Top>, query: Record<string, string | Array<string>>, params = known) => {
  const exit = decode(fields, query) as any
  if (exit._tag === "Success") return "ok"
  const error = exit.cause.reasons[0].error
  return describeQueryIssue(error.issue, params)
}

describe("query decoding messages", () => {
  it.each([
    [{ limit: "5" }, "ok"],
    [{ limit: "0" }, 'query parameter "limit" must be an integer from 1 to 200'],
    [{ limit: "abc" }, 'query parameter "limit" must be an integer from 1 to 200'],
    [{ limit: ["1", "2"] }, 'query parameter "limit" must be given once'],
    [{ createdAfter: "2026-02-30" }, /^query parameter "createdAfter" must be a date/],
    [{ createdBefore: "soon" }, /^query parameter "createdBefore" must be a date/],
    [
      { createdAfter: "2026-11-19T00:00:00 02:00" },
      /^query parameter "createdAfter" must be a date.* \(a "\+" in a URL must be sent as %2B\)$/
    ],
    [{ createdAfter: "2026-11-19T00:00 0200" }, /\(a "\+" in a URL must be sent as %2B\)$/],
    [{ createdAfter: "2026-11-19 00:00" }, /^query parameter "createdAfter" must be a date.*none means UTC\)$/],
    [{ cursor: "" }, 'query parameter "cursor" must not be empty'],
    [
      { colour: "red" },
      /^unknown query parameter "colour"; this list takes limit, cursor, createdAfter, createdBefore$/
    ]
  ] as const)("%j", (query, expected) => {
    const m = message(BASE_QUERY, query as any)
    if (typeof expected === "string") expect(m).toBe(expected)
    else expect(m).toMatch(expected)
  })
  it("status and name", () => {
    expect(message(STATUS_QUERY, { status: "done" }, [...known, "status"])).toBe(
      'query parameter "status" must be one of open, closed, in_progress, completed, verified'
    )
    expect(message(NAME_QUERY, { name: " " }, [...known, "name"])).toBe('query parameter "name" must not be empty')
    expect(message(NAME_QUERY, { name: "x".repeat(201) }, [...known, "name"])).toBe(
      'query parameter "name" must be at most 200 characters'
    )
    expect(message(BASE_QUERY, { status: "open" })).toMatch(/^unknown query parameter "status"/)
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
  const decoded = (query: Record<string, string>) => {
    const exit = decode(LIST_QUERY, query) as any
    if (exit._tag !== "Success") throw new Error(`${JSON.stringify(query)} does not decode`)
    return exit.value
  }
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
  it.each([
    [{ limit: "0" }, "limit"],
    [{ createdAfter: "x" }, "createdAfter"],
    [{ createdBefore: "2026-02-30" }, "createdBefore"],
    [{ status: "done" }, "status"],
    [{ name: "  " }, "name"],
    [{ updatedAfter: "2026-13-01" }, "updatedAfter"],
    [{ updatedBefore: "yesterday" }, "updatedBefore"],
    [{ sort: "createdAt" }, "sort"]
  ])("%j names %s", (query, bad) =>
    expect(message(LIST_QUERY, query, Object.keys(LIST_QUERY))).toMatch(new RegExp(`^query parameter "${bad}" `))
  )
})

describe("hostOf", () => {
  it.each([
    [undefined, undefined],
    ["", undefined],
    ["acme.safety.example", "acme.safety.example"],
    ["ACME.Safety.Example:8443", "acme.safety.example"],
    ["acme.safety.example.", "acme.safety.example"],
    ["127.0.0.1:3000", "127.0.0.1"],
    ["[::1]:3000", "[::1]"],
    ["localhost", "localhost"]
  ])("%j -> %j", (header, host) => expect(hostOf(header)).toBe(host))
})

describe("allowedMethods", () => {
  const routes = routeTable([
    { method: "GET", path: "/api/v1/incidents" },
    { method: "GET", path: "/api/v1/incidents/:id" },
    { method: "POST", path: "/api/v1/hooks" },
    { method: "GET", path: "/api/v1/hooks" },
    { method: "DELETE", path: "/api/v1/hooks/:id" },
    { method: "GET", path: "/api/v1/hooks/:id" }
  ])
  it.each([
    ["/api/v1/incidents", ["GET", "HEAD"]],
    ["/api/v1/incidents/abc", ["GET", "HEAD"]],
    ["/api/v1/hooks", ["GET", "HEAD", "POST"]],
    ["/api/v1/hooks/x", ["GET", "HEAD", "DELETE"]],
    ["/api/v1/nothing", []],
    ["/api/v1/incidents/a/b", []],
    ["/API/v1/incidents", []],
    ["/api/v1/hooks/x?y=1", ["GET", "HEAD", "DELETE"]]
  ])("%s", (path, methods) => expect(routes.allowedMethods(path)).toEqual(methods))
})

describe("rate limit helpers", () => {
  it.each([
    [120, 15],
    [119, 14],
    [16, 2],
    [15, 1],
    [8, 1],
    [1, 1],
    [0, 1],
    [1_000_000_000, 1000]
  ])("lease for %i remaining: %i", (remaining, size) => expect(leaseSize(remaining)).toBe(size))
  it("IETF fields", () => {
    expect(rateLimitHeaders({ allowed: true, limit: 120, windowSeconds: 60, remaining: 7, reset: 42 })).toEqual({
      "ratelimit-policy": '"default";q=120;w=60',
      ratelimit: '"default";r=7;t=42'
    })
  })
})

describe("refusalFor", () => {
  const now = Date.parse("2026-06-01T00:00:00Z")
  const entry = (
    over: Partial<KeyEntry> = {},
    company: Partial<NonNullable<KeyEntry["company"]>> | null = {}
  ): KeyEntry => ({
    keyId: "k",
    keyName: "n",
    companyId: "c1",
    scopes: new Set(["incidents"]),
    webhooks: false,
    expiresAt: null,
    revoked: false,
    company:
      company === null
        ? null
        : { name: "Acme", tier: "company", apiEnabled: true, modules: new Set(RESOURCES), ...company },
    ...over
  })
  it.each([
    ["unknown", undefined, null, "incidents", 401, /unknown/],
    ["revoked", entry({ revoked: true }), null, "incidents", 401, /revoked/],
    ["expired", entry({ expiresAt: now - 1 }), null, "incidents", 401, /expired at 2026-05-31T23:59:59.999Z/],
    ["expires later", entry({ expiresAt: now + 1 }), null, "incidents", 0, null],
    ["other host", entry(), "c2", "incidents", 401, /another company/],
    ["own host", entry(), "c1", "incidents", 0, null],
    ["not mirrored", entry({}, null), null, "incidents", 403, /not available/],
    [
      "team tier",
      entry({}, { tier: "team" }),
      null,
      "incidents",
      403,
      /Company tier; this company is on the team tier/
    ],
    ["api off", entry({}, { apiEnabled: false }), null, "incidents", 403, /turned off/],
    ["scope", entry(), null, "workers", 403, /may not read workers/],
    [
      "module off",
      entry({}, { modules: new Set(["workers"]) }),
      null,
      "incidents",
      403,
      /incidents module is turned off/
    ],
    ["index needs no resource", entry({}, { modules: new Set() }), null, undefined, 0, null]
  ] as const)("%s", (_, e, host, resource, status, message) => {
    const refusal = refusalFor(e, host, resource, now)
    if (status === 0) expect(refusal).toBeUndefined()
    else {
      expect(refusal?.status).toBe(status)
      expect(refusal?.message).toMatch(message!)
    }
  })
})
