// API keys as an admin manages them (docs/api.md#keys): create (shown once), revoke, list. The CLI
// and the admin HTTP API are two faces of these functions.
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { Effect } from "effect"
import { query, transaction } from "../../platform/db/Sql.ts"
import type { Tx } from "../../platform/db/Database.ts"
import { API_KEY_PREFIX, newSecret } from "./bearer-secrets.ts"
import { isResource, RESOURCES, type Resource } from "../../domain/resources.ts"
import { writeAdminActivity } from "../activity.ts"
import { at, conflict, invalid, notFound, words, type Invalid } from "../../domain/errors.ts"
import type { AdminUser } from "../identity.ts"
import { isUuid } from "../../domain/ids.ts"
import { FORBIDDEN_IN_NAME, forbiddenInName } from "../../domain/names.ts"
import type { KeyRefusal } from "./rules.ts"

/** At most 20 active keys per company (docs/api.md#keys). */
export const MAX_ACTIVE_KEYS = 20

export const EXPIRY_CHOICES = ["30d", "90d", "1y", "never"] as const
export type Expiry = (typeof EXPIRY_CHOICES)[number]
export const DEFAULT_EXPIRY: Expiry = "never"

const EXPIRY_INTERVAL: Readonly<Record<Expiry, string | null>> = {
  "30d": "30 days",
  "90d": "90 days",
  "1y": "1 year",
  never: null
}

/** When a key or an admin token made now stops working: now() plus its interval, or null (never). */
export const expiresAtOf = (tx: Tx, expires: Expiry) => {
  const interval = EXPIRY_INTERVAL[expires]
  return interval === null ? null : tx`now() + ${interval}::interval`
}

export const MAX_NAME_LENGTH = 100

// -----------------------------------------------------------------------------
// Input checks (pure)

export const parseExpiry = (text: string): Expiry | undefined =>
  (EXPIRY_CHOICES as ReadonlyArray<string>).includes(text) ? (text as Expiry) : undefined

const scopes = at("scopes")

/** "all", or resource names separated by commas; the error when invalid. */
export const parseScopes = (
  input: string | ReadonlyArray<string>
): { readonly scopes: ReadonlyArray<Resource> } | { readonly error: Invalid } => {
  const items = (typeof input === "string" ? input.split(",") : input).map((s) => s.trim()).filter((s) => s !== "")
  if (items.length === 0)
    return { error: invalid(words`${scopes} needs resources separated by commas, or all (${RESOURCES.join(", ")})`) }
  if (items.includes("all")) {
    if (items.length > 1) return { error: invalid(words`${scopes} takes all on its own, or a list of resources`) }
    return { scopes: RESOURCES }
  }
  const unknown = items.filter((s) => !isResource(s))
  if (unknown.length > 0) {
    const listed = unknown.map((u) => `"${u}"`).join(", ")
    return {
      error: invalid(
        words`unknown resource${unknown.length > 1 ? "s" : ""} ${listed} in ${scopes}; choose from ${RESOURCES.join(", ")}, or all`
      )
    }
  }
  return { scopes: RESOURCES.filter((r) => items.includes(r)) }
}

const name = at("name")

/** A key's or token's name: the error when it breaks a rule. */
export const checkName = (text: string): Invalid | undefined => {
  const trimmed = text.trim()
  if (trimmed === "") return invalid(words`${name} must not be empty`)
  if (trimmed.length > MAX_NAME_LENGTH) return invalid(words`${name} must be at most ${MAX_NAME_LENGTH} characters`)
  const bad = forbiddenInName(trimmed)
  if (bad !== undefined) return invalid(words`${name} may not contain ${FORBIDDEN_IN_NAME} (found ${bad})`)
  return undefined
}

// -----------------------------------------------------------------------------

export interface CreateKeyInput {
  readonly companyId: string
  readonly name: string
  readonly scopes: ReadonlyArray<Resource>
  readonly webhooks: boolean
  readonly expires: Expiry
}

export interface CreatedKey {
  readonly id: string
  /** The key itself: shown once, never stored. */
  readonly key: string
  readonly name: string
  readonly companyId: string
  readonly scopes: ReadonlyArray<Resource>
  readonly webhooks: boolean
  readonly createdAt: string
  readonly expiresAt: string | null
}

export type KeyState = "active" | "expired" | "revoked"

export interface KeyInfo {
  readonly id: string
  readonly name: string
  readonly scopes: ReadonlyArray<string>
  readonly webhooks: boolean
  readonly state: KeyState
  readonly createdAt: string
  readonly createdBy: string | null
  readonly expiresAt: string | null
  readonly revokedAt: string | null
  readonly revokedBy: string | null
  readonly lastUsedAt: string | null
  readonly requestCount: number
}

interface KeyRow {
  readonly id: string
  readonly company_id: string
  readonly name: string
  readonly scopes: ReadonlyArray<string>
  readonly webhooks: boolean
  readonly created_at: Date
  readonly created_by_email: string | null
  readonly expires_at: Date | null
  readonly revoked_at: Date | null
  readonly revoked_by_email: string | null
  readonly last_used_at: Date | null
  readonly request_count: string | number
  readonly expired: boolean
}

const toInfo = (r: KeyRow): KeyInfo => ({
  id: r.id,
  name: r.name,
  scopes: r.scopes,
  webhooks: r.webhooks,
  state: r.revoked_at !== null ? "revoked" : r.expired ? "expired" : "active",
  createdAt: r.created_at.toISOString(),
  createdBy: r.created_by_email,
  expiresAt: toIsoUtcOrNull(r.expires_at),
  revokedAt: toIsoUtcOrNull(r.revoked_at),
  revokedBy: r.revoked_by_email,
  lastUsedAt: toIsoUtcOrNull(r.last_used_at),
  requestCount: Number(r.request_count)
})

const KEY_COLUMNS = (sql: Tx) =>
  sql`id, company_id, name, scopes, webhooks, created_at, created_by_email, expires_at, revoked_at,
      revoked_by_email, last_used_at, request_count, (expires_at is not null and expires_at <= now()) as expired`

/** Creates a key for the actor's company; refuses a 21st active key. */
export const createKey = Effect.fn("admin.createKey")(function* (actor: AdminUser, input: CreateKeyInput) {
  const nameProblem = checkName(input.name)
  if (nameProblem !== undefined) return yield* nameProblem
  if (input.scopes.length === 0)
    return yield* invalid("a key must be able to read at least one resource", { field: "scopes" })
  if (actor.companyId !== input.companyId)
    return yield* invalid("an admin creates keys for their own company only", { field: "company" })
  const secret = newSecret(API_KEY_PREFIX)
  const name = input.name.trim()
  return yield* transaction(
    Effect.gen(function* () {
      // Serialise key creation per company so that two at once cannot both be the 20th.
      const [active] = yield* query(async (tx) => {
        await tx`select pg_advisory_xact_lock(hashtextextended(${`service.api_keys:${input.companyId}`}, 0))`
        return tx<{ n: number }[]>`
          select count(*)::int as n from service.api_keys
           where company_id = ${input.companyId} and revoked_at is null and (expires_at is null or expires_at > now())`
      })
      const n = active?.n ?? 0
      if (n >= MAX_ACTIVE_KEYS) {
        return yield* conflict(
          `this company already has ${n} active API keys, the most it may hold (${MAX_ACTIVE_KEYS}); revoke one first`
        )
      }
      const [row] = yield* query(
        (tx) => tx<{ id: string; created_at: Date; expires_at: Date | null }[]>`
        insert into service.api_keys (company_id, name, fingerprint, scopes, webhooks, expires_at, created_by, created_by_email)
        values (${input.companyId}, ${name}, ${secret.fingerprint}, ${input.scopes as string[]}::text[],
                ${input.webhooks}, ${expiresAtOf(tx, input.expires)}, ${actor.userId}, ${actor.email})
        returning id, created_at, expires_at`
      )
      const created: CreatedKey = {
        id: row!.id,
        key: secret.secret,
        name,
        companyId: input.companyId,
        scopes: input.scopes,
        webhooks: input.webhooks,
        createdAt: row!.created_at.toISOString(),
        expiresAt: toIsoUtcOrNull(row!.expires_at)
      }
      yield* writeAdminActivity(actor, "key.created", created.id, {
        name,
        scopes: [...input.scopes],
        webhooks: input.webhooks,
        expiresAt: created.expiresAt
      })
      return created
    })
  )
})

/** The company a key belongs to (to check the actor against it), or a not-found error. */
export const keyCompany = Effect.fn("keyCompany")(function* (keyId: string) {
  if (!isUuid(keyId)) return yield* invalid(`"${keyId}" is not a key id (a UUID, as keys list shows)`, { field: "id" })
  const [row] = yield* query(
    (sql) => sql<{ company_id: string }[]>`select company_id from service.api_keys where id = ${keyId}`
  )
  if (row === undefined) return yield* notFound(`no API key with id ${keyId}`)
  return row.company_id
})

/**
 * Revokes a key of the actor's company: its next request gets 401 (no process caches keys).
 * Webhook subscriptions made with it are deleted in the same transaction by the webhooks
 * schema's trigger on service.api_keys.
 */
export const revokeKey = Effect.fn("admin.revokeKey")(function* (actor: AdminUser, keyId: string) {
  // An id of another shape names no key, as an unknown one does.
  if (!isUuid(keyId)) return yield* notFound(`no API key with id ${keyId}`)
  return yield* transaction(
    Effect.gen(function* () {
      const [row] = yield* query(
        (tx) => tx<KeyRow[]>`select ${KEY_COLUMNS(tx)} from service.api_keys where id = ${keyId} for update`
      )
      if (row === undefined || row.company_id !== actor.companyId) return yield* notFound(`no API key with id ${keyId}`)
      if (row.revoked_at !== null) {
        return yield* conflict(
          `API key ${keyId} ("${row.name}") was already revoked at ${row.revoked_at.toISOString()}`
        )
      }
      const [updated] = yield* query(
        (tx) => tx<KeyRow[]>`
        update service.api_keys set revoked_at = now(), revoked_by = ${actor.userId}, revoked_by_email = ${actor.email}
         where id = ${keyId}
         returning ${KEY_COLUMNS(tx)}`
      )
      yield* writeAdminActivity(actor, "key.revoked", keyId, { name: row.name })
      return toInfo(updated!)
    })
  )
})

/** Every key of a company, newest first, with who made it, its state and its usage. */
export const listKeys = (companyId: string) =>
  Effect.map(
    query(
      (sql) => sql<KeyRow[]>`
      select ${KEY_COLUMNS(sql)} from service.api_keys where company_id = ${companyId} order by created_at desc, id desc`
    ),
    (rows) => rows.map(toInfo)
  )

export const getKey = Effect.fn("getKey")(function* (companyId: string, keyId: string) {
  if (!isUuid(keyId)) return yield* notFound(`no API key with id ${keyId}`)
  const [row] = yield* query(
    (sql) =>
      sql<KeyRow[]>`select ${KEY_COLUMNS(sql)} from service.api_keys where id = ${keyId} and company_id = ${companyId}`
  )
  if (row === undefined) return yield* notFound(`no API key with id ${keyId}`)
  return toInfo(row)
})

export interface KeyNearExpiry {
  readonly id: string
  readonly companyId: string
  readonly name: string
  readonly expiresAt: string
  readonly webhooks: boolean
  /** Webhook subscriptions made with it (they stop when it expires). */
  readonly subscriptions: number
}

/** Active keys of every company that expire within `days`, the soonest first (the operators' status). */
export const keysNearExpiry = (days: number) =>
  Effect.map(
    query(
      (sql) => sql<
        { id: string; company_id: string; name: string; expires_at: Date; webhooks: boolean; subscriptions: number }[]
      >`
      select k.id::text, k.company_id::text, k.name, k.expires_at, k.webhooks,
        (select count(*)::int from service.webhook_subscriptions s where s.key_id = k.id) as subscriptions
      from service.api_keys k
      where k.revoked_at is null and k.expires_at > now() and k.expires_at <= now() + make_interval(days => ${days})
      order by k.expires_at, k.id`
    ),
    (rows) =>
      rows.map(
        (k): KeyNearExpiry => ({
          id: k.id,
          companyId: k.company_id,
          name: k.name,
          expiresAt: k.expires_at.toISOString(),
          webhooks: k.webhooks,
          subscriptions: k.subscriptions
        })
      )
  )

/**
 * Why a company's keys would be refused now whatever they ask (the API not on the Company
 * tier, or turned off), or undefined; also undefined before capture has mirrored the company.
 */
export const companyKeysRefusal = (companyId: string) =>
  Effect.map(
    query(
      (sql) =>
        sql<
          { tier: string | null; api_enabled: boolean | null }[]
        >`select tier, api_enabled from service.companies where id = ${companyId}`
    ),
    ([c]): Extract<KeyRefusal, { _tag: "Tier" | "ApiOff" }> | undefined =>
      c === undefined
        ? undefined
        : c.tier !== "company"
          ? { _tag: "Tier", tier: c.tier ?? "" }
          : c.api_enabled !== true
            ? { _tag: "ApiOff" }
            : undefined
  )
