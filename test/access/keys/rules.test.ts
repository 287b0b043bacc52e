// Table tests of the keys' pure rules: what a key may do now and the one wording of each
// refusal (401 or 403), and the size of rate-limit leases.
import { describe, expect, it } from "vitest"
import { leaseSize } from "../../../src/access/keys/rate-limit.ts"
import { keyRefused, refusalFor, stateRefusal, type KeyEntry } from "../../../src/access/keys/rules.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { httpStatus } from "../../../src/faces/http/errors.ts"

describe("lease sizes", () => {
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
      const error = keyRefused(refusal!)
      expect(httpStatus(error)).toBe(status)
      expect(error.message).toMatch(message!)
    }
  })
})

describe("a statement's refusal, when nothing more is known", () => {
  it.each([
    ["unknown", 401, "unknown API key"],
    ["revoked", 401, "this API key was revoked"],
    ["expired", 401, "this API key expired"],
    ["host", 401, "this API key belongs to another company: use it at your company's own address"],
    ["company", 403, "the API is not available for this company"],
    ["module", 403, "this module is turned off for this company"]
  ] as const)("%s", (state, status, message) => {
    const error = keyRefused(stateRefusal(state))
    expect([httpStatus(error), error.message]).toEqual([status, message])
  })
})
