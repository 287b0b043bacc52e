// Timestamps as the API writes them: ISO 8601, UTC, exactly three fraction digits.
// Parsed by hand rather than with Date.parse, which rejects PostgreSQL's own text form
// ("2026-03-04 05:06:07.089123+02") and is lenient in engine-specific ways.

// Years of 4 to 6 digits and PostgreSQL's " BC" suffix: the app may store any timestamp
// PostgreSQL takes (4713 BC to 294276 AD), and one capture cannot shape would stop it.
const ISO_ISH =
  /^(\d{4,6})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?\s*(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?(\s+BC)?$/i
/** Date#toISOString's own form for years outside 0000-9999 ("+012026-...", "-000043-..."). */
const EXPANDED_ISO = /^[+-]\d{6}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** Seconds east of UTC for "Z", "+02", "+0530", "-05:30", "+05:53:28" (PostgreSQL LMT offsets). */
const offsetSeconds = (zone: string | undefined): number => {
  if (zone === undefined || zone.toUpperCase() === "Z") return 0
  const sign = zone.startsWith("-") ? -1 : 1
  const digits = zone.slice(1).replaceAll(":", "")
  const h = Number(digits.slice(0, 2))
  const m = Number(digits.slice(2, 4) || "0")
  const s = Number(digits.slice(4, 6) || "0")
  if (m > 59 || s > 59) throw new TypeError(`not a time zone offset: ${zone}`)
  return sign * (h * 3600 + m * 60 + s)
}

const parse = (text: string): Date => {
  const m = ISO_ISH.exec(text.trim())
  if (m === null) throw new TypeError(`not a timestamp: ${JSON.stringify(text)}`)
  const [, y, mo, d, h = "0", mi = "0", s = "0", fraction = "", zone, bc] = m
  // Truncate (not round) beyond milliseconds: rounding could move a value into the next second.
  const ms = Number(`${fraction}000`.slice(0, 3))
  // 1 BC is year 0 of ISO 8601 (astronomical numbering), 44 BC is -43.
  const year = bc === undefined ? Number(y) : 1 - Number(y)
  const date = new Date(0)
  date.setUTCFullYear(year, Number(mo) - 1, Number(d))
  date.setUTCHours(Number(h), Number(mi), Number(s), ms)
  // Date rolls over out-of-range parts (Feb 30 -> Mar 2); a real timestamp never needs that.
  const exact =
    date.getUTCFullYear() === year &&
    date.getUTCMonth() === Number(mo) - 1 &&
    date.getUTCDate() === Number(d) &&
    date.getUTCHours() === Number(h) &&
    date.getUTCMinutes() === Number(mi) &&
    date.getUTCSeconds() === Number(s)
  if (!exact) throw new TypeError(`not a timestamp: ${JSON.stringify(text)}`)
  return new Date(date.getTime() - offsetSeconds(zone) * 1000)
}

/**
 * `2026-03-04T05:06:07.089Z` from a Date or an ISO-ish string (T or space, any fraction,
 * offset Z / ±hh / ±hh:mm / ±hhmm, or none meaning UTC). Throws on anything else.
 */
const DIGIT = (s: string, i: number) => s.charCodeAt(i) - 48
const num = (s: string, i: number, n: number) => {
  let v = 0
  for (let k = i; k < i + n; k++) {
    const d = DIGIT(s, k)
    if (d < 0 || d > 9) return -1
    v = v * 10 + d
  }
  return v
}
const daysIn = (y: number, m: number) =>
  m === 2
    ? y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0)
      ? 29
      : 28
    : m === 4 || m === 6 || m === 9 || m === 11
      ? 30
      : 31

/**
 * Whether `s` is already the canonical form (what Date#toISOString gives, for years 0000 to
 * 9999) of a real instant. Mirror values always are: this check, by hand, keeps shaping from
 * parsing every timestamp of every record again.
 */
const isCanonical = (s: string): boolean => {
  if (
    s.length !== 24 ||
    s[4] !== "-" ||
    s[7] !== "-" ||
    s[10] !== "T" ||
    s[13] !== ":" ||
    s[16] !== ":" ||
    s[19] !== "." ||
    s[23] !== "Z"
  )
    return false
  const y = num(s, 0, 4)
  const mo = num(s, 5, 2)
  const d = num(s, 8, 2)
  const h = num(s, 11, 2)
  const mi = num(s, 14, 2)
  const se = num(s, 17, 2)
  const ms = num(s, 20, 3)
  return (
    y >= 0 &&
    mo >= 1 &&
    mo <= 12 &&
    d >= 1 &&
    d <= daysIn(y, mo) &&
    h >= 0 &&
    h < 24 &&
    mi >= 0 &&
    mi < 60 &&
    se >= 0 &&
    se < 60 &&
    ms >= 0
  )
}

export const toIsoUtc = (value: Date | string): string => {
  if (typeof value === "string" && (isCanonical(value) || EXPANDED_ISO.test(value))) return value
  const date = typeof value === "string" ? parse(value) : value
  if (!(date instanceof Date) || Number.isNaN(date.getTime())) {
    throw new TypeError(`not a timestamp: ${String(value)}`)
  }
  return date.toISOString()
}

/**
 * As toIsoUtc, but null/undefined give null, and so do PostgreSQL's "infinity" and
 * "-infinity", which have no ISO 8601 form (read as "no bound").
 */
export const toIsoUtcOrNull = (value: unknown): string | null => {
  if (value === null || value === undefined) return null
  // Mirror values are canonical already (the common case): no trim, no pattern.
  if (typeof value === "string" && isCanonical(value)) return value
  if (typeof value === "string" && /^[+-]?infinity$/i.test(value.trim())) return null
  if (typeof value === "number" && !Number.isFinite(value)) return null
  if (typeof value === "string" || value instanceof Date) return toIsoUtc(value)
  throw new TypeError(`not a timestamp: ${typeof value}`)
}

/** The short durations of the tools' flags (simulate --duration, bench:soak): a bare number is seconds. */
export const SHORT_DURATION_FORMS = "500ms, 30s, 5m or 1h (a bare number is seconds)"

/** "500ms", "30s", "5m", "1h" (decimals allowed) in milliseconds; undefined when it is none of these. */
export const parseShortDuration = (text: string): number | undefined => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim())
  return m ? Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] ?? "s"]! : undefined
}
