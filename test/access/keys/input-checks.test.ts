// Table tests of the admin operations' input checks.
import { describe, expect, it } from "vitest"
import { checkName, parseExpiry, parseScopes } from "../../../src/access/keys/store.ts"
import { looksLike, newSecret, fingerprintOf } from "../../../src/access/keys/bearer-secrets.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"

describe("parseScopes", () => {
  it.each([
    ["all", RESOURCES],
    [" all ", RESOURCES],
    ["incidents", ["incidents"]],
    ["workers,incidents", ["incidents", "workers"]],
    ["incidents, incidents ,workers,", ["incidents", "workers"]],
    [
      ["sds", "audits"],
      ["audits", "sds"]
    ]
  ] as const)("%j", (input, scopes) => expect(parseScopes(input)).toEqual({ scopes }))
  it.each([
    ["", /needs resources/],
    [",", /needs resources/],
    ["all,incidents", /all on its own/],
    ["incident", /unknown resource "incident"/],
    ["foo,bar,incidents", /unknown resources "foo", "bar"/],
    ["Incidents", /unknown resource "Incidents"/]
  ])("%j is refused", (input, message) => {
    const r = parseScopes(input)
    expect("error" in r && [r.error._tag, r.error.field]).toEqual(["Invalid", "scopes"])
    expect("error" in r && r.error.message).toMatch(message)
  })
})

describe("parseExpiry and checkName", () => {
  it.each([
    ["30d", "30d"],
    ["90d", "90d"],
    ["1y", "1y"],
    ["never", "never"],
    ["2d", undefined],
    ["", undefined],
    ["1Y", undefined]
  ])("expiry %j", (input, expected) => expect(parseExpiry(input)).toBe(expected))
  it.each([
    ["Power BI", undefined],
    ["", /empty/],
    ["   ", /empty/],
    ["x".repeat(100), undefined],
    ["x".repeat(101), /at most 100/]
  ])("name %j", (name, problem) => {
    const r = checkName(name)
    if (problem === undefined) expect(r).toBeUndefined()
    else expect([r?.field, r?.message]).toEqual(["name", expect.stringMatching(problem)])
  })
})

describe("secrets", () => {
  it("mk_ keys and mat_ tokens: 256 random bits, a prefix to recognise them, only the fingerprint kept", () => {
    const a = newSecret("mk_")
    const b = newSecret("mk_")
    expect(a.secret).toMatch(/^mk_[A-Za-z0-9_-]{43}$/)
    expect(a.secret).not.toBe(b.secret)
    expect(a.prefix).toBe(a.secret.slice(0, 9))
    expect(a.fingerprint.equals(fingerprintOf(a.secret))).toBe(true)
    expect(a.fingerprint).toHaveLength(32)
    expect(looksLike("mk_", a.secret)).toBe(true)
    expect(looksLike("mat_", a.secret)).toBe(false)
    expect(looksLike("mat_", newSecret("mat_").secret)).toBe(true)
    expect(looksLike("mk_", "mk_short")).toBe(false)
  })
})
