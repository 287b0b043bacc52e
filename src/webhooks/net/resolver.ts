// Name lookups for receivers' addresses, with a deadline and off the shared thread pool.
// `dns.lookup` (getaddrinfo) runs on libuv's 4-thread pool with no deadline: four names that
// never answer would stall every lookup of the process, file reads and crypto with them.
// c-ares (`dns.promises.Resolver`) takes a timeout and tries and does not use the pool, but
// does not read /etc/hosts, so names listed there are answered from it first, as
// getaddrinfo would ("files" before "dns"); `localhost` and `*.localhost` are loopback
// whatever the file says (RFC 6761). Answers carry their DNS TTLs (the guard reuses a vetted
// answer that long, at most 30 s).
import { Resolver } from "node:dns/promises"
import { readFileSync, statSync } from "node:fs"
import { isIP } from "node:net"
import type { Lookup, ResolvedAddress } from "./address-guard.ts"

export type LookupOptions = {
  /** c-ares: the first try's time limit in ms (each next try doubles it). */
  readonly timeoutMs?: number
  readonly tries?: number
  /** The whole lookup, both families, gives up after this (ETIMEOUT). */
  readonly deadlineMs?: number
  /** The hosts file (tests give their own). */
  readonly hostsPath?: string
  /** DNS servers ("ip:port"), in place of the system's (tests). */
  readonly servers?: ReadonlyArray<string>
}

export const LOOKUP_DEFAULTS = { timeoutMs: 1_500, tries: 2, deadlineMs: 5_000, hostsPath: "/etc/hosts" } as const

/** A lookup failure, with the code getaddrinfo would give (ENOTFOUND, ETIMEOUT...). */
export class LookupFailed extends Error {
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

// ---------------------------------------------------------------------------------------
// The hosts file

/** Names (lower case) to their addresses, as a hosts file lists them. */
export const parseHosts = (text: string): ReadonlyMap<string, ReadonlyArray<ResolvedAddress>> => {
  const out = new Map<string, Array<ResolvedAddress>>()
  for (const raw of text.split("\n")) {
    const line = raw.replace(/#.*/, "").trim()
    if (line === "") continue
    const [address, ...names] = line.split(/\s+/)
    const family = isIP(address!)
    if (family === 0 || names.length === 0) continue
    for (const n of names) {
      const name = n.toLowerCase().replace(/\.$/, "")
      const list = out.get(name) ?? []
      if (!list.some((a) => a.address === address)) list.push({ address: address!, family: family === 6 ? 6 : 4 })
      out.set(name, list)
    }
  }
  return out
}

/**
 * The hosts file, read again when it changed (looked at no more than once a second). Read
 * synchronously: a small local file, and the asynchronous calls would queue on the very
 * thread pool this module keeps lookups off.
 */
const hostsReader = (path: string) => {
  let table: ReadonlyMap<string, ReadonlyArray<ResolvedAddress>> = new Map()
  let mtimeMs = -1
  let checkedAt = Number.NEGATIVE_INFINITY
  return (name: string): ReadonlyArray<ResolvedAddress> | undefined => {
    if (performance.now() - checkedAt >= 1_000) {
      checkedAt = performance.now()
      try {
        const m = statSync(path).mtimeMs
        if (m !== mtimeMs) {
          table = parseHosts(readFileSync(path, "utf8"))
          mtimeMs = m
        }
      } catch {
        table = new Map()
        mtimeMs = -1
      }
    }
    return table.get(name)
  }
}

// ---------------------------------------------------------------------------------------
// The lookup

const LOOPBACK: ReadonlyArray<ResolvedAddress> = [
  { address: "127.0.0.1", family: 4 },
  { address: "::1", family: 6 }
]

/** Codes meaning the name has no address (as opposed to DNS not answering). */
const ABSENT = new Set(["ENOTFOUND", "ENODATA", "NOTFOUND", "NODATA", "ENONAME"])

/** A name's addresses: the hosts file's, else DNS's A and AAAA records with their TTLs, within the deadline. */
export const makeLookup = (options: LookupOptions = {}): Lookup => {
  const o = { ...LOOKUP_DEFAULTS, ...options }
  const resolver = new Resolver({ timeout: o.timeoutMs, tries: o.tries })
  if (options.servers) resolver.setServers([...options.servers])
  const hosts = hostsReader(o.hostsPath)
  return async (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, "")
    const listed = hosts(name)
    if (listed !== undefined) return listed
    if (name === "localhost" || name.endsWith(".localhost")) return LOOPBACK
    let timer: ReturnType<typeof setTimeout> | undefined
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new LookupFailed("ETIMEOUT", `no answer for ${name} within ${o.deadlineMs} ms`)),
        o.deadlineMs
      )
    })
    try {
      const [a, aaaa] = await Promise.race([
        Promise.allSettled([resolver.resolve4(name, { ttl: true }), resolver.resolve6(name, { ttl: true })]),
        deadline
      ])
      const answers: Array<ResolvedAddress> = [
        ...(a.status === "fulfilled"
          ? a.value.map((r) => ({ address: r.address, family: 4 as const, ttl: r.ttl }))
          : []),
        ...(aaaa.status === "fulfilled"
          ? aaaa.value.map((r) => ({ address: r.address, family: 6 as const, ttl: r.ttl }))
          : [])
      ]
      if (answers.length > 0) return answers
      const codes = [a, aaaa].map((r) =>
        r.status === "rejected" ? String((r.reason as { code?: unknown })?.code ?? "EAI_FAIL") : "ENODATA"
      )
      // Neither family answered: the name is absent only if DNS said so for both.
      const code = codes.every((c) => ABSENT.has(c)) ? "ENOTFOUND" : (codes.find((c) => !ABSENT.has(c)) ?? "EAI_FAIL")
      throw new LookupFailed(code, `${name}: ${code}`)
    } finally {
      clearTimeout(timer)
    }
  }
}
