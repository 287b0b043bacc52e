// Who a bearer key is. Keys are looked up by SHA-256 fingerprint and kept in memory to
// decide quickly what a request may do; every request that is served is then checked
// again inside the same statement that reads its data (see key-check.ts), so a revoked or
// expired key, a module turned off or a company that lost the API is refused on the very
// next request in every process, with no extra round trip. A refusal decided from memory
// about something that can change back (the company, its modules, the Host) is confirmed
// against the database first.
//
// What it remembers is bounded whatever the requests are (docs/design.md, "Work before a key
// is known is bounded"): known keys and, for a short while, credentials that are no key, each
// in an LRU bounded by entries and bytes (src/platform/lru.ts); and the hosts of every company,
// read whole and refreshed (companies are few, and a Host that is no company's must cost
// nothing: it is not remembered, it is simply not among them).
//
// Its statements stay on the read API's pool handle (platform/db/api-pool.ts), not Sql: a
// remembered key is resolved with no Effect at all, and a lookup is one promise; going
// through `query` would add an Effect per lookup on the hot path (bench:api) and move it to
// the main pool.
import type postgres from "postgres"
import { isResource, type Resource } from "../../domain/resources.ts"
import { API_KEY_PREFIX, fingerprintOf, looksLike } from "./bearer-secrets.ts"
import { mayChangeBack, refusalFor, type KeyEntry, type KeyRefusal } from "./rules.ts"
import { Lru, stringBytes, type LruStats } from "../../platform/lru.ts"

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

/** How long a remembered key, or the companies' hosts, are used before they are read again. */
const TTL_MS = 30_000
/** Known keys remembered (real keys only: a credential is remembered as a key only once the database found it). */
const MAX_KEYS = 10_000
const MAX_KEY_BYTES = 16 * 1024 * 1024
/** Credentials that are no key, remembered this long so that one sent again costs no statement. */
const UNKNOWN_TTL_MS = 60_000
const MAX_UNKNOWN = 10_000
const MAX_UNKNOWN_BYTES = 2 * 1024 * 1024

/** A remembered key's bytes, roughly: its credential, its entry and its sets, the LRU's slot. */
const keyBytes = (credential: string, entry: KeyEntry): number =>
  stringBytes(credential) +
  stringBytes(entry.keyId) +
  stringBytes(entry.keyName) +
  stringBytes(entry.companyId) +
  64 * entry.scopes.size +
  (entry.company === null ? 0 : stringBytes(entry.company.name) + 64 * entry.company.modules.size) +
  400

export type Lookup =
  | { readonly _tag: "Refused"; readonly refusal: KeyRefusal; readonly entry: KeyEntry | undefined }
  | { readonly _tag: "Ok"; readonly entry: KeyEntry }

const MISSING: Lookup = { _tag: "Refused", refusal: { _tag: "Missing" }, entry: undefined }
const UNKNOWN: Lookup = { _tag: "Refused", refusal: { _tag: "Unknown" }, entry: undefined }

/** What the directory holds and has cost, for tests and operators. */
export interface DirectoryStats {
  readonly keys: LruStats
  /** Credentials remembered as no key. */
  readonly unknown: LruStats
  /** Hosts held: every company's, none else. */
  readonly companyHosts: number
  /** Statements the directory has run since it was made. */
  readonly statements: number
}

export interface KeyDirectory {
  /**
   * The lookup when memory decides it: no credential, a credential of no key's shape or one
   * remembered as no key, or a remembered key that may make this request. Undefined when the
   * database must be asked (resolve).
   */
  readonly remembered: (
    credential: string,
    host: string | undefined,
    resource: Resource | undefined
  ) => Lookup | undefined
  /** Whether the credential is a key this process remembers (revoked and expired ones too), however long ago it was read. */
  readonly knows: (credential: string) => boolean
  /** Resolves a bearer credential for a request to this host (and resource, if any). */
  readonly resolve: (credential: string, host: string | undefined, resource: Resource | undefined) => Promise<Lookup>
  /** Reads a key afresh and tells why it is refused now (after a statement found it refused). */
  readonly explain: (
    keyId: string,
    host: string | undefined,
    resource: Resource | undefined
  ) => Promise<KeyRefusal | undefined>
  readonly stats: () => DirectoryStats
}

const KEY_COLUMNS = `k.id, k.name, k.company_id, k.scopes, k.webhooks, k.expires_at, k.revoked_at is not null as revoked,
       c.name as company_name, c.tier, c.api_enabled, c.modules
  from service.api_keys k left join service.companies c on c.id = k.company_id`

const NEVER_READ = Number.NEGATIVE_INFINITY

export const makeKeyDirectory = (sql: postgres.Sql): KeyDirectory => {
  // Remembered keys, by the bearer credential itself: hashing it on every request costs
  // more than the rest of the lookup. Only keys the database found are remembered; each is
  // used for TTL_MS after it was read.
  const keys = new Lru<string, { readonly entry: KeyEntry; readonly at: number }>({
    maxEntries: MAX_KEYS,
    maxBytes: MAX_KEY_BYTES,
    sizeOf: (credential, { entry }) => keyBytes(credential, entry)
  })
  const byId = new Lru<string, string>({
    maxEntries: MAX_KEYS,
    maxBytes: MAX_KEYS * 400,
    sizeOf: (id, credential) => stringBytes(id) + stringBytes(credential) + 100
  })
  const unknown = new Lru<string, true>({
    maxEntries: MAX_UNKNOWN,
    maxBytes: MAX_UNKNOWN_BYTES,
    sizeOf: (credential) => stringBytes(credential) + 100,
    ttlMs: UNKNOWN_TTL_MS
  })
  // Every company's host (lower case) -> its id, read whole every TTL_MS.
  let companyHosts = new Map<string, string>()
  let hostsReadAt = NEVER_READ
  let hostsReading: Promise<void> | undefined
  let statements = 0

  const readHosts = (): Promise<void> =>
    (hostsReading ??= (async () => {
      statements++
      const rows = await sql<{ id: string; host: string }[]>`select id, lower(host) as host from service.companies`
      companyHosts = new Map(rows.map((r) => [r.host, r.id]))
      hostsReadAt = Date.now()
    })().finally(() => {
      hostsReading = undefined
    }))

  /** The company at this host from memory (null: none); undefined until the hosts were first read. */
  const hostCompany = (host: string | undefined, now: number): string | null | undefined => {
    if (host === undefined) return null
    if (hostsReadAt === NEVER_READ) return undefined
    // Stale: read again in the background; the hosts read last serve meanwhile (a statement's
    // key check decides the Host binding anyway, and a refusal from memory is confirmed).
    if (now - hostsReadAt >= TTL_MS && hostsReading === undefined) readHosts().catch(() => {})
    return companyHosts.get(host) ?? null
  }

  const hostCompanyOf = async (host: string | undefined): Promise<string | null> => {
    const known = hostCompany(host, Date.now())
    if (known !== undefined) return known
    await readHosts()
    return companyHosts.get(host!) ?? null
  }

  /** The company at this host as the database has it now (kept in the hosts held: only a company's host is added). */
  const readHost = async (host: string | undefined): Promise<string | null> => {
    if (host === undefined) return null
    statements++
    const [row] = await sql<{ id: string }[]>`select id from service.companies where lower(host) = ${host}`
    const company = row?.id ?? null
    if (company === null) companyHosts.delete(host)
    else companyHosts.set(host, company)
    return company
  }

  const loadKey = async (credential: string): Promise<KeyEntry | undefined> => {
    statements++
    const [row] = await sql<
      KeyRow[]
    >`select ${sql.unsafe(KEY_COLUMNS)} where k.fingerprint = ${fingerprintOf(credential)}`
    const now = Date.now()
    if (row === undefined) {
      keys.delete(credential)
      unknown.set(credential, true, now)
      return undefined
    }
    const entry = toEntry(row)
    unknown.delete(credential)
    keys.set(credential, { entry, at: now }, now)
    byId.set(entry.keyId, credential, now)
    return entry
  }

  const remembered = (credential: string, host: string | undefined, resource: Resource | undefined) => {
    if (credential === "") return MISSING
    if (!looksLike(API_KEY_PREFIX, credential)) return UNKNOWN
    // The common case, a remembered key that may be served, is decided with no statement.
    const now = Date.now()
    const cachedKey = keys.get(credential, now)
    if (cachedKey === undefined) return unknown.peek(credential, now) === undefined ? undefined : UNKNOWN
    if (now - cachedKey.at >= TTL_MS) return undefined
    const company = hostCompany(host, now)
    if (company === undefined || refusalFor(cachedKey.entry, company, resource, now) !== undefined) return undefined
    return { _tag: "Ok", entry: cachedKey.entry } satisfies Lookup
  }

  const knows = (credential: string): boolean => keys.peek(credential, 0) !== undefined

  const resolve = async (
    credential: string,
    host: string | undefined,
    resource: Resource | undefined
  ): Promise<Lookup> => {
    const known = remembered(credential, host, resource)
    if (known !== undefined) return known
    const now = Date.now()
    const cachedKey = keys.peek(credential, now)
    const keyFresh = cachedKey !== undefined && now - cachedKey.at < TTL_MS
    let entry = keyFresh ? cachedKey.entry : await loadKey(credential)
    // No key: refused whatever the Host, which is not looked at.
    if (entry === undefined) return UNKNOWN
    let hostCompanyId = await hostCompanyOf(host)
    let refusal = refusalFor(entry, hostCompanyId, resource, Date.now())
    if (refusal !== undefined && mayChangeBack(refusal)) {
      // decided from memory about something that can change back: confirm
      if (keyFresh) entry = await loadKey(credential)
      hostCompanyId = await readHost(host)
      refusal = refusalFor(entry, hostCompanyId, resource, Date.now())
    }
    return refusal === undefined ? { _tag: "Ok", entry: entry! } : { _tag: "Refused", refusal, entry }
  }

  const explain = async (keyId: string, host: string | undefined, resource: Resource | undefined) => {
    statements++
    const [row] = await sql<KeyRow[]>`select ${sql.unsafe(KEY_COLUMNS)} where k.id = ${keyId}`
    const now = Date.now()
    const credential = byId.peek(keyId, now)
    if (row === undefined) {
      if (credential !== undefined) keys.delete(credential)
      return refusalFor(undefined, null, resource, now)
    }
    const entry = toEntry(row)
    if (credential !== undefined) keys.set(credential, { entry, at: now }, now)
    return refusalFor(entry, await readHost(host), resource, Date.now())
  }

  const stats = (): DirectoryStats => ({
    keys: keys.stats(),
    unknown: unknown.stats(),
    companyHosts: companyHosts.size,
    statements
  })

  return { remembered, knows, resolve, explain, stats }
}
