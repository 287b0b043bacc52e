// Input checks shared by endpoints and subscriptions: event names and receiver addresses.
import { Effect } from "effect"
import { resolveAndCheck } from "../net/address-guard.ts"
import {
  EVENT_RESOURCE,
  isEventKind,
  isWebhookEvent,
  WEBHOOK_EVENTS,
  type WebhookEvent
} from "../../domain/event-kinds.ts"
import { parseFilter, type Filter } from "../../domain/filters/filter.ts"
import type { PayloadMode } from "../net/body.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { at, forbidden, invalid, isDomainError, words, type DomainError } from "../../domain/errors.ts"
import { FORBIDDEN_IN_NAME, forbiddenInName } from "../../domain/names.ts"

const KNOWN = WEBHOOK_EVENTS.join(", ")

/**
 * A check that throws a DomainError (these, requireId...) as an Effect failing with it: thrown
 * inside Effect.gen it would be a defect (a 500), not the refusal it is.
 */
export const checked = <A>(check: () => A): Effect.Effect<A, DomainError> =>
  Effect.suspend(() => {
    try {
      return Effect.succeed(check())
    } catch (e) {
      if (isDomainError(e)) return Effect.fail(e)
      throw e
    }
  })

export const parseEvent = (input: unknown): WebhookEvent => {
  if (typeof input !== "string" || input.trim() === "")
    throw invalid(`event must be one of: ${KNOWN}`, { field: "event" })
  const e = input.trim()
  if (!isWebhookEvent(e)) throw invalid(`unknown event "${e.slice(0, 80)}"; known events: ${KNOWN}`, { field: "event" })
  return e
}

/** A list of events (an array, or "a,b" text as the CLI takes it); duplicates dropped. */
export const parseEvents = (input: unknown): ReadonlyArray<WebhookEvent> => {
  const items = typeof input === "string" ? input.split(",") : input
  if (!Array.isArray(items)) throw invalid("events must be a list of event names", { field: "events" })
  const out: Array<WebhookEvent> = []
  for (const item of items) {
    if (typeof item === "string" && item.trim() === "") continue
    const e = parseEvent(item)
    if (!out.includes(e)) out.push(e)
  }
  if (out.length === 0) throw invalid(`choose at least one event: ${KNOWN}`, { field: "events" })
  return out
}

/** Refuses events whose module the company has turned off (docs/events.md#destinations). */
export const requireModulesOn = (events: ReadonlyArray<WebhookEvent>, modules: ReadonlyArray<string>): void => {
  // Alerts are about destinations: no module carries them.
  const off = events.filter((e) => isEventKind(e) && !modules.includes(EVENT_RESOURCE[e])).filter(isEventKind)
  if (off.length > 0) {
    const names = [...new Set(off.map((e) => EVENT_RESOURCE[e]))].join(", ")
    throw forbidden(
      `the ${names} module${off.length > 1 ? "s are" : " is"} turned off for this company (${off.join(", ")})`,
      { field: "events" }
    )
  }
}

export const parseName = (input: unknown): string => {
  if (typeof input !== "string" || input.trim() === "") throw invalid("name is required", { field: "name" })
  const name = input.trim()
  if (name.length > 200) throw invalid("name is longer than 200 characters", { field: "name" })
  const bad = forbiddenInName(name)
  if (bad !== undefined) throw invalid(`name may not contain ${FORBIDDEN_IN_NAME} (found ${bad})`, { field: "name" })
  return name
}

/**
 * Resolves the address now and refuses anything but https to public unicast (or an allowed
 * network). Returns the normalised URL that is stored; it is checked again before each send.
 */
export const checkUrl = Effect.fn("checkUrl")(function* (
  deps: Pick<WebhookDeps, "allowed" | "lookup">,
  input: unknown
) {
  if (typeof input !== "string") return yield* invalid("url must be an https:// address", { field: "url" })
  const r = yield* Effect.promise(() =>
    resolveAndCheck(input.trim(), { allowed: deps.allowed, ...(deps.lookup ? { lookup: deps.lookup } : {}) })
  )
  if (!r.ok)
    return yield* invalid(`url ${r.error}`, {
      field: "url",
      ...(r.notPublic === true ? { reason: "address_not_public" } : {})
    })
  return r.target.href
})

/** A destination's rate, in deliveries per second: at least MIN_RATE_LIMIT, at most MAX_RATE_LIMIT. */
export const MIN_RATE_LIMIT = 0.01
export const MAX_RATE_LIMIT = 1_000

/** rateLimit: deliveries per second (decimals allowed, e.g. 0.5), or null for none. */
export const parseRateLimit = (input: unknown): number | null => {
  if (input === null) return null
  if (typeof input !== "number" || !Number.isFinite(input) || input < MIN_RATE_LIMIT || input > MAX_RATE_LIMIT)
    throw invalid(
      words`${at("rateLimit")} must be a number of deliveries per second from ${MIN_RATE_LIMIT} to ${MAX_RATE_LIMIT} (e.g. 5 or 0.5), or null for no limit`
    )
  return input
}

export const ORDERINGS = ["none", "record"] as const
/** "record": events of one record reach the destination in the order they happened; "none": no order (the default). */
export type Ordering = (typeof ORDERINGS)[number]

export const parseOrdering = (input: unknown): Ordering => {
  if (input === "none" || input === "record") return input
  throw invalid(
    words`${at("ordering")} must be "record" (events of one record in the order they happened) or "none" (no order, the default)`
  )
}

/**
 * rateLimit as text (a CLI flag, a form field): "5", "0.5", or "none" (or empty) for no limit;
 * anything else is refused as parseRateLimit refuses it.
 */
export const parseRateLimitText = (input: string): number | null => {
  const t = input.trim()
  if (t === "" || t.toLowerCase() === "none") return null
  return parseRateLimit(/^\d+(\.\d+)?$/.test(t) ? Number(t) : Number.NaN)
}

export const PAYLOAD_MODES = ["full", "thin"] as const

/** payload: "full" (the record, the default) or "thin" ({id, companyId, url}: docs/events.md#thin-payloads). */
export const parsePayloadMode = (input: unknown): PayloadMode => {
  if (input === "full" || input === "thin") return input
  throw invalid(
    words`${at("payload")} must be "full" (the record, the default) or "thin" (only its id, company and API address)`
  )
}

/** filter: a JSON object over the fields of the events' data, or null for none (docs/events.md#content-filters). */
export const parseDestinationFilter = (input: unknown, events: ReadonlyArray<WebhookEvent>): Filter | null =>
  parseFilter(input, events)
