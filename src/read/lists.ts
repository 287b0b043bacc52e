// What the read API's lists take, once their endpoints have decoded the query: page sizes,
// filters, and the list request a query makes. Pure (the statements are in views.ts,
// events.ts and deletions.ts), so the API's definition takes its figures from here.
import { STATUS_FILTER, type Resource } from "../domain/resources.ts"
import type { CursorBinding } from "./cursor.ts"

/** A page's size when the request gives none. */
export const DEFAULT_LIMIT = 50

/** The statuses a status filter value matches (open and closed are groups), or undefined. */
export const statusesFor = (value: string): ReadonlyArray<string> | undefined =>
  Object.hasOwn(STATUS_FILTER, value) ? STATUS_FILTER[value] : undefined

/** The ILIKE pattern for a name filter: the text anywhere in the name, wildcards escaped. */
export const namePattern = (text: string): string => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`

/** Widths in days of the spans a record's creation day is indexed under, widest first (sql/040_name_days.sql). */
const DAY_SPANS = [256, 16, 1] as const

/**
 * The keys of the name index's day column (views_name_days) that cover days `from` to `to`
 * of a company's resource, both included (days since 1970-01-01 UTC): whole 256-day and
 * 16-day spans where they fit, single days at the edges, so at most 60 keys and one per 256
 * days. Each key is one day's or one span's records of that company and resource.
 */
export const dayKeys = (companyId: string, resource: string, from: number, to: number): Array<string> => {
  const keys: Array<string> = []
  for (let day = from; day <= to; ) {
    // A width of 1 always fits.
    const width = DAY_SPANS.find((w) => ((day % w) + w) % w === 0 && day + w - 1 <= to) ?? 1
    keys.push(`${companyId}/${resource}/${width}/${Math.floor(day / width)}`)
    day += width
  }
  return keys
}

/**
 * The ranges of days a name filter looks through after its walk along the page index found
 * less than a page (src/read/views.ts), newest first, from the day of the walk's last record
 * to the oldest day: the first as many days as the walk covered (so about as many records,
 * at the rate the newest came), then ranges 4 times longer each. Each range's matches are
 * read and sorted, so a name's page costs about the matches of the range that completes it,
 * never every match the company has; eight ranges cover 59 years of days a walk of one day.
 */
export const dayRanges = (
  oldest: number,
  newest: number,
  first: number
): Array<readonly [from: number, to: number]> => {
  const ranges: Array<readonly [number, number]> = []
  let length = Math.max(1, first)
  for (let to = newest; to >= oldest; length *= 4) {
    const from = Math.max(oldest, to - length + 1)
    ranges.push([from, to])
    to = from - 1
  }
  return ranges
}

/** A record list's query as its endpoint decodes it (faces/api/query.ts): dates are canonical UTC timestamps. */
export interface ListQuery {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
  readonly createdAfter?: string | undefined
  readonly createdBefore?: string | undefined
  readonly updatedAfter?: string | undefined
  readonly updatedBefore?: string | undefined
  /** Oldest change first. */
  readonly sort?: "updatedAt" | undefined
  readonly name?: string | undefined
  readonly status?: string | undefined
}

/** What a list asks for once its parameters are checked: pure, testable without a database. */
export interface ListRequest {
  readonly limit: number
  readonly createdAfter: string | undefined
  readonly createdBefore: string | undefined
  /** Bounds of the change time (views.changed_at), exclusive. */
  readonly updatedAfter: string | undefined
  readonly updatedBefore: string | undefined
  /** Oldest change first, instead of newest created first. */
  readonly byChange: boolean
  readonly name: string | undefined
  readonly statuses: ReadonlyArray<string> | undefined
  readonly binding: CursorBinding
}

/** A decoded list query as a list request. */
export const listRequest = (companyId: string, resource: Resource, query: ListQuery): ListRequest => {
  const { createdAfter, createdBefore, updatedAfter, updatedBefore } = query
  return {
    limit: query.limit ?? DEFAULT_LIMIT,
    createdAfter,
    createdBefore,
    updatedAfter,
    updatedBefore,
    byChange: query.sort === "updatedAt",
    name: query.name,
    // The schema let only a known status through.
    statuses: query.status === undefined ? undefined : statusesFor(query.status),
    binding: {
      companyId,
      resource,
      filters: {
        createdAfter,
        createdBefore,
        updatedAfter,
        updatedBefore,
        // A cursor of one order is no position in the other.
        sort: query.sort,
        name: query.name?.toLowerCase(),
        status: query.status
      }
    }
  }
}

/** How far back the events feed and the deletions go. */
export const EVENTS_WINDOW_DAYS = 30
export const DELETIONS_WINDOW_DAYS = 30

/** The query parameters of the events feed and of the deletions, for messages about an unknown one. */
export const EVENTS_PARAMS = ["limit", "cursor", "createdAfter", "createdBefore", "type"] as const
export const DELETIONS_PARAMS = ["resource", "since", "limit", "cursor"] as const
