// Portal links (docs/operations.md#portal-links): an admin makes a link for one API key; its
// holder opens it once and has, for the link's life, a session on a page of that key's
// subscriptions and deliveries, acting as the key. The token and the session id are random,
// shown once and kept as SHA-256 hashes; a link ends at its expiry or when its key is revoked
// or expires, checked at every request from the key's own row.
import { Effect } from "effect"
import { conflict, invalid, notFound } from "../domain/errors.ts"
import { isUuid } from "../domain/ids.ts"
import { query, type Sql, transaction } from "../platform/db/Sql.ts"
import { writeActivity, writeAdminActivity } from "./activity.ts"
import type { AdminUser } from "./identity.ts"
import { randomToken, sha256 } from "./keys/bearer-secrets.ts"

export const PORTAL_PATH_PREFIX = "/portal/"
/** A link's life: at most a day, an hour unless said. */
export const MAX_PORTAL_SECONDS = 24 * 3600
export const DEFAULT_PORTAL_SECONDS = 3600
const MIN_PORTAL_SECONDS = 60

/**
 * A link's life from `expiresIn`: seconds (a number), or a duration ("90m", "1h", "24h",
 * "3600s"); undefined is the default hour. Pure.
 */
export const parseExpiresIn = (value: unknown): { readonly seconds: number } | { readonly error: string } => {
  if (value === undefined || value === null || value === "") return { seconds: DEFAULT_PORTAL_SECONDS }
  let seconds: number
  if (typeof value === "number") seconds = value
  else if (typeof value === "string") {
    const m = /^\s*(\d+)\s*(s|m|h)?\s*$/i.exec(value)
    if (m === null)
      return { error: `expiresIn "${value}" is not a duration: give seconds, or e.g. 15m, 1h, 24h (at most 24h)` }
    seconds = Number(m[1]) * ({ s: 1, m: 60, h: 3600 } as const)[(m[2] ?? "s").toLowerCase() as "s" | "m" | "h"]
  } else return { error: "expiresIn must be seconds, or a duration such as 1h" }
  if (!Number.isInteger(seconds)) return { error: "expiresIn must be a whole number of seconds" }
  if (seconds > MAX_PORTAL_SECONDS) return { error: "expiresIn is at most 24 hours (24h, 86400 seconds)" }
  if (seconds < MIN_PORTAL_SECONDS) return { error: "expiresIn is at least a minute (60 seconds)" }
  return { seconds }
}

/** A colour as #rrggbb (lower case), or an error. Pure. */
export const parseColour = (
  value: string | undefined | null
): { readonly colour: string | null } | { readonly error: string } => {
  if (value === undefined || value === null || value.trim() === "") return { colour: null }
  const v = value.trim().toLowerCase()
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/.exec(v)
  if (short !== null) return { colour: `#${short[1]}${short[1]}${short[2]}${short[2]}${short[3]}${short[3]}` }
  if (/^#[0-9a-f]{6}$/.test(v)) return { colour: v }
  return { error: `colour "${value}" is not a colour: give #rrggbb, e.g. #0b4f8a` }
}

export interface PortalBranding {
  /** Shown instead of the company's name. */
  readonly name?: string | undefined
  /** #rrggbb */
  readonly colour?: string | undefined
}

export interface CreatedPortalLink {
  readonly id: string
  readonly keyId: string
  readonly keyName: string
  /** `/portal/<token>`: the token is shown this once. */
  readonly path: string
  readonly expiresAt: string
}

/** Makes a link to a page of one key of the admin's company; the key must be active and have the webhooks permission. */
export const createPortalLink = Effect.fn("admin.createPortalLink")(function* (
  actor: AdminUser,
  keyId: string,
  input: { readonly expiresIn?: unknown; readonly branding?: PortalBranding | undefined } = {}
) {
  if (!isUuid(keyId)) return yield* notFound(`no API key with id ${keyId}`)
  const life = parseExpiresIn(input.expiresIn)
  if ("error" in life) return yield* invalid(life.error)
  const colour = parseColour(input.branding?.colour)
  if ("error" in colour) return yield* invalid(colour.error)
  const brandName = input.branding?.name?.trim() || null
  if (brandName !== null && brandName.length > 100)
    return yield* invalid("the branding's name is at most 100 characters")
  const token = randomToken()
  return yield* transaction(
    Effect.gen(function* () {
      const [key] = yield* query(
        (sql) => sql<
          {
            id: string
            name: string
            company_id: string
            revoked_at: Date | null
            expired: boolean
            webhooks: boolean
          }[]
        >`
        select id::text, name, company_id::text, revoked_at, coalesce(expires_at <= now(), false) as expired, webhooks
        from service.api_keys where id = ${keyId} for share`
      )
      if (key === undefined || key.company_id !== actor.companyId) return yield* notFound(`no API key with id ${keyId}`)
      if (key.revoked_at !== null) return yield* conflict(`API key ${keyId} ("${key.name}") is revoked`)
      if (key.expired) return yield* conflict(`API key ${keyId} ("${key.name}") has expired`)
      if (!key.webhooks)
        return yield* conflict(
          `API key ${keyId} ("${key.name}") has no webhooks permission: it has no subscriptions for a portal to show`
        )
      const [row] = yield* query(
        (sql) => sql<{ id: string; expires_at: Date }[]>`
        insert into service.portal_links (key_id, company_id, token_hash, created_by, expires_at, brand_name, brand_colour)
        values (${key.id}, ${key.company_id}, ${sha256(token)}, ${actor.email},
          now() + ${life.seconds} * interval '1 second', ${brandName}, ${colour.colour})
        returning id::text, expires_at`
      )
      yield* writeAdminActivity(actor, "portal_link.created", row!.id, {
        keyId: key.id,
        keyName: key.name,
        expiresAt: row!.expires_at.toISOString()
      })
      return {
        id: row!.id,
        keyId: key.id,
        keyName: key.name,
        path: `${PORTAL_PATH_PREFIX}${token}`,
        expiresAt: row!.expires_at.toISOString()
      } satisfies CreatedPortalLink
    })
  )
})

/** Why a link or a session no longer works, in the words its holder is shown. */
export type PortalRefusal = "none" | "unknown" | "used" | "expired" | "revoked"

export const PORTAL_REFUSALS: Readonly<Record<PortalRefusal, string>> = {
  none: "You are not signed in to a portal (or you signed out). Open the portal link you were sent; a link works once.",
  unknown: "This portal link is not known. Ask whoever sent it for a new one.",
  used: "This portal link was already opened. A link works once: ask whoever sent it for a new one.",
  expired: "This portal link has expired. Ask whoever sent it for a new one.",
  revoked: "The API key of this portal link was revoked: its portal is closed."
}

/** What a portal session shows and acts as. */
export interface PortalSession {
  readonly linkId: string
  readonly keyId: string
  readonly keyName: string
  readonly companyId: string
  readonly csrf: string
  readonly expiresAt: string
  readonly brandName: string | null
  readonly brandColour: string | null
  /** The company's name, shown unless the link names another. */
  readonly companyName: string | null
}

type LinkRow = {
  id: string
  key_id: string
  key_name: string
  company_id: string
  csrf: string | null
  expires_at: Date
  opened_at: Date | null
  brand_name: string | null
  brand_colour: string | null
  company_name: string | null
  expired: boolean
  key_ok: boolean
}

const LINK_COLUMNS = `l.id::text, l.key_id::text, k.name as key_name, l.company_id::text, l.csrf, l.expires_at,
  l.opened_at, l.brand_name, l.brand_colour, (select c.name from service.companies c where c.id = l.company_id) as company_name,
  l.expires_at <= now() as expired,
  (k.revoked_at is null and (k.expires_at is null or k.expires_at > now())) as key_ok`

const sessionOf = (r: LinkRow): PortalSession => ({
  linkId: r.id,
  keyId: r.key_id,
  keyName: r.key_name,
  companyId: r.company_id,
  csrf: r.csrf ?? "",
  expiresAt: r.expires_at.toISOString(),
  brandName: r.brand_name,
  brandColour: r.brand_colour,
  companyName: r.company_name
})

/**
 * Opens a link: the first time, a session (its id to set as a cookie, shown this once); any
 * later time, after its expiry or once its key is revoked, a refusal. Logged under the key.
 */
export type Opened =
  | { readonly refused: PortalRefusal }
  | { readonly sessionId: string; readonly session: PortalSession }
export type Resolved = { readonly refused: PortalRefusal } | { readonly session: PortalSession }

export const openPortalLink = Effect.fn("openPortalLink")(function* (
  token: string
): Effect.fn.Return<Opened, never, Sql> {
  return yield* transaction(
    Effect.gen(function* (): Effect.fn.Return<Opened, never, Sql> {
      const [r] = yield* query(
        (sql) => sql<LinkRow[]>`
        select ${sql.unsafe(LINK_COLUMNS)} from service.portal_links l join service.api_keys k on k.id = l.key_id
        where l.token_hash = ${sha256(token)} for update of l`
      )
      if (r === undefined) return { refused: "unknown" as const }
      if (!r.key_ok) return { refused: "revoked" as const }
      if (r.opened_at !== null) return { refused: "used" as const }
      if (r.expired) return { refused: "expired" as const }
      const sessionId = randomToken()
      const csrf = randomToken()
      yield* query(
        (sql) => sql`
        update service.portal_links set opened_at = now(), session_hash = ${sha256(sessionId)}, csrf = ${csrf}
        where id = ${r.id}`
      )
      yield* writeActivity({
        companyId: r.company_id,
        actor: { kind: "key", keyId: r.key_id },
        kind: "portal_link.opened",
        subjectId: r.id,
        details: { keyName: r.key_name, viaPortal: true }
      })
      return { sessionId, session: sessionOf({ ...r, csrf }) }
    })
  )
})

/** What a link would open, without spending it (the page with its button): its key and branding, or why not. */
export const peekPortalLink = Effect.fn("peekPortalLink")(function* (
  token: string
): Effect.fn.Return<Resolved, never, Sql> {
  const [r] = yield* query(
    (sql) => sql<LinkRow[]>`
    select ${sql.unsafe(LINK_COLUMNS)} from service.portal_links l join service.api_keys k on k.id = l.key_id
    where l.token_hash = ${sha256(token)}`
  )
  if (r === undefined) return { refused: "unknown" as const }
  if (!r.key_ok) return { refused: "revoked" as const }
  if (r.opened_at !== null) return { refused: "used" as const }
  if (r.expired) return { refused: "expired" as const }
  return { session: sessionOf(r) }
})

/** The session a cookie names, while its link lasts and its key is active; else why not. */
export const resolvePortalSession = Effect.fn("resolvePortalSession")(function* (
  sessionId: string
): Effect.fn.Return<Resolved, never, Sql> {
  const [r] = yield* query(
    (sql) => sql<LinkRow[]>`
    select ${sql.unsafe(LINK_COLUMNS)} from service.portal_links l join service.api_keys k on k.id = l.key_id
    where l.session_hash = ${sha256(sessionId)}`
  )
  if (r === undefined) return { refused: "none" as const }
  if (!r.key_ok) return { refused: "revoked" as const }
  if (r.expired) return { refused: "expired" as const }
  return { session: sessionOf(r) }
})

/** Ends a session before its link expires (the portal's Sign out): the link's token was spent already. */
export const endPortalSession = (linkId: string) =>
  query((sql) => sql`update service.portal_links set session_hash = null, csrf = null where id = ${linkId}`)
