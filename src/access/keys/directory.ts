// Who a bearer key is. Keys are looked up by SHA-256 fingerprint and kept in memory to
// decide quickly what a request may do; every request that is served is then checked
// again inside the same statement that reads its data (see key-check.ts), so a revoked or
// expired key, a module turned off or a company that lost the API is refused on the very
// next request in every process, with no extra round trip. A refusal decided from memory
// about something that can change back (the company, its modules, the Host) is confirmed
// against the database first.
//
// Its statements stay on the read API's pool handle (faces/api/pool.ts), not Sql: a remembered
// key is resolved with no Effect at all, and a lookup is one promise; going through `query`
// would add an Effect per lookup on the hot path (bench:api) and move it to the main pool.
import { Context, Effect, Layer } from "effect"
import { ApiPool } from "../../platform/db/api-pool.ts"
import { isResource, RESOURCES, type Resource } from "../../domain/resources.ts"
import type { CurrentKeyShape } from "./current-key.ts"
import { API_KEY_PREFIX, fingerprintOf, looksLike } from "./bearer-secrets.ts"

export interface KeyEntry {
  readonly keyId: string
  readonly keyName: string
  readonly companyId: string
  readonly scopes: ReadonlySet<Resource>
  readonly webhooks: boolean
  /** Epoch milliseconds, or null for a key that does not expire. */
  readonly expiresAt: number | null
  readonly revoked: boolean
  /** The company as capture mirrors it; null before capture has seen it. */
  readonly company: {
    readonly name: string
    readonly tier: string
    readonly apiEnabled: boolean
    readonly modules: ReadonlySet<string>
  } | null
}

export interface Refusal {
  readonly status: 401 | 403
  readonly message: string
  /** Could change back (company, modules, host), so worth confirming before refusing. */
  readonly mutable: boolean
}

/**
 * What a key may not do now, or undefined when it may: the rules of spec 5 and issue 4 in
 * order (unknown, revoked, expired, another company's address, the company's API and tier,
 * the key's scopes, the module).
 */
export const refusalFor = (
  entry: KeyEntry | undefined,
  hostCompany: string | null,
  resource: Resource | undefined,
  now: number
): Refusal | undefined => {
  if (entry === undefined) return { status: 401, message: "unknown API key", mutable: false }
  if (entry.revoked) return { status: 401, message: "this API key was revoked", mutable: false }
  if (entry.expiresAt !== null && entry.expiresAt <= now) {
    return {
      status: 401,
      message: `this API key expired at ${new Date(entry.expiresAt).toISOString()}`,
      mutable: false
    }
  }
  if (hostCompany !== null && hostCompany !== entry.companyId) {
    return {
      status: 401,
      message: "this API key belongs to another company: use it at your company's own address",
      mutable: true
    }
  }
  const company = entry.company
  if (company === null) return { status: 403, message: "the API is not available for this company", mutable: true }
  if (company.tier !== "company") {
    return {
      status: 403,
      message: `the API belongs to the Company tier; this company is on the ${company.tier} tier`,
      mutable: true
    }
  }
  if (!company.apiEnabled) return { status: 403, message: "the API is turned off for this company", mutable: true }
  if (resource !== undefined) {
    if (!entry.scopes.has(resource))
      return { status: 403, message: `this API key may not read ${resource}`, mutable: false }
    if (!company.modules.has(resource)) {
      return { status: 403, message: `the ${resource} module is turned off for this company`, mutable: true }
    }
  }
  return undefined
}

// The key as handlers see it, made once per remembered entry and Host: a reloaded key is a
// new entry, so nothing here outlives what it was made from.
const currentKeys = new WeakMap<KeyEntry, Map<string | undefined, CurrentKeyShape>>()

export const currentKeyOf = (entry: KeyEntry, host: string | undefined): CurrentKeyShape => {
  let byHost = currentKeys.get(entry)
  if (byHost === undefined) currentKeys.set(entry, (byHost = new Map()))
  let key = byHost.get(host)
  if (key === undefined) {
    const modules = entry.company?.modules ?? new Set<string>()
    key = {
      keyId: entry.keyId,
      keyName: entry.keyName,
      companyId: entry.companyId,
      companyName: entry.company?.name ?? "",
      expiresAt: entry.expiresAt === null ? null : new Date(entry.expiresAt).toISOString(),
      webhooks: entry.webhooks,
      scopes: entry.scopes,
      modules,
      readable: RESOURCES.filter((r) => entry.scopes.has(r) && modules.has(r)),
      host
    }
    if (byHost.size >= 64) byHost.clear() // Host headers are the client's to choose
    byHost.set(host, key)
  }
  return key
}

interface KeyRow {
  readonly id: string
  readonly name: string
  readonly company_id: string
  readonly scopes: ReadonlyArray<string>
  readonly webhooks: boolean
  readonly expires_at: Date | null
  readonly revoked: boolean
  readonly company_name: string | null
  readonly tier: string | null
  readonly api_enabled: boolean | null
  readonly modules: ReadonlyArray<string> | null
}

const toEntry = (row: KeyRow): KeyEntry => ({
  keyId: row.id,
  keyName: row.name,
  companyId: row.company_id,
  scopes: new Set(row.scopes.filter(isResource)),
  webhooks: row.webhooks,
  expiresAt: row.expires_at === null ? null : row.expires_at.getTime(),
  revoked: row.revoked,
  company:
    row.company_name === null
      ? null
      : {
          name: row.company_name,
          tier: row.tier ?? "",
          apiEnabled: row.api_enabled === true,
          modules: new Set(row.modules ?? [])
        }
})

/** How long a remembered key or host is used before it is read again. */
const TTL_MS = 30_000
const MAX_ENTRIES = 50_000

export type Lookup =
  | { readonly _tag: "Refused"; readonly refusal: Refusal; readonly entry: KeyEntry | undefined }
  | { readonly _tag: "Ok"; readonly entry: KeyEntry }

export class KeyDirectory extends Context.Service<
  KeyDirectory,
  {
    /** Resolves a bearer credential for a request to this host (and resource, if any). */
    readonly resolve: (
      credential: string,
      host: string | undefined,
      resource: Resource | undefined
    ) => Effect.Effect<Lookup>
    /** Reads a key afresh and tells why it is refused now (after a statement found it refused). */
    readonly explain: (
      keyId: string,
      host: string | undefined,
      resource: Resource | undefined
    ) => Effect.Effect<Refusal | undefined>
  }
>()("service/api/KeyDirectory") {
  static readonly layer = Layer.effect(
    KeyDirectory,
    Effect.gen(function* () {
      const { sql } = yield* ApiPool
      // Remembered keys, by the bearer credential itself: hashing it on every request costs
      // more than the rest of the lookup. Only known keys are remembered, for TTL_MS.
      const keys = new Map<string, { entry: KeyEntry; at: number }>()
      const byId = new Map<string, string>() // key id -> credential
      const hosts = new Map<string, { company: string | null; at: number }>()

      const loadKey = async (credential: string): Promise<KeyEntry | undefined> => {
        const fingerprint = fingerprintOf(credential)
        const [row] = await sql<KeyRow[]>`
          select k.id, k.name, k.company_id, k.scopes, k.webhooks, k.expires_at, k.revoked_at is not null as revoked,
                 c.name as company_name, c.tier, c.api_enabled, c.modules
            from service.api_keys k left join service.companies c on c.id = k.company_id
           where k.fingerprint = ${fingerprint}`
        if (row === undefined) {
          keys.delete(credential)
          return undefined // unknown credentials are not remembered
        }
        const entry = toEntry(row)
        if (keys.size >= MAX_ENTRIES) keys.clear()
        keys.set(credential, { entry, at: Date.now() })
        byId.set(entry.keyId, credential)
        return entry
      }

      const loadHost = async (host: string | undefined): Promise<string | null> => {
        if (host === undefined) return null
        const [row] = await sql<{ id: string }[]>`select id from service.companies where lower(host) = ${host}`
        const company = row?.id ?? null
        if (hosts.size >= MAX_ENTRIES) hosts.clear()
        hosts.set(host, { company, at: Date.now() })
        return company
      }

      const resolveAsync = async (
        credential: string,
        host: string | undefined,
        resource: Resource | undefined
      ): Promise<Lookup> => {
        const now = Date.now()
        const cachedKey = keys.get(credential)
        const cachedHost = host === undefined ? { company: null, at: now } : hosts.get(host)
        const keyFresh = cachedKey !== undefined && now - cachedKey.at < TTL_MS
        const hostFresh = cachedHost !== undefined && now - cachedHost.at < TTL_MS
        let entry = keyFresh ? cachedKey.entry : await loadKey(credential)
        let hostCompany = hostFresh ? cachedHost.company : await loadHost(host)
        let refusal = refusalFor(entry, hostCompany, resource, now)
        if (refusal?.mutable === true && (keyFresh || hostFresh)) {
          // decided from memory about something that can change back: confirm
          entry = await loadKey(credential)
          hostCompany = await loadHost(host)
          refusal = refusalFor(entry, hostCompany, resource, Date.now())
        }
        return refusal === undefined ? { _tag: "Ok", entry: entry! } : { _tag: "Refused", refusal, entry }
      }

      const resolve = (
        credential: string,
        host: string | undefined,
        resource: Resource | undefined
      ): Effect.Effect<Lookup> => {
        if (credential === "") {
          return Effect.succeed({
            _tag: "Refused",
            refusal: {
              status: 401,
              message: "missing API key: send the header Authorization: Bearer mk_...",
              mutable: false
            },
            entry: undefined
          })
        }
        if (!looksLike(API_KEY_PREFIX, credential)) {
          return Effect.succeed({
            _tag: "Refused",
            refusal: { status: 401, message: "unknown API key", mutable: false },
            entry: undefined
          })
        }
        // The common case, a remembered key that may be served, stays synchronous.
        const now = Date.now()
        const cachedKey = keys.get(credential)
        if (cachedKey !== undefined && now - cachedKey.at < TTL_MS) {
          const cachedHost = host === undefined ? { company: null, at: now } : hosts.get(host)
          if (
            cachedHost !== undefined &&
            now - cachedHost.at < TTL_MS &&
            refusalFor(cachedKey.entry, cachedHost.company, resource, now) === undefined
          ) {
            return Effect.succeed({ _tag: "Ok", entry: cachedKey.entry })
          }
        }
        return Effect.promise(() => resolveAsync(credential, host, resource))
      }

      const explain = (keyId: string, host: string | undefined, resource: Resource | undefined) =>
        Effect.promise(async () => {
          const [row] = await sql<KeyRow[]>`
            select k.id, k.name, k.company_id, k.scopes, k.webhooks, k.expires_at, k.revoked_at is not null as revoked,
                   c.name as company_name, c.tier, c.api_enabled, c.modules
              from service.api_keys k left join service.companies c on c.id = k.company_id
             where k.id = ${keyId}`
          const credential = byId.get(keyId)
          if (row === undefined) {
            if (credential !== undefined) keys.delete(credential)
            return refusalFor(undefined, null, resource, Date.now())
          }
          const entry = toEntry(row)
          if (credential !== undefined) keys.set(credential, { entry, at: Date.now() })
          return refusalFor(entry, await loadHost(host), resource, Date.now())
        })

      return KeyDirectory.of({ resolve, explain })
    })
  )
}
