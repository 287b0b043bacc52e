// Rotation with overlap (docs/events.md#secret-rotation): after a rotation the old signing secret keeps signing,
// beside the new one, for an overlap the admin chooses, so the receiver switches secrets when
// it likes. A pure rule with its table test (test/webhooks/endpoints/overlap.test.ts).

/** The overlap when none is given: a day, as Svix and Outpost give. */
export const DEFAULT_OVERLAP = "24h"

/** The longest overlap: 7 days, Stripe's limit. An old secret should not sign for long. */
export const MAX_OVERLAP_SECONDS = 7 * 24 * 3600

const UNIT_SECONDS = { d: 86_400, h: 3_600, m: 60, s: 1 } as const

// One or more <whole number><unit> parts, largest unit first, each unit at most once ("1h30m").
const DURATION = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/

const FORMS = "a duration such as 24h, 90m, 7d, 3600s or 1h30m, or 0 for none"

export type ParsedOverlap =
  | { readonly ok: true; readonly seconds: number }
  | { readonly ok: false; readonly error: string }

/** "24h" → 86400 seconds; "0" → 0 (the old secret stops signing at once). At most 7 days. */
export const parseOverlap = (input: string): ParsedOverlap => {
  const text = input.trim().toLowerCase()
  const shown = JSON.stringify(input.length > 40 ? `${input.slice(0, 40)}…` : input)
  if (text === "0") return { ok: true, seconds: 0 }
  const m = text === "" ? null : DURATION.exec(text)
  if (m === null) return { ok: false, error: `overlap must be ${FORMS} (at most 7d); got ${shown}` }
  const [, d, h, mi, s] = m
  let seconds = 0
  for (const [digits, unit] of [
    [d, "d"],
    [h, "h"],
    [mi, "m"],
    [s, "s"]
  ] as const) {
    // More digits than any overlap up to 7 days needs (and than a safe integer holds) is over the cap.
    if (digits !== undefined) seconds += digits.length > 9 ? Infinity : Number(digits) * UNIT_SECONDS[unit]
  }
  if (seconds > MAX_OVERLAP_SECONDS) {
    return {
      ok: false,
      error: `overlap may be at most 7d (168h): the old secret signs for a week at the most; got ${shown}`
    }
  }
  return { ok: true, seconds }
}
