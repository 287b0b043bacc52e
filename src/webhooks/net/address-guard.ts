// Where a webhook may go. A receiver's address is attacker-chosen input: it must never
// reach loopback, the private network, cloud metadata or anything else that is not public
// unicast. The address is checked at creation and before every delivery, and the sender
// connects to the exact address checked here (see sender.ts), so DNS cannot swap it.
// Deliveries reuse a vetted answer for its DNS TTL (at most 30 s): vetted once per answer,
// not once per request, and still the only addresses a connection may use.
import { isIP, isIPv4, isIPv6 } from "node:net"
import { Data } from "effect"
import { makeLookup } from "./resolver.ts"

export type Classification = { readonly public: true } | { readonly public: false; readonly reason: string }

export type ResolvedAddress = {
  readonly address: string
  readonly family: 4 | 6
  /** Seconds the answer holds (its DNS TTL), when the lookup knows it; unknown means the 30 s cap. */
  readonly ttl?: number
}

/** Resolves a host name to all its addresses (the default: resolver.ts, with DNS TTLs and a deadline). */
export type Lookup = (hostname: string) => Promise<ReadonlyArray<ResolvedAddress>>

export type Network = {
  readonly family: 4 | 6
  readonly bytes: Uint8Array
  readonly prefix: number
  readonly text: string
}

/** Networks let through despite not being public (WEBHOOK_ALLOWED_NETWORKS); empty by default. */
export type AllowedNetworks = ReadonlyArray<Network>

const PUBLIC: Classification = { public: true }
const refuse = (reason: string): Classification => ({ public: false, reason })

// ---------------------------------------------------------------------------------------
// Parsing addresses to bytes

/** Strict dotted quad only: URL parsing has already turned decimal, hex and octal forms into it. */
export const parseIPv4 = (text: string): Uint8Array | undefined => {
  if (!isIPv4(text)) return undefined
  return Uint8Array.from(text.split(".").map(Number))
}

/** 16 bytes of an IPv6 address (zone id removed), or undefined. */
export const parseIPv6 = (text: string): Uint8Array | undefined => {
  const zoneAt = text.indexOf("%")
  const addr = zoneAt === -1 ? text : text.slice(0, zoneAt)
  if (!isIPv6(addr)) return undefined
  const groups: Array<number> = []
  const toGroups = (part: string): Array<number> | undefined => {
    if (part === "") return []
    const out: Array<number> = []
    for (const g of part.split(":")) {
      if (g.includes(".")) {
        const v4 = parseIPv4(g)
        if (!v4) return undefined
        out.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!)
      } else {
        out.push(parseInt(g, 16))
      }
    }
    return out
  }
  const gap = addr.indexOf("::")
  if (gap === -1) {
    const all = toGroups(addr)
    if (all?.length !== 8) return undefined
    groups.push(...all)
  } else {
    const head = toGroups(addr.slice(0, gap))
    const tail = toGroups(addr.slice(gap + 2))
    if (!head || !tail || head.length + tail.length > 7) return undefined
    groups.push(...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail)
  }
  const bytes = new Uint8Array(16)
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8
    bytes[i * 2 + 1] = g & 0xff
  })
  return bytes
}

const v4Text = (b: Uint8Array, at = 0): string => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`

/** Whether the first `prefix` bits of `bytes` equal those of `net`. */
const inPrefix = (bytes: Uint8Array, net: Uint8Array, prefix: number): boolean => {
  const whole = prefix >> 3
  for (let i = 0; i < whole; i++) if (bytes[i] !== net[i]) return false
  const rest = prefix & 7
  if (rest === 0) return true
  const mask = (0xff << (8 - rest)) & 0xff
  return ((bytes[whole] ?? 0) & mask) === ((net[whole] ?? 0) & mask)
}

// ---------------------------------------------------------------------------------------
// Classification (IANA special-purpose registries; anything special is refused)

type Rule = readonly [net: Uint8Array, prefix: number, reason: string]
const v4 = (a: number, b: number, c: number, d: number) => Uint8Array.of(a, b, c, d)

// Most specific first where ranges nest (metadata inside link-local, broadcast inside 240/4).
const V4_RULES: ReadonlyArray<Rule> = [
  [v4(169, 254, 169, 254), 32, "cloud metadata"],
  [v4(255, 255, 255, 255), 32, "broadcast"],
  [v4(0, 0, 0, 0), 8, '"this network" (0.0.0.0/8)'],
  [v4(10, 0, 0, 0), 8, "private network"],
  [v4(100, 64, 0, 0), 10, "carrier-grade NAT (shared address space)"],
  [v4(127, 0, 0, 0), 8, "loopback"],
  [v4(169, 254, 0, 0), 16, "link-local (cloud metadata)"],
  [v4(172, 16, 0, 0), 12, "private network"],
  [v4(192, 0, 0, 0), 24, "IETF protocol assignments"],
  [v4(192, 0, 2, 0), 24, "documentation (TEST-NET-1)"],
  [v4(192, 88, 99, 0), 24, "reserved (6to4 relay anycast)"],
  [v4(192, 168, 0, 0), 16, "private network"],
  [v4(198, 18, 0, 0), 15, "benchmarking"],
  [v4(198, 51, 100, 0), 24, "documentation (TEST-NET-2)"],
  [v4(203, 0, 113, 0), 24, "documentation (TEST-NET-3)"],
  [v4(224, 0, 0, 0), 4, "multicast"],
  [v4(240, 0, 0, 0), 4, "reserved"]
]

export const classifyIPv4Bytes = (b: Uint8Array): Classification => {
  for (const [net, prefix, reason] of V4_RULES) if (inPrefix(b, net, prefix)) return refuse(reason)
  return PUBLIC
}

const v6 = (text: string): Uint8Array => parseIPv6(text)!

const V6_EXACT: ReadonlyArray<Rule> = [
  [v6("::"), 128, "unspecified address"],
  [v6("::1"), 128, "loopback"]
]

// Ranges refused outright, checked before the embedding forms below.
const V6_RULES: ReadonlyArray<Rule> = [
  [v6("64:ff9b:1::"), 48, "local-use NAT64 (private translation)"],
  [v6("100::"), 64, "discard-only"],
  [v6("2001:db8::"), 32, "documentation"],
  [v6("3fff::"), 20, "documentation"],
  [v6("2001::"), 32, "Teredo tunnel"],
  [v6("2001::"), 23, "IETF protocol assignments"],
  [v6("5f00::"), 16, "SRv6 segment identifiers"],
  [v6("fc00::"), 7, "unique-local (private network)"],
  [v6("fe80::"), 10, "link-local"],
  [v6("fec0::"), 10, "site-local (deprecated)"],
  [v6("ff00::"), 8, "multicast"]
]

const MAPPED = v6("::ffff:0:0")
const TRANSLATED = v6("::ffff:0:0:0")
const COMPATIBLE = v6("::")
const NAT64 = v6("64:ff9b::")
const SIX_TO_FOUR = v6("2002::")
const GLOBAL_UNICAST = v6("2000::")

/** Names the IPv4 address inside an IPv6 form, for messages. */
const embedded = (form: string, b: Uint8Array, at: number): Classification => {
  const inner = classifyIPv4Bytes(b.subarray(at, at + 4))
  return inner.public ? PUBLIC : refuse(`${form} of ${v4Text(b, at)}: ${inner.reason}`)
}

export const classifyIPv6Bytes = (b: Uint8Array): Classification => {
  for (const [net, prefix, reason] of V6_EXACT) if (inPrefix(b, net, prefix)) return refuse(reason)
  // IPv4 reached through IPv6 forms is judged as that IPv4 address.
  if (inPrefix(b, MAPPED, 96)) return embedded("IPv4-mapped form", b, 12)
  if (inPrefix(b, NAT64, 96)) return embedded("NAT64 form", b, 12)
  if (inPrefix(b, TRANSLATED, 96)) {
    const inner = embedded("IPv4-translated form", b, 12)
    return inner.public ? refuse(`IPv4-translated form of ${v4Text(b, 12)} (not routable)`) : inner
  }
  if (inPrefix(b, COMPATIBLE, 96)) {
    const inner = embedded("IPv4-compatible form", b, 12)
    return inner.public ? refuse(`IPv4-compatible form of ${v4Text(b, 12)} (deprecated)`) : inner
  }
  for (const [net, prefix, reason] of V6_RULES) {
    if (!inPrefix(b, net, prefix)) continue
    if (reason === "Teredo tunnel") {
      // Client address is stored inverted in the last 32 bits; name it for the admin.
      const client = Uint8Array.from(b.subarray(12, 16), (x) => x ^ 0xff)
      return refuse(`Teredo tunnel (server ${v4Text(b, 4)}, client ${v4Text(client)})`)
    }
    return refuse(reason)
  }
  if (inPrefix(b, SIX_TO_FOUR, 16)) return embedded("6to4 form", b, 2)
  if (!inPrefix(b, GLOBAL_UNICAST, 3)) return refuse("reserved (outside global unicast 2000::/3)")
  return PUBLIC
}

/** Whether an IP address (v4 dotted quad or v6, brackets allowed) is public unicast. */
export const classifyAddress = (ip: string): Classification => {
  const text = ip.startsWith("[") && ip.endsWith("]") ? ip.slice(1, -1) : ip
  const b4 = parseIPv4(text)
  if (b4) return classifyIPv4Bytes(b4)
  const b6 = parseIPv6(text)
  if (b6) {
    // A zone id scopes the address to one local interface: never a public destination.
    if (text.includes("%")) return refuse("scoped address (zone id)")
    return classifyIPv6Bytes(b6)
  }
  return refuse("not an IP address")
}

// ---------------------------------------------------------------------------------------
// Allowed networks (WEBHOOK_ALLOWED_NETWORKS)

export type ParseNetworksResult =
  | { readonly ok: true; readonly networks: AllowedNetworks }
  | { readonly ok: false; readonly error: string }

const parseNetwork = (entry: string): Network | string => {
  const slash = entry.indexOf("/")
  const addrText = slash === -1 ? entry : entry.slice(0, slash)
  const family = isIP(addrText)
  if (family !== 4 && family !== 6) return `"${entry}" is not an IP address or CIDR network`
  if (addrText.includes("%")) return `"${entry}" has a zone id, which a network cannot have`
  const bytes = family === 4 ? parseIPv4(addrText)! : parseIPv6(addrText)!
  const max = family === 4 ? 32 : 128
  let prefix = max
  if (slash !== -1) {
    const p = entry.slice(slash + 1)
    if (!/^\d{1,3}$/.test(p) || Number(p) > max) return `"${entry}" has a bad prefix length (0 to ${max})`
    prefix = Number(p)
  }
  const masked = Uint8Array.from(bytes, (x, i) => {
    const bits = Math.max(0, Math.min(8, prefix - i * 8))
    return x & ((0xff << (8 - bits)) & 0xff)
  })
  // A set host bit is usually a typo for a different network: say so rather than guess.
  if (!masked.every((x, i) => x === bytes[i])) {
    const base = family === 4 ? v4Text(masked) : ipv6Text(masked)
    return `"${entry}" has host bits set; did you mean ${base}/${prefix}?`
  }
  return { family, bytes, prefix, text: `${addrText}/${prefix}` }
}

const ipv6Text = (b: Uint8Array): string => {
  const groups = Array.from({ length: 8 }, (_, i) => ((b[i * 2]! << 8) | b[i * 2 + 1]!).toString(16))
  // Node prints the canonical short form for us.
  return new URL(`http://[${groups.join(":")}]`).hostname.slice(1, -1)
}

/** Comma-separated CIDRs (v4 and v6; a bare address means that one host). Empty text: none. */
export const parseAllowedNetworks = (text: string): ParseNetworksResult => {
  const networks: Array<Network> = []
  for (const raw of text.split(",")) {
    const entry = raw.trim()
    if (entry === "") continue
    const parsed = parseNetwork(entry)
    if (typeof parsed === "string") return { ok: false, error: `WEBHOOK_ALLOWED_NETWORKS: ${parsed}` }
    networks.push(parsed)
  }
  return { ok: true, networks }
}

/** WEBHOOK_ALLOWED_NETWORKS that does not parse; the message says which entry and why. */
export class AllowedNetworksInvalid extends Data.TaggedError("AllowedNetworksInvalid")<{ readonly message: string }> {}

/** Like parseAllowedNetworks, for startup code that wants an exception on bad config. */
export const parseAllowedNetworksOrThrow = (text: string): AllowedNetworks => {
  const r = parseAllowedNetworks(text)
  if (!r.ok) throw new AllowedNetworksInvalid({ message: r.error })
  return r.networks
}

export const isAllowed = (ip: string, allowed: AllowedNetworks): boolean => {
  if (allowed.length === 0) return false
  const b4 = parseIPv4(ip)
  const b6 = b4 ? undefined : parseIPv6(ip)
  // An IPv4-mapped address is that IPv4 host on a dual-stack socket.
  const mapped = b6 && inPrefix(b6, MAPPED, 96) ? b6.subarray(12, 16) : undefined
  return allowed.some((n) =>
    n.family === 4
      ? (b4 ?? mapped) !== undefined && inPrefix((b4 ?? mapped)!, n.bytes, n.prefix)
      : b6 !== undefined && inPrefix(b6, n.bytes, n.prefix)
  )
}

// ---------------------------------------------------------------------------------------
// URLs

export type WebhookUrl = {
  /** Normalised address (lowercase host, default port dropped, no fragment). */
  readonly href: string
  readonly url: URL
  /** Host name or IP literal without IPv6 brackets. */
  readonly host: string
  readonly port: number
  /** Set when the host is an IP literal (after WHATWG parsing of decimal/hex/octal forms). */
  readonly ipLiteral: 4 | 6 | null
}

export type ParseUrlResult =
  | { readonly ok: true; readonly value: WebhookUrl }
  | { readonly ok: false; readonly error: string }

const MAX_URL_LENGTH = 2048

export const parseWebhookUrl = (input: string): ParseUrlResult => {
  if (typeof input !== "string" || input.trim() === "") return { ok: false, error: "invalid url: empty" }
  if (input.length > MAX_URL_LENGTH)
    return { ok: false, error: `invalid url: longer than ${MAX_URL_LENGTH} characters` }
  let url: URL
  try {
    url = new URL(input)
  } catch {
    return { ok: false, error: "invalid url: not an absolute URL" }
  }
  if (url.protocol !== "https:")
    return { ok: false, error: `refused: only https:// addresses are accepted (got ${url.protocol}//)` }
  if (url.username !== "" || url.password !== "")
    return { ok: false, error: "refused: credentials in the URL are not accepted" }
  if (url.hostname === "") return { ok: false, error: "invalid url: no host" }
  // WHATWG URL takes port 0, which no receiver can listen on.
  if (url.port === "0") return { ok: false, error: "invalid url: port 0 is not a port a receiver can use" }
  url.hash = ""
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  const family = isIP(host)
  return {
    ok: true,
    value: {
      href: url.href,
      url,
      host,
      port: url.port === "" ? 443 : Number(url.port),
      ipLiteral: family === 4 || family === 6 ? family : null
    }
  }
}

// ---------------------------------------------------------------------------------------
// Resolution

// Names are looked up with a deadline, off the shared thread pool, /etc/hosts first
// (resolver.ts); tests give a DNS table of their own.
export const defaultLookup: Lookup = makeLookup()

export type GuardErrorKind = "invalid-url" | "refused" | "dns" | "timeout"

/** `notPublic`: refused for an address (not for the URL's form), which an allowed network would let through. */
type Refusal = { readonly ok: false; readonly kind: GuardErrorKind; readonly error: string; readonly notPublic?: true }

export type CheckResult =
  | { readonly ok: true; readonly target: WebhookUrl; readonly addresses: ReadonlyArray<ResolvedAddress> }
  | Refusal

export type CheckOptions = {
  readonly allowed?: AllowedNetworks
  readonly lookup?: Lookup
  /** Aborts a hanging lookup (the sender passes its overall deadline). */
  readonly signal?: AbortSignal
  /**
   * Reuse a vetted answer for the host while its TTL lasts (at most MAX_RESOLUTION_TTL_MS)
   * instead of resolving again: the sender's choice. Creation checks resolve afresh.
   */
  readonly reuse?: boolean
}

const NO_NETWORKS: AllowedNetworks = []

const vet = (address: string, allowed: AllowedNetworks): Classification => {
  const c = classifyAddress(address)
  return c.public || isAllowed(address, allowed) ? PUBLIC : c
}

const abortable = <A>(p: Promise<A>, signal: AbortSignal | undefined): Promise<A> => {
  if (!signal) return p
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<A>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener("abort", onAbort, { once: true })
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort))
  })
}

type Vetted = { readonly ok: true; readonly addresses: ReadonlyArray<ResolvedAddress> } | Refusal

const vetLiteral = (target: WebhookUrl, allowed: AllowedNetworks): Vetted => {
  const v = vet(target.host, allowed)
  if (!v.public)
    return {
      ok: false,
      kind: "refused",
      error: `refused: ${target.host} is not a public address (${v.reason})`,
      notPublic: true
    }
  return { ok: true, addresses: [{ address: target.host, family: target.ipLiteral! }] }
}

/** Refused when ANY answer is neither public unicast nor inside an allowed network. */
const vetAnswers = (host: string, answers: ReadonlyArray<ResolvedAddress>, allowed: AllowedNetworks): Vetted => {
  const seen = new Set<string>()
  const addresses: Array<ResolvedAddress> = []
  for (const a of answers) {
    const family = isIP(a.address)
    if (family === 0)
      return {
        ok: false,
        kind: "dns",
        error: `dns: ${host} resolved to a non-address "${String(a.address).slice(0, 64)}"`
      }
    const v = vet(a.address, allowed)
    // Which address, and why, stays unsaid: the caller learns nothing of a private network.
    if (!v.public)
      return {
        ok: false,
        kind: "refused",
        error: `refused: ${host} resolves to a private or special address`,
        notPublic: true
      }
    if (!seen.has(a.address)) {
      seen.add(a.address)
      addresses.push({ address: a.address, family: family === 6 ? 6 : 4 })
    }
  }
  if (addresses.length === 0) return { ok: false, kind: "dns", error: `dns: ${host} has no addresses` }
  return { ok: true, addresses }
}

const dnsFailure = (host: string, err: unknown): Refusal => {
  const code = (err as { code?: unknown } | null)?.code
  // DNS that never answered is a timeout, as a receiver that never answers is.
  if (code === "ETIMEOUT")
    return { ok: false, kind: "timeout", error: `timeout: no answer from DNS for ${host} in time (ETIMEOUT)` }
  return {
    ok: false,
    kind: "dns",
    error: `dns: ${host} does not resolve${typeof code === "string" ? ` (${code})` : ""}`
  }
}

/**
 * Parses the URL, resolves its host and refuses it when ANY address is neither public
 * unicast nor inside an allowed network. Never throws, except with `signal`'s reason
 * when it aborts. The returned addresses are the only ones a connection may use.
 */
export const resolveAndCheck = async (input: string, options: CheckOptions = {}): Promise<CheckResult> => {
  const allowed = options.allowed ?? NO_NETWORKS
  const parsed = options.reuse ? parseReused(input) : parseWebhookUrl(input)
  if (!parsed.ok) {
    return { ok: false, kind: parsed.error.startsWith("refused") ? "refused" : "invalid-url", error: parsed.error }
  }
  const target = parsed.value
  const vetted = target.ipLiteral
    ? options.reuse
      ? reusedLiteral(target, allowed)
      : vetLiteral(target, allowed)
    : options.reuse
      ? await reusedResolution(target.host, options.lookup ?? defaultLookup, allowed, options.signal)
      : await freshResolution(target.host, options.lookup ?? defaultLookup, allowed, options.signal)
  return vetted.ok ? { ok: true, target, addresses: vetted.addresses } : vetted
}

/** A host name's addresses, vetted: looked up now, or (reused) the answer still held. */
type VetHost = (
  host: string,
  lookup: Lookup,
  allowed: AllowedNetworks,
  signal: AbortSignal | undefined
) => Promise<Vetted>

const freshResolution: VetHost = async (host, lookup, allowed, signal) => {
  let answers: ReadonlyArray<ResolvedAddress>
  try {
    answers = await abortable(lookup(host), signal)
  } catch (err) {
    if (signal?.aborted) throw signal.reason
    return dnsFailure(host, err)
  }
  return vetAnswers(host, answers, allowed)
}

// ---------------------------------------------------------------------------------------
// Vetted resolutions, reused for their TTL

/** However long a DNS answer says it holds, a delivery resolves its host again after this. */
export const MAX_RESOLUTION_TTL_MS = 30_000
const MAX_HOSTS = 4_096

type Resolution = {
  /** performance.now() from which the answer is not used again (Infinity while pending). */
  until: number
  pending: boolean
  readonly answers: Promise<ReadonlyArray<ResolvedAddress>>
  /** The answers once they are in: read without waiting on the promise again. */
  settled?: ReadonlyArray<ResolvedAddress>
  /** The answers vetted once, for the allowed networks they were vetted against. */
  vetted?: { readonly allowed: AllowedNetworks; readonly result: Vetted }
}

// Per lookup function, so that two lookups (tests inject DNS tables) never share answers.
let resolutions = new WeakMap<Lookup, Map<string, Resolution>>()

/** Seconds of the shortest TTL among the answers, in ms, capped; unknown TTLs mean the cap. */
const holdMs = (answers: ReadonlyArray<ResolvedAddress>): number => {
  let ms = MAX_RESOLUTION_TTL_MS
  for (const a of answers) {
    if (typeof a.ttl === "number" && a.ttl >= 0 && a.ttl * 1000 < ms) ms = a.ttl * 1000
  }
  return ms
}

const resolve = (cache: Map<string, Resolution>, host: string, lookup: Lookup): Resolution => {
  const started = performance.now()
  const entry: Resolution = {
    until: Infinity,
    pending: true,
    answers: new Promise<ReadonlyArray<ResolvedAddress>>((ok) => ok(lookup(host))).then(
      (answers) => {
        // The TTL counts from the question: an answer is never kept longer than it holds.
        entry.pending = false
        entry.settled = answers
        entry.until = started + holdMs(answers)
        return answers
      },
      (err: unknown) => {
        entry.pending = false
        forget(cache, host, entry) // a failed lookup is not kept
        throw err
      }
    )
  }
  entry.answers.catch(() => undefined) // every waiter handles it; none may be left
  if (cache.size >= MAX_HOSTS) cache.delete(cache.keys().next().value!)
  cache.set(host, entry)
  return entry
}

const forget = (cache: Map<string, Resolution>, host: string, entry: Resolution) => {
  if (cache.get(host) === entry) cache.delete(host)
}

/**
 * The host's vetted answer while it holds, else a new lookup (one for all who ask meanwhile),
 * vetted before any connection may use it. Only answers that pass are kept: a refusal or a
 * failure is asked again next time, so a fixed name is not refused for longer than its TTL.
 */
const reusedResolution: VetHost = async (host, lookup, allowed, signal) => {
  let cache = resolutions.get(lookup)
  if (!cache) resolutions.set(lookup, (cache = new Map()))
  const held = cache.get(host)
  const entry = held && held.until > performance.now() ? held : resolve(cache, host, lookup)
  let answers = entry.settled
  if (answers === undefined) {
    try {
      answers = await abortable(entry.answers, signal)
    } catch (err) {
      if (signal?.aborted) {
        // A lookup that outlived a deadline is not waited on again by the next delivery.
        if (entry.pending) forget(cache, host, entry)
        throw signal.reason
      }
      return dnsFailure(host, err)
    }
  }
  if (entry.vetted?.allowed !== allowed) entry.vetted = { allowed, result: vetAnswers(host, answers, allowed) }
  const result = entry.vetted.result
  if (!result.ok) forget(cache, host, entry)
  return result
}

// A delivery's URL is parsed once: the same few receiver URLs come back for every delivery.
// The parsed URL is shared, and never changed after parsing.
const parsedUrls = new Map<string, ParseUrlResult>()

const parseReused = (input: string): ParseUrlResult => {
  let parsed = parsedUrls.get(input)
  if (parsed === undefined) {
    parsed = parseWebhookUrl(input)
    if (parsedUrls.size >= MAX_HOSTS) parsedUrls.clear()
    parsedUrls.set(input, parsed)
  }
  return parsed
}

// An IP literal needs no DNS; its vetting is kept with its parsed URL.
const literalVets = new WeakMap<WebhookUrl, { readonly allowed: AllowedNetworks; readonly result: Vetted }>()

const reusedLiteral = (target: WebhookUrl, allowed: AllowedNetworks): Vetted => {
  let vetted = literalVets.get(target)
  if (vetted?.allowed !== allowed) {
    vetted = { allowed, result: vetLiteral(target, allowed) }
    literalVets.set(target, vetted)
  }
  return vetted.result
}

/** Forgets every reused resolution (tests, and shutdown with the sender's connections). */
export const forgetResolutions = (): void => {
  parsedUrls.clear()
  resolutions = new WeakMap()
}
