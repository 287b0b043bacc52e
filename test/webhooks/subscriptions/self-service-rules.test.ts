// The pure rules of a key's own deliveries and of Idempotency-Key (docs/api.md#your-deliveries):
// the excerpt of a receiver's answer, the recovery's `since`, the Idempotency-Key's form, and
// when two bodies are the same request.
import { describe, expect, it } from "vitest"
import { excerpt, RECOVER_WINDOW_DAYS, recoverSince } from "../../../src/webhooks/subscriptions/hook-deliveries.ts"
import { canonicalJson, idempotencyKeyRefusal, requestHash } from "../../../src/webhooks/subscriptions/idempotency.ts"

describe("excerpt", () => {
  it.each([
    ["nothing", null, 5, null],
    ["empty", "", 5, null],
    ["short", "ok", 5, "ok"],
    ["exactly the bound", "abcde", 5, "abcde"],
    ["cut at the bound", "abcdefgh", 5, "abcde"],
    // Whole code points: an emoji is never cut in half.
    ["code points", "ab😀cdef", 3, "ab😀"]
  ] as const)("%s", (_, text, max, expected) => {
    expect(excerpt(text, max)).toBe(expected)
  })

  it("defaults to 200 characters", () => {
    expect(excerpt("y".repeat(5_000))).toBe("y".repeat(200))
  })
})

describe("recoverSince", () => {
  const now = new Date("2026-03-31T12:00:00.000Z")
  it.each([
    ["a date-time", "2026-03-30T00:00:00Z", "2026-03-30T00:00:00.000Z"],
    ["a date (midnight UTC)", "2026-03-30", "2026-03-30T00:00:00.000Z"],
    ["an offset", "2026-03-30T02:00:00+02:00", "2026-03-30T00:00:00.000Z"],
    ["exactly 30 days back", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00.000Z"]
  ])("takes %s", (_, text, iso) => {
    const r = recoverSince(text, now)
    expect(r.ok && r.since.toISOString()).toBe(iso)
  })

  it.each([
    ["nothing", undefined, /^since is required/],
    ["a number", 5, /^since is required/],
    ["blank", "  ", /^since is required/],
    ["not a date", "yesterday", /^since must be a date/],
    ["a day that does not exist", "2026-02-30", /^since must be a date/],
    ["older than 30 days", "2026-03-01T11:59:59Z", new RegExp(`within the last ${RECOVER_WINDOW_DAYS} days`)],
    ["now", "2026-03-31T12:00:00Z", /^since must be in the past$/],
    ["the future", "2026-04-01", /^since must be in the past$/]
  ])("refuses %s", (_, value, message) => {
    const r = recoverSince(value, now)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.message).toMatch(message)
  })
})

describe("Idempotency-Key", () => {
  it.each([
    ["a UUID", "3f1d1e0e-7a2b-4c3d-8e4f-5a6b7c8d9e0f", true],
    ["one character", "x", true],
    ["255 characters", "k".repeat(255), true],
    ["visible punctuation", "order#42/retry:1", true],
    ["empty", "", false],
    ["256 characters", "k".repeat(256), false],
    ["a space", "two words", false],
    ["a control character", "a\tb", false],
    ["not ASCII", "clé", false]
  ])("%s", (_, value, ok) => {
    expect(idempotencyKeyRefusal(value) === null).toBe(ok)
  })

  it("two bodies are the same request when their fields are, in any order", () => {
    const a = { url: "https://x.example/h", event: "incident.created", rateLimit: 5 }
    const b = { rateLimit: 5, event: "incident.created", url: "https://x.example/h" }
    expect(canonicalJson(a)).toBe('{"event":"incident.created","rateLimit":5,"url":"https://x.example/h"}')
    expect(requestHash(a)).toBe(requestHash(b))
    expect(requestHash(a)).not.toBe(requestHash({ ...a, rateLimit: 6 }))
    expect(requestHash(a)).not.toBe(requestHash({ ...a, ordering: "record" }))
    // A field left out and one given as undefined are the same body; null is not.
    expect(requestHash({ ...a, ordering: undefined })).toBe(requestHash(a))
    expect(requestHash({ ...a, rateLimit: null })).not.toBe(requestHash({ ...a, rateLimit: undefined }))
    expect(canonicalJson({ z: [{ b: 1, a: 2 }], a: null })).toBe('{"a":null,"z":[{"a":2,"b":1}]}')
  })
})
