// Which client sent a request, for limits kept per client (failed authentications: see
// docs/design.md). Behind a proxy every request comes from the proxy's address, and only the
// proxy knows the client's: it says so in X-Forwarded-For, which any client can also send. So
// the header is read only when TRUST_PROXY says who the proxies are, and read from the right,
// where trusted proxies append: the client is the right-most address not itself a trusted
// proxy. Addresses the client wrote further left are never used. Pure.
import { BlockList, isIP } from "node:net"

/** TRUST_PROXY, parsed: none (the socket's address), the socket's peer, or proxies by network. */
export type TrustProxy =
  | { readonly _tag: "None" }
  /** `true`: the socket's peer is a proxy, and nothing it forwards is. */
  | { readonly _tag: "Peer" }
  /** Proxies are the addresses in these networks, at any depth. */
  | { readonly _tag: "Networks"; readonly networks: BlockList }

export const TRUST_NONE: TrustProxy = { _tag: "None" }

export const TRUST_PROXY_USAGE =
  "TRUST_PROXY must be false (the default: the client is the connection's address), true (the connection " +
  "comes from a proxy: the client is the last address it adds to X-Forwarded-For), or the proxies' networks " +
  "as addresses or CIDRs separated by commas (e.g. 10.0.0.0/8,fd00::/8)"

/** An IPv4-mapped IPv6 address (a dual-stack socket's) as the IPv4 address it is. */
const unmapped = (address: string): string =>
  address.startsWith("::ffff:") && isIP(address.slice(7)) === 4 ? address.slice(7) : address

/** TRUST_PROXY's value, or why it is not one (the message names the entry). */
export const parseTrustProxy = (text: string): TrustProxy | { readonly error: string } => {
  const value = text.trim().toLowerCase()
  if (value === "" || value === "false") return TRUST_NONE
  if (value === "true") return { _tag: "Peer" }
  const networks = new BlockList()
  for (const raw of value.split(",")) {
    const entry = raw.trim()
    if (entry === "") continue
    const slash = entry.indexOf("/")
    const address = slash < 0 ? entry : entry.slice(0, slash)
    const family = isIP(address)
    const bits = family === 4 ? 32 : 128
    const prefix = slash < 0 ? bits : /^\d{1,3}$/.test(entry.slice(slash + 1)) ? Number(entry.slice(slash + 1)) : -1
    if (family === 0 || prefix < 0 || prefix > bits)
      return { error: `${TRUST_PROXY_USAGE}; "${entry}" is not an IP address or network` }
    networks.addSubnet(address, prefix, family === 4 ? "ipv4" : "ipv6")
  }
  return { _tag: "Networks", networks }
}

/** One X-Forwarded-For entry's address (a port or IPv6 brackets taken off), or undefined when it is none. */
export const forwardedAddress = (entry: string): string | undefined => {
  let a = entry.trim()
  if (a.startsWith("[")) {
    const end = a.indexOf("]")
    a = end > 0 ? a.slice(1, end) : a
  } else if (a.indexOf(":") === a.lastIndexOf(":") && a.includes(".")) {
    const colon = a.indexOf(":")
    if (colon > 0) a = a.slice(0, colon) // IPv4 with a port
  }
  return isIP(a) === 0 ? undefined : unmapped(a)
}

const trusted = (networks: BlockList, address: string): boolean =>
  networks.check(address, isIP(address) === 6 ? "ipv6" : "ipv4")

/**
 * The client's address: the socket's, or under TRUST_PROXY the right-most X-Forwarded-For
 * address not itself trusted. An entry that is no address ends the walk at the last address
 * known (a trusted proxy's): what a client wrote never picks a limit's bucket.
 */
export const clientAddress = (
  socket: string | undefined,
  forwardedFor: string | undefined,
  trust: TrustProxy
): string | undefined => {
  const peer = socket === undefined ? undefined : unmapped(socket)
  if (trust._tag === "None" || forwardedFor === undefined || forwardedFor === "") return peer
  const entries = forwardedFor.split(",")
  if (trust._tag === "Peer") return forwardedAddress(entries[entries.length - 1]!) ?? peer
  if (peer === undefined || isIP(peer) === 0 || !trusted(trust.networks, peer)) return peer
  let client = peer
  for (let i = entries.length - 1; i >= 0; i--) {
    const next = forwardedAddress(entries[i]!)
    if (next === undefined) return client
    client = next
    if (!trusted(trust.networks, next)) return next
  }
  return client
}

/** The eight groups of an IPv6 address, or undefined (an embedded IPv4 tail is left to the caller). */
const groups = (address: string): Array<string> | undefined => {
  const halves = address.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] === "" ? [] : halves[0]!.split(":")
  const tail = halves.length === 1 || halves[1] === "" ? [] : halves[1]!.split(":")
  const fill = halves.length === 2 ? 8 - head.length - tail.length : 0
  const all = [...head, ...Array.from({ length: fill }, () => "0"), ...tail]
  return all.length === 8 && all.every((g) => /^[0-9a-f]{1,4}$/.test(g)) ? all : undefined
}

/**
 * The bucket a client's address counts in: an IPv4 address itself, an IPv6 address by its /64
 * (one subscriber's network: a client there can use any of 2^64 addresses).
 */
export const clientKey = (address: string | undefined): string => {
  if (address === undefined) return "-"
  const a = unmapped(address.toLowerCase())
  if (isIP(a) !== 6) return a
  const g = groups(a)
  return g === undefined
    ? a
    : `${g
        .slice(0, 4)
        .map((x) => Number.parseInt(x, 16).toString(16))
        .join(":")}::/64`
}
