// Table tests of the read API's pure helpers: filter dates, limits, query messages, Host
// parsing, Allow lists, the rate-limit fields. The read model's (cursors, list requests) are in
// test/read/pure.test.ts, the keys' rules in test/access/keys/rules.test.ts.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { hostOf, isHostHeader, rateLimitHeaders } from "../../../src/faces/api/auth.ts"
import { parseFilterDate } from "../../../src/domain/dates.ts"
import { routeTable } from "../../../src/faces/http/routes.ts"
import { BASE_QUERY, describeQueryIssue, NAME_QUERY, parseLimit, STATUS_QUERY } from "../../../src/faces/api/query.ts"

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

describe("each list parameter's message names it", () => {
  const LIST_QUERY = { ...NAME_QUERY, ...STATUS_QUERY }
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

describe("isHostHeader", () => {
  const label = (c: string, n = 63) => c.repeat(n)
  const longest = `${label("a")}.${label("b")}.${label("c")}.${label("d", 61)}` // 253 characters
  it.each<[string | undefined, boolean]>([
    [undefined, true],
    ["", true],
    ["acme.safety.example", true],
    ["ACME.Safety.Example:8443", true],
    ["acme.safety.example.", true],
    ["localhost", true],
    ["service_a:3000", true],
    ["127.0.0.1:3000", true],
    ["[::1]", true],
    ["[::1]:3000", true],
    ["[2001:db8::1]:65535", true],
    [longest, true],
    [`${longest}.`, true],
    [`${longest}.:443`, true],
    [`${longest}x`, false],
    [`${label("a", 64)}.example`, false],
    ["acme..example", false],
    [".acme.example", false],
    ["acme example", false],
    ["acme.example:", false],
    ["acme.example:99999", false],
    ["acme.example:123456", false],
    ["acme.example:80:80", false],
    ["[::1", false],
    ["[zz::1]:80", false],
    ["[::1]80", false],
    ["exa$mple.com", false],
    ["user@acme.example", false],
    ["acme.example/path", false],
    ["ácme.example", false],
    ["x".repeat(10_000), false]
  ])("%j: %s", (header, ok) => expect(isHostHeader(header)).toBe(ok))
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

describe("rate limit fields", () => {
  it("IETF fields", () => {
    expect(rateLimitHeaders({ allowed: true, limit: 120, windowSeconds: 60, remaining: 7, reset: 42 })).toEqual({
      "ratelimit-policy": '"default";q=120;w=60',
      ratelimit: '"default";r=7;t=42'
    })
  })
})
