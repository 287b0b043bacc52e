import { afterEach, beforeEach, describe, expect, it, vi } from "vitest"
import {
  classifyAddress,
  forgetResolutions,
  isAllowed,
  MAX_RESOLUTION_TTL_MS,
  parseAllowedNetworks,
  parseAllowedNetworksOrThrow,
  parseWebhookUrl,
  resolveAndCheck,
  type Lookup
} from "../../../src/webhooks/net/address-guard.ts"

// [address, expected reason fragment]
const NOT_PUBLIC: ReadonlyArray<readonly [string, string]> = [
  ["0.0.0.0", "this network"],
  ["0.1.2.3", "this network"],
  ["127.0.0.1", "loopback"],
  ["127.255.255.254", "loopback"],
  ["10.0.0.5", "private network"],
  ["172.16.0.1", "private network"],
  ["172.31.255.255", "private network"],
  ["192.168.1.1", "private network"],
  ["169.254.169.254", "cloud metadata"],
  ["169.254.1.1", "link-local"],
  ["100.64.0.1", "carrier-grade NAT"],
  ["100.100.100.200", "carrier-grade NAT"], // Alibaba Cloud metadata
  ["100.127.255.255", "carrier-grade NAT"],
  ["192.0.0.8", "IETF protocol assignments"],
  ["192.0.2.10", "documentation"],
  ["192.88.99.1", "6to4 relay"],
  ["198.18.0.1", "benchmarking"],
  ["198.19.255.255", "benchmarking"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "broadcast"],
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["::ffff:127.0.0.1", "IPv4-mapped form of 127.0.0.1: loopback"],
  ["::ffff:7f00:1", "IPv4-mapped form of 127.0.0.1: loopback"],
  ["::ffff:a9fe:a9fe", "IPv4-mapped form of 169.254.169.254: cloud metadata"],
  ["::ffff:0:7f00:1", "IPv4-translated form of 127.0.0.1"],
  ["::ffff:0:808:808", "IPv4-translated form of 8.8.8.8 (not routable)"],
  ["::127.0.0.1", "IPv4-compatible form of 127.0.0.1: loopback"],
  ["::8.8.8.8", "IPv4-compatible form of 8.8.8.8 (deprecated)"],
  ["64:ff9b::7f00:1", "NAT64 form of 127.0.0.1: loopback"],
  ["64:ff9b::10.0.0.1", "NAT64 form of 10.0.0.1: private network"],
  ["64:ff9b::a9fe:a9fe", "NAT64 form of 169.254.169.254"],
  ["64:ff9b:1::a00:1", "local-use NAT64"],
  ["64:ff9b:1:ffff::1", "local-use NAT64"],
  ["2002:7f00:1::", "6to4 form of 127.0.0.1: loopback"],
  ["2002:a00:1::1", "6to4 form of 10.0.0.1: private network"],
  ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo tunnel (server 65.54.227.120, client 192.0.2.45)"],
  ["2001:2::1", "IETF protocol assignments"],
  ["2001:db8::1", "documentation"],
  ["3fff::1", "documentation"],
  ["100::1", "discard-only"],
  ["5f00::1", "SRv6"],
  ["fc00::1", "unique-local"],
  ["fd00:ec2::254", "unique-local"], // AWS IPv6 metadata
  ["fe80::1", "link-local"],
  ["febf::1", "link-local"],
  ["fec0::1", "site-local"],
  ["ff02::1", "multicast"],
  ["ff0e::1", "multicast"],
  ["1::1", "reserved"],
  ["4000::1", "reserved"],
  ["fe80::1%eth0", "zone id"],
  ["[::1]", "loopback"],
  ["localhost", "not an IP address"],
  ["1.2.3", "not an IP address"],
  ["", "not an IP address"]
]

const PUBLIC = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.216.34",
  "100.63.255.255", // just below CGNAT
  "100.128.0.0", // just above CGNAT
  "172.15.255.255",
  "172.32.0.0",
  "169.253.255.255",
  "192.0.1.1",
  "198.17.255.255",
  "198.20.0.0",
  "223.255.255.255",
  "2606:4700:4700::1111",
  "2a00:1450:4001:82a::200e",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808", // NAT64 of a public address is how IPv6-only hosts reach it
  "2002:808:808::1",
  "[2606:4700:4700::1111]"
]

describe("classifyAddress", () => {
  it.each(NOT_PUBLIC)("refuses %s (%s)", (ip, reason) => {
    const c = classifyAddress(ip)
    expect(c.public).toBe(false)
    if (!c.public) expect(c.reason).toContain(reason)
  })

  it.each(PUBLIC)("accepts %s", (ip) => {
    expect(classifyAddress(ip)).toEqual({ public: true })
  })
})

describe("parseAllowedNetworks", () => {
  it("is empty for empty text", () => {
    expect(parseAllowedNetworks("")).toEqual({ ok: true, networks: [] })
    expect(parseAllowedNetworks(" , ")).toEqual({ ok: true, networks: [] })
  })

  it("parses v4 and v6 CIDRs and bare addresses", () => {
    const r = parseAllowedNetworks("127.0.0.0/8, 10.1.0.0/16,fd00::/8 ,192.168.1.7, ::1")
    expect(r.ok).toBe(true)
    if (!r.ok) return
    expect(r.networks.map((n) => n.text)).toEqual([
      "127.0.0.0/8",
      "10.1.0.0/16",
      "fd00::/8",
      "192.168.1.7/32",
      "::1/128"
    ])
    expect(isAllowed("127.9.9.9", r.networks)).toBe(true)
    expect(isAllowed("::ffff:127.0.0.1", r.networks)).toBe(true) // mapped form of an allowed v4 host
    expect(isAllowed("10.1.200.3", r.networks)).toBe(true)
    expect(isAllowed("10.2.0.1", r.networks)).toBe(false)
    expect(isAllowed("fd12:3456::1", r.networks)).toBe(true)
    expect(isAllowed("fe80::1", r.networks)).toBe(false)
    expect(isAllowed("192.168.1.7", r.networks)).toBe(true)
    expect(isAllowed("192.168.1.8", r.networks)).toBe(false)
    expect(isAllowed("::1", r.networks)).toBe(true)
  })

  it.each([
    ["10.0.0.0/33", '"10.0.0.0/33" has a bad prefix length'],
    ["10.0.0.0/x", "bad prefix length"],
    ["10.0.0.0/", "bad prefix length"],
    ["fd00::/129", "bad prefix length (0 to 128)"],
    ["localhost", '"localhost" is not an IP address or CIDR network'],
    ["10.0.0/8", '"10.0.0/8" is not an IP address'],
    ["10.0.0.5/8", "has host bits set; did you mean 10.0.0.0/8?"],
    ["fd00::1/8", "did you mean fd00::/8?"],
    ["fe80::1%eth0/64", "zone id"]
  ])("names the bad entry in %s", (text, message) => {
    const r = parseAllowedNetworks(`127.0.0.0/8, ${text}`)
    expect(r.ok).toBe(false)
    if (!r.ok) {
      expect(r.error).toContain(message)
      expect(r.error).toMatch(/^WEBHOOK_ALLOWED_NETWORKS: /)
    }
    expect(() => parseAllowedNetworksOrThrow(text)).toThrow(message)
  })
})

describe("parseWebhookUrl", () => {
  it("normalises", () => {
    const r = parseWebhookUrl("HTTPS://Hooks.Example.COM:443/a/b?x=1#frag")
    expect(r).toMatchObject({
      ok: true,
      value: { href: "https://hooks.example.com/a/b?x=1", host: "hooks.example.com", port: 443, ipLiteral: null }
    })
  })

  it("turns numeric IPv4 forms into the address they mean", () => {
    for (const form of ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "0x7f.1"]) {
      const r = parseWebhookUrl(`https://${form}/`)
      expect(r).toMatchObject({ ok: true, value: { host: "127.0.0.1", ipLiteral: 4 } })
    }
    expect(parseWebhookUrl("https://[::ffff:127.0.0.1]:8443/")).toMatchObject({
      ok: true,
      value: { host: "::ffff:7f00:1", port: 8443, ipLiteral: 6 }
    })
  })

  it.each([
    ["http://example.com/", "refused: only https://"],
    ["ftp://example.com/", "refused: only https://"],
    ["file:///etc/passwd", "refused: only https://"],
    ["javascript:alert(1)", "refused: only https://"],
    ["https://user:pass@example.com/", "refused: credentials"],
    ["https://user@example.com/", "refused: credentials"],
    ["not a url", "invalid url"],
    ["https://", "invalid url"],
    ["", "invalid url: empty"],
    ["https://93.184.215.14:0/", "invalid url: port 0"],
    ["https://example.com:00/", "invalid url: port 0"],
    [`https://example.com/${"a".repeat(3000)}`, "longer than 2048"]
  ])("refuses %s", (url, message) => {
    const r = parseWebhookUrl(url)
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toContain(message)
  })
})

describe("resolveAndCheck", () => {
  const table = (answers: Record<string, ReadonlyArray<string>>) => {
    const calls: Array<string> = []
    const lookup: Lookup = async (host) => {
      calls.push(host)
      const a = answers[host]
      if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" })
      return a.map((address) => ({ address, family: address.includes(":") ? (6 as const) : (4 as const) }))
    }
    return { lookup, calls }
  }

  it("refuses a name that resolves to a private address, naming the name and not the address", async () => {
    const { lookup } = table({ "webhook-test.local": ["10.0.0.5"], "meta.test": ["169.254.169.254"] })
    const r = await resolveAndCheck("https://webhook-test.local/hook", { lookup })
    expect(r).toEqual({
      ok: false,
      kind: "refused",
      error: "refused: webhook-test.local resolves to a private or special address",
      notPublic: true
    })
    // Neither which address nor what kind of network: a caller learns nothing of what is inside.
    const m = await resolveAndCheck("https://meta.test/", { lookup })
    expect(m).toMatchObject({ ok: false, error: "refused: meta.test resolves to a private or special address" })
    if (!m.ok) expect(m.error).not.toMatch(/169\.254|metadata|link-local/)
  })

  it("refuses when any one of several addresses is not public", async () => {
    const { lookup } = table({ "mixed.example": ["93.184.216.34", "2606:4700::1", "fd00::7"] })
    const r = await resolveAndCheck("https://mixed.example/", { lookup })
    expect(r).toMatchObject({
      ok: false,
      kind: "refused",
      error: "refused: mixed.example resolves to a private or special address"
    })
  })

  it("returns the vetted addresses, deduplicated, in resolver order", async () => {
    const { lookup, calls } = table({ "ok.example": ["93.184.216.34", "2606:4700::1", "93.184.216.34"] })
    const r = await resolveAndCheck("https://ok.example/x", { lookup })
    expect(r).toMatchObject({
      ok: true,
      addresses: [
        { address: "93.184.216.34", family: 4 },
        { address: "2606:4700::1", family: 6 }
      ]
    })
    expect(calls).toEqual(["ok.example"])
  })

  it("does not resolve IP literals", async () => {
    const { lookup, calls } = table({})
    expect(await resolveAndCheck("https://2130706433/", { lookup })).toEqual({
      ok: false,
      kind: "refused",
      error: "refused: 127.0.0.1 is not a public address (loopback)",
      notPublic: true
    })
    expect(await resolveAndCheck("https://8.8.8.8/", { lookup })).toMatchObject({
      ok: true,
      addresses: [{ address: "8.8.8.8", family: 4 }]
    })
    expect(calls).toEqual([])
  })

  it("lets allowed networks through, and only those", async () => {
    const allowed = parseAllowedNetworksOrThrow("127.0.0.0/8")
    const { lookup } = table({ "receiver.test": ["127.0.0.1"], "both.test": ["127.0.0.1", "10.0.0.1"] })
    expect(await resolveAndCheck("https://receiver.test/", { lookup, allowed })).toMatchObject({
      ok: true,
      addresses: [{ address: "127.0.0.1" }]
    })
    expect(await resolveAndCheck("https://[::ffff:127.0.0.1]/", { lookup, allowed })).toMatchObject({ ok: true })
    expect(await resolveAndCheck("https://both.test/", { lookup, allowed })).toMatchObject({
      ok: false,
      error: "refused: both.test resolves to a private or special address"
    })
    expect(await resolveAndCheck("https://[::1]/", { lookup, allowed })).toMatchObject({ ok: false, kind: "refused" })
  })

  it("reports names that do not resolve, or resolve to nothing", async () => {
    const { lookup } = table({ "empty.test": [] })
    expect(await resolveAndCheck("https://nowhere.test/", { lookup })).toEqual({
      ok: false,
      kind: "dns",
      error: "dns: nowhere.test does not resolve (ENOTFOUND)"
    })
    expect(await resolveAndCheck("https://empty.test/", { lookup })).toEqual({
      ok: false,
      kind: "dns",
      error: "dns: empty.test has no addresses"
    })
  })

  it("refuses localhost through the real resolver", async () => {
    const r = await resolveAndCheck("https://localhost:8443/")
    expect(r.ok).toBe(false)
    if (!r.ok) expect(r.error).toBe("refused: localhost resolves to a private or special address")
  })

  it("gives up on a hanging lookup when the signal aborts", async () => {
    const lookup: Lookup = () => new Promise(() => undefined)
    await expect(
      resolveAndCheck("https://slow.test/", { lookup, signal: AbortSignal.timeout(50) })
    ).rejects.toMatchObject({ name: "TimeoutError" })
  })
})

describe("reused resolutions (deliveries)", () => {
  // Only performance.now() is faked: it is the clock a kept answer expires by.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["performance"] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  /** A mutable DNS table with TTLs (seconds; undefined: the lookup does not say), recording every question. */
  const dns = (answers: Record<string, ReadonlyArray<string>>, ttl?: number) => {
    const table = { ...answers }
    const calls: Array<string> = []
    const lookup: Lookup = async (host) => {
      calls.push(host)
      const a = table[host]
      if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: "ENOTFOUND" })
      return a.map((address) => ({
        address,
        family: address.includes(":") ? (6 as const) : (4 as const),
        ...(ttl === undefined ? {} : { ttl })
      }))
    }
    return { lookup, calls, table }
  }
  const reuse = (
    url: string,
    lookup: Lookup,
    extra: { allowed?: ReturnType<typeof parseAllowedNetworksOrThrow>; signal?: AbortSignal } = {}
  ) => resolveAndCheck(url, { lookup, reuse: true, ...extra })

  it("keeps a vetted answer for its TTL without asking again, then asks again", async () => {
    const d = dns({ "hooks.example": ["93.184.216.34"] }, 5)
    expect(await reuse("https://hooks.example/a", d.lookup)).toMatchObject({
      ok: true,
      addresses: [{ address: "93.184.216.34" }]
    })
    expect(await reuse("https://hooks.example/b?x=1", d.lookup)).toMatchObject({
      ok: true,
      addresses: [{ address: "93.184.216.34" }]
    })
    vi.advanceTimersByTime(4_990)
    expect(await reuse("https://hooks.example:8443/c", d.lookup)).toMatchObject({ ok: true })
    expect(d.calls).toEqual(["hooks.example"])
    vi.advanceTimersByTime(20)
    expect(await reuse("https://hooks.example/a", d.lookup)).toMatchObject({ ok: true })
    expect(d.calls).toEqual(["hooks.example", "hooks.example"])
  })

  it("keeps an answer at most 30 s, whatever its TTL, and 30 s when the lookup gives none", async () => {
    expect(MAX_RESOLUTION_TTL_MS).toBe(30_000)
    for (const ttl of [86_400, undefined]) {
      const d = dns({ "long.example": ["93.184.216.34"] }, ttl)
      await reuse("https://long.example/", d.lookup)
      vi.advanceTimersByTime(29_990)
      await reuse("https://long.example/", d.lookup)
      expect(d.calls).toHaveLength(1)
      vi.advanceTimersByTime(20)
      await reuse("https://long.example/", d.lookup)
      expect(d.calls).toHaveLength(2)
    }
  })

  it("asks every time when the TTL is 0", async () => {
    const d = dns({ "zero.example": ["93.184.216.34"] }, 0)
    for (let i = 0; i < 3; i++) expect(await reuse("https://zero.example/", d.lookup)).toMatchObject({ ok: true })
    expect(d.calls).toHaveLength(3)
  })

  it("vets a changed answer after the TTL: a rebinding to a private address is refused", async () => {
    const d = dns({ "rebind.example": ["93.184.216.34"] }, 2)
    expect(await reuse("https://rebind.example/", d.lookup)).toMatchObject({ ok: true })
    d.table["rebind.example"] = ["10.0.0.5"]
    // Still the answer that was vetted: DNS changing meanwhile redirects nothing.
    expect(await reuse("https://rebind.example/", d.lookup)).toMatchObject({
      ok: true,
      addresses: [{ address: "93.184.216.34" }]
    })
    vi.advanceTimersByTime(2_001)
    expect(await reuse("https://rebind.example/", d.lookup)).toEqual({
      ok: false,
      kind: "refused",
      error: "refused: rebind.example resolves to a private or special address",
      notPublic: true
    })
    expect(d.calls).toHaveLength(2)
  })

  it("does not keep a refusal or a failed lookup: the next delivery asks again", async () => {
    const d = dns({ "fixed.example": ["10.0.0.5"] }, 30)
    expect(await reuse("https://fixed.example/", d.lookup)).toMatchObject({ ok: false, kind: "refused" })
    d.table["fixed.example"] = ["93.184.216.34"]
    expect(await reuse("https://fixed.example/", d.lookup)).toMatchObject({ ok: true })
    expect(await reuse("https://later.example/", d.lookup)).toMatchObject({
      ok: false,
      kind: "dns",
      error: "dns: later.example does not resolve (ENOTFOUND)"
    })
    d.table["later.example"] = ["93.184.216.34"]
    expect(await reuse("https://later.example/", d.lookup)).toMatchObject({ ok: true })
    d.table["empty.example"] = []
    expect(await reuse("https://empty.example/", d.lookup)).toMatchObject({
      ok: false,
      kind: "dns",
      error: "dns: empty.example has no addresses"
    })
    expect(await reuse("https://empty.example/", d.lookup)).toMatchObject({ ok: false, kind: "dns" })
    expect(d.calls).toEqual([
      "fixed.example",
      "fixed.example",
      "later.example",
      "later.example",
      "empty.example",
      "empty.example"
    ])
  })

  it("vets a kept answer again, without a lookup, for other allowed networks", async () => {
    const loopback = parseAllowedNetworksOrThrow("127.0.0.0/8")
    const d = dns({ "receiver.test": ["127.0.0.1"] }, 30)
    expect(await reuse("https://receiver.test/", d.lookup, { allowed: loopback })).toMatchObject({ ok: true })
    expect(await reuse("https://receiver.test/", d.lookup, { allowed: [] })).toMatchObject({
      ok: false,
      error: "refused: receiver.test resolves to a private or special address"
    })
    expect(await reuse("https://receiver.test/", d.lookup)).toMatchObject({ ok: false, kind: "refused" })
    expect(d.calls).toHaveLength(2) // the refusal dropped the kept answer
    // An IP literal's vetting is kept too, and made again for other allowed networks.
    expect(await reuse("https://127.0.0.1:8443/", d.lookup, { allowed: loopback })).toMatchObject({ ok: true })
    expect(await reuse("https://127.0.0.1:8443/", d.lookup, { allowed: [] })).toMatchObject({
      ok: false,
      error: "refused: 127.0.0.1 is not a public address (loopback)",
      notPublic: true
    })
    expect(await reuse("https://127.0.0.1:8443/", d.lookup, { allowed: loopback })).toMatchObject({ ok: true })
    expect(d.calls).toHaveLength(2)
  })

  it("gives deliveries that ask at once one lookup", async () => {
    let release = (): void => undefined
    const calls: Array<string> = []
    const lookup: Lookup = async (host) => {
      calls.push(host)
      await new Promise<void>((res) => (release = res))
      return [{ address: "93.184.216.34", family: 4, ttl: 30 }]
    }
    const all = Promise.all(Array.from({ length: 5 }, (_, i) => reuse(`https://busy.example/${i}`, lookup)))
    await Promise.resolve()
    release()
    expect((await all).every((r) => r.ok)).toBe(true)
    expect(calls).toEqual(["busy.example"])
  })

  it("does not make the next delivery wait on a lookup that outlived a deadline", async () => {
    const calls: Array<string> = []
    const lookup: Lookup = async (host) => {
      calls.push(host)
      if (calls.length === 1) return new Promise(() => undefined)
      return [{ address: "93.184.216.34", family: 4 }]
    }
    const deadline = new AbortController()
    const first = reuse("https://hang.example/", lookup, { signal: deadline.signal })
    deadline.abort(new Error("deadline"))
    await expect(first).rejects.toThrow("deadline")
    expect(await reuse("https://hang.example/", lookup)).toMatchObject({ ok: true })
    expect(calls).toHaveLength(2)
  })

  it("never shares answers between two lookups, needs none for an IP literal, and creation always asks", async () => {
    const a = dns({ "same.example": ["93.184.216.34"] }, 30)
    const b = dns({ "same.example": ["10.0.0.5"] }, 30)
    expect(await reuse("https://same.example/", a.lookup)).toMatchObject({ ok: true })
    expect(await reuse("https://same.example/", b.lookup)).toMatchObject({ ok: false, kind: "refused" })
    expect(await reuse("https://8.8.8.8/", a.lookup)).toMatchObject({
      ok: true,
      addresses: [{ address: "8.8.8.8", family: 4 }]
    })
    expect(await reuse("https://[::1]/", a.lookup)).toMatchObject({
      ok: false,
      error: "refused: ::1 is not a public address (loopback)"
    })
    expect(a.calls).toEqual(["same.example"])
    // Without reuse (endpoint creation, the API's checks) every check is a fresh lookup.
    await resolveAndCheck("https://same.example/", { lookup: a.lookup })
    await resolveAndCheck("https://same.example/", { lookup: a.lookup })
    expect(a.calls).toHaveLength(3)
  })

  it("forgets every kept answer on request", async () => {
    const d = dns({ "forget.example": ["93.184.216.34"] }, 30)
    await reuse("https://forget.example/", d.lookup)
    forgetResolutions()
    await reuse("https://forget.example/", d.lookup)
    expect(d.calls).toHaveLength(2)
  })
})
