// Filter dates (docs/api.md#dates): a date (midnight UTC) or a date-time with an offset,
// Z, or nothing (UTC). Pure: the result is a canonical UTC timestamp with microseconds,
// exactly what PostgreSQL compares, so filters and cursors never lose precision.

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?)?$/

export interface FilterDate {
  /** Milliseconds since the epoch (UTC). */
  readonly epochMillis: number
  /** "YYYY-MM-DDThh:mm:ss.ffffffZ": canonical, in UTC, with microseconds. */
  readonly iso: string
}

const daysIn = (year: number, month: number) => new Date(Date.UTC(year, month, 0)).getUTCDate()

/** Parses a filter date, or returns undefined when it is not one. */
export const parseFilterDate = (text: string): FilterDate | undefined => {
  const m = DATE_TIME.exec(text)
  if (m === null) return undefined
  const [, ys, mos, ds, hs, mis, ss, fraction, , sign, ohs, omis] = m
  const year = Number(ys)
  const month = Number(mos)
  const day = Number(ds)
  const hour = Number(hs ?? "0")
  const minute = Number(mis ?? "0")
  const second = Number(ss ?? "0")
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return undefined
  if (hour > 23 || minute > 59 || second > 59) return undefined
  let offsetMinutes = 0
  if (sign !== undefined) {
    const oh = Number(ohs)
    const om = Number(omis)
    if (oh > 14 || om > 59 || (oh === 14 && om > 0)) return undefined
    offsetMinutes = (sign === "-" ? -1 : 1) * (oh * 60 + om)
  }
  // Beyond microseconds (PostgreSQL's precision) digits are dropped.
  const micros = (fraction ?? "").padEnd(6, "0").slice(0, 6)
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  date.setUTCHours(hour, minute, second, Number(micros.slice(0, 3)))
  const epochMillis = date.getTime() - offsetMinutes * 60_000
  if (!Number.isFinite(epochMillis)) return undefined
  const utc = new Date(epochMillis).toISOString()
  // Years 1 to 9999 only, so the text stays YYYY-MM-DDThh:mm:ss.mmmZ (and PostgreSQL has no year 0).
  if (utc.length !== 24 || utc.startsWith("0000")) return undefined
  return { epochMillis, iso: `${utc.slice(0, 23)}${micros.slice(3)}Z` }
}

export const FILTER_DATE_FORMATS =
  "a date (YYYY-MM-DD, meaning midnight UTC) or a date-time (YYYY-MM-DDThh:mm[:ss[.fff]] with Z or an offset such as +02:00; none means UTC)"

// A date-time whose offset sign is a space: a "+" sent in a URL without encoding.
const PLUS_AS_SPACE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)? \d{2}:?\d{2}$/

/** Why a query's filter date is refused: the formats, and a hint when a "+" became a space. */
export const filterDateRefusal = (text: string): string =>
  `must be ${FILTER_DATE_FORMATS}${PLUS_AS_SPACE.test(text) ? ' (a "+" in a URL must be sent as %2B)' : ""}`
