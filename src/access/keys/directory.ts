// Who a bearer key is. Keys are looked up by SHA-256 fingerprint and kept in memory to
// decide quickly what a request may do; every request that is served is then checked
// again inside the same statement that reads its data (see key-check.ts), so a revoked or
// expired key, a module turned off or a company that lost the API is refused on the very
// next request in every process, with no extra round trip. A refusal decided from memory
// about something that can change back (the company, its modules, the Host) is confirmed
// against the database first.
//
// Its statements stay on the read API's pool handle (platform/db/api-pool.ts), not Sql: a
// remembered key is resolved with no Effect at all, and a lookup is one promise; going
// through `query` would add an Effect per lookup on the hot path (bench:api) and move it to
// the main pool. What it remembers is bounded (MAX_ENTRIES); unknown credentials are not
// remembered.
import type postgres from "postgres"
import { isResource, type Resource } from "../../domain/resources.ts"
import { API_KEY_PREFIX, fingerprintOf, looksLike } from "./bearer-secrets.ts"
import { mayChangeBack, refusalFor, type KeyEntry, type KeyRefusal } from "./rules.ts"

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
  | { readonly _tag: "Refused"; readonly refusal: KeyRefusal; readonly entry: KeyEntry | undefined }
  | { readonly _tag: "Ok"; readonly entry: KeyEntry }

const MISSING: Lookup = { _tag: "Refused", refusal: { _tag: "Missing" }, entry: undefined }
const UNKNOWN: Lookup = { _tag: "Refused", refusal: { _tag: "Unknown" }, entry: undefined }

export interface KeyDirectory {
  /**
   * The lookup when memory decides it: a credential of no key's shape, or a remembered key
   * that may make this request. Undefined when the database must be asked (resolve).
   */
  readonly remembered: (
    credential: string,
    host: string | undefined,
    resource: Resource | undefined
  ) => Lookup | undefined
  /** Resolves a bearer credential for a request to this host (and resource, if any). */
  readonly resolve: (credential: string, host: string | undefined, resource: Resource | undefined) => Promise<Lookup>
  /** Reads a key afresh and tells why it is refused now (after a statement found it refused). */
  readonly explain: (
    keyId: string,
    host: string | undefined,
    resource: Resource | undefined
  ) => Promise<KeyRefusal | undefined>
}

const KEY_COLUMNS = `k.id, k.name, k.company_id, k.scopes, k.webhooks, k.expires_at, k.revoked_at is not null as revoked,
       c.name as company_name, c.tier, c.api_enabled, c.modules
  from service.api_keys k left join service.companies c on c.id = k.company_id`

export const makeKeyDirectory = (sql: postgres.Sql): KeyDirectory => {
  // Remembered keys, by the bearer credential itself: hashing it on every request costs
  // more than the rest of the lookup. Only known keys are remembered, for TTL_MS.
  const keys = new Map<string, { entry: KeyEntry; at: number }>()
  const byId = new Map<string, string>() // key id -> credential
  const hosts = new Map<string, { company: string | null; at: number }>()

  const loadKey = async (credential: string): Promise<KeyEntry | undefined> => {
    const [row] = await sql<
      KeyRow[]
    >`select ${sql.unsafe(KEY_COLUMNS)} where k.fingerprint = ${fingerprintOf(credential)}`
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

  const remembered = (credential: string, host: string | undefined, resource: Resource | undefined) => {
    if (credential === "") return MISSING
    if (!looksLike(API_KEY_PREFIX, credential)) return UNKNOWN
    // The common case, a remembered key that may be served, is decided with no statement.
    const now = Date.now()
    const cachedKey = keys.get(credential)
    if (cachedKey === undefined || now - cachedKey.at >= TTL_MS) return undefined
    const cachedHost = host === undefined ? { company: null, at: now } : hosts.get(host)
    if (cachedHost === undefined || now - cachedHost.at >= TTL_MS) return undefined
    if (refusalFor(cachedKey.entry, cachedHost.company, resource, now) !== undefined) return undefined
    return { _tag: "Ok", entry: cachedKey.entry } satisfies Lookup
  }

  const resolve = async (
    credential: string,
    host: string | undefined,
    resource: Resource | undefined
  ): Promise<Lookup> => {
    const known = remembered(credential, host, resource)
    if (known !== undefined) return known
    const now = Date.now()
    const cachedKey = keys.get(credential)
    const cachedHost = host === undefined ? { company: null, at: now } : hosts.get(host)
    const keyFresh = cachedKey !== undefined && now - cachedKey.at < TTL_MS
    const hostFresh = cachedHost !== undefined && now - cachedHost.at < TTL_MS
    let entry = keyFresh ? cachedKey.entry : await loadKey(credential)
    let hostCompany = hostFresh ? cachedHost.company : await loadHost(host)
    let refusal = refusalFor(entry, hostCompany, resource, now)
    if (refusal !== undefined && mayChangeBack(refusal) && (keyFresh || hostFresh)) {
      // decided from memory about something that can change back: confirm
      entry = await loadKey(credential)
      hostCompany = await loadHost(host)
      refusal = refusalFor(entry, hostCompany, resource, Date.now())
    }
    return refusal === undefined ? { _tag: "Ok", entry: entry! } : { _tag: "Refused", refusal, entry }
  }

  const explain = async (keyId: string, host: string | undefined, resource: Resource | undefined) => {
    const [row] = await sql<KeyRow[]>`select ${sql.unsafe(KEY_COLUMNS)} where k.id = ${keyId}`
    const credential = byId.get(keyId)
    if (row === undefined) {
      if (credential !== undefined) keys.delete(credential)
      return refusalFor(undefined, null, resource, Date.now())
    }
    const entry = toEntry(row)
    if (credential !== undefined) keys.set(credential, { entry, at: Date.now() })
    return refusalFor(entry, await loadHost(host), resource, Date.now())
  }

  return { remembered, resolve, explain }
}
