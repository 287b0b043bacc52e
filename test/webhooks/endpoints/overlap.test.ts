// The overlap of a secret rotation (docs/events.md#secret-rotation): what `--overlap`, the admin API's
// {"overlap": ...} and the page's field accept, and what they refuse.
import { describe, expect, it } from "vitest"
import { DEFAULT_OVERLAP, MAX_OVERLAP_SECONDS, parseOverlap } from "../../../src/webhooks/endpoints/overlap.ts"

describe("parseOverlap", () => {
  it.each([
    ["24h", 86_400],
    ["90m", 5_400],
    ["7d", 604_800],
    ["3600s", 3_600],
    ["0", 0],
    ["0s", 0],
    ["0h", 0],
    ["1s", 1],
    ["2s", 2],
    ["1h30m", 5_400],
    ["1d12h", 129_600],
    ["6d23h59m59s", 604_799],
    ["168h", 604_800],
    ["10080m", 604_800],
    ["604800s", 604_800],
    [" 24h ", 86_400],
    ["24H", 86_400],
    ["007h", 25_200]
  ])("%j is %d seconds", (text, seconds) => {
    expect(parseOverlap(text)).toEqual({ ok: true, seconds })
  })

  it.each([
    ["", /^overlap must be a duration such as 24h, 90m, 7d, 3600s or 1h30m, or 0 for none \(at most 7d\); got ""$/],
    ["   ", /must be a duration/],
    ["soon", /must be a duration.*got "soon"$/],
    ["3600", /must be a duration/], // a number needs its unit, except 0
    ["-1h", /must be a duration/],
    ["1.5h", /must be a duration/],
    ["24 h", /must be a duration/],
    ["h", /must be a duration/],
    ["1w", /must be a duration/],
    ["30m1h", /must be a duration/], // largest unit first
    ["1h1h", /must be a duration/],
    ["P1D", /must be a duration/],
    ["00", /must be a duration/],
    ["8d", /^overlap may be at most 7d \(168h\): the old secret signs for a week at the most; got "8d"$/],
    ["7d1s", /at most 7d/],
    ["604801s", /at most 7d/],
    ["169h", /at most 7d/],
    ["99999999999999999999d", /at most 7d/]
  ])("%j is refused", (text, message) => {
    const r = parseOverlap(text)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toMatch(message)
  })

  it("shows a long input cut short", () => {
    const r = parseOverlap("x".repeat(500))
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toMatch(/got "x{40}…"$/)
  })

  it("defaults to a day and caps at Stripe's 7 days", () => {
    expect(parseOverlap(DEFAULT_OVERLAP)).toEqual({ ok: true, seconds: 86_400 })
    expect(MAX_OVERLAP_SECONDS).toBe(604_800)
  })
})
