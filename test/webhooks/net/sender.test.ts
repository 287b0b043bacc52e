// The sender against a real HTTPS receiver on loopback. A spy on tls.connect records every
// connection the sender makes and blocks any that is not to a loopback IP literal, so even a
// broken guard could never send traffic off this machine.
import { createServer as createTcpServer, type Server as TcpServer } from "node:net"
import Stripe from "stripe"
import { describe, expect, it } from "vitest"
import { parseAllowedNetworksOrThrow, type Lookup } from "../../../src/webhooks/net/address-guard.ts"
import { send, USER_AGENT, type SendOptions } from "../../../src/webhooks/net/sender.ts"
import { newSecret, verify } from "../../../src/webhooks/net/signature.ts"
import { startHttpsReceiver, testCerts } from "../../support/https-receiver.ts"
import { useReceiver } from "../../support/fixtures.ts"
import { useLoopbackOnlyTls } from "../../support/tls-guard.ts"

const { connects, blocked } = useLoopbackOnlyTls()

const LOOPBACK = parseAllowedNetworksOrThrow("127.0.0.0/8")
const secret = newSecret()
const ca = testCerts().trusted.caCert
const message = {
  deliveryId: "dlv_01JABCDEF",
  event: "corrective_action.closed",
  body: JSON.stringify({
    id: "dlv_01JABCDEF",
    event: "corrective_action.closed",
    createdAt: "2026-11-22T10:00:00.000Z",
    data: { id: "ca_1", title: "Guard rail — réparé ✓" }
  })
}

/** A lookup answering from a table, recording every question. */
const lookupTable = (answers: Record<string, ReadonlyArray<string>>) => {
  const calls: Array<string> = []
  const lookup: Lookup = async (host) => {
    calls.push(host)
    const a = answers[host]
    if (!a) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: "ENOTFOUND" })
    return a.map((address) => ({ address, family: address.includes(":") ? (6 as const) : (4 as const) }))
  }
  return { lookup, calls }
}

const receiver = useReceiver()

const opts = (extra: SendOptions = {}): SendOptions => ({ allowed: LOOPBACK, ca, timeoutMs: 5_000, ...extra })

describe("SSRF: hostile addresses are refused before any connection", () => {
  // Every loopback form points at the live receiver, so a guard that let one through would
  // show up as a request there, and every other form would be stopped by the tls spy.
  const p = () => receiver.port
  const resolvesPrivate = (name: string) => `${name} resolves to a private or special address`
  const hostile: ReadonlyArray<readonly [string, () => string, string]> = [
    ["http:// to the receiver", () => `http://127.0.0.1:${p()}/hook`, "refused: only https://"],
    ["loopback IP", () => `https://127.0.0.1:${p()}/hook`, "loopback"],
    ["decimal IPv4", () => `https://2130706433:${p()}/hook`, "loopback"],
    ["hex IPv4", () => `https://0x7f000001:${p()}/hook`, "loopback"],
    ["octal IPv4", () => `https://0177.0.0.1:${p()}/hook`, "loopback"],
    ["short IPv4", () => `https://127.1:${p()}/hook`, "loopback"],
    ["other loopback", () => `https://127.0.0.2:${p()}/hook`, "loopback"],
    ["IPv6 loopback", () => `https://[::1]:${p()}/hook`, "loopback"],
    ["IPv4-mapped", () => `https://[::ffff:127.0.0.1]:${p()}/hook`, "IPv4-mapped form of 127.0.0.1"],
    ["IPv4-mapped hex", () => `https://[::ffff:7f00:1]:${p()}/hook`, "IPv4-mapped form of 127.0.0.1"],
    ["IPv4-compatible", () => `https://[::127.0.0.1]:${p()}/hook`, "IPv4-compatible form of 127.0.0.1"],
    ["0.0.0.0", () => `https://0.0.0.0:${p()}/hook`, "this network"],
    ["0", () => `https://0:${p()}/hook`, "this network"],
    ["unspecified IPv6", () => `https://[::]:${p()}/hook`, "unspecified"],
    ["localhost", () => `https://localhost:${p()}/hook`, resolvesPrivate("localhost")],
    ["credentials in URL", () => `https://user:pw@receiver.test:${p()}/hook`, "credentials"],
    ["cloud metadata", () => "https://169.254.169.254/latest/meta-data/", "cloud metadata"],
    ["link-local", () => "https://169.254.10.10/", "link-local"],
    ["10/8", () => "https://10.0.0.1/", "private network"],
    ["172.16/12", () => "https://172.20.1.1/", "private network"],
    ["192.168/16", () => "https://192.168.0.1/", "private network"],
    ["CGNAT", () => "https://100.64.0.1/", "carrier-grade NAT"],
    ["IETF 192.0.0/24", () => "https://192.0.0.170/", "IETF"],
    ["benchmarking", () => "https://198.18.0.1/", "benchmarking"],
    ["multicast", () => "https://224.0.0.251/", "multicast"],
    ["reserved 240/4", () => "https://240.0.0.1/", "reserved"],
    ["broadcast", () => "https://255.255.255.255/", "broadcast"],
    ["unique-local (AWS IPv6 metadata)", () => "https://[fd00:ec2::254]/", "unique-local"],
    ["IPv6 link-local", () => "https://[fe80::1]/", "link-local"],
    ["IPv6 multicast", () => "https://[ff02::1]/", "multicast"],
    ["NAT64 of metadata", () => "https://[64:ff9b::a9fe:a9fe]/", "NAT64 form of 169.254.169.254"],
    ["NAT64 of loopback", () => "https://[64:ff9b::127.0.0.1]/", "NAT64 form of 127.0.0.1"],
    ["local-use NAT64", () => "https://[64:ff9b:1::a00:1]/", "local-use NAT64"],
    ["6to4 of loopback", () => "https://[2002:7f00:1::1]/", "6to4 form of 127.0.0.1"],
    ["Teredo", () => "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"],
    ["documentation IPv6", () => "https://[2001:db8::1]/", "documentation"],
    ["name -> private", () => "https://webhook-test.local/hook", resolvesPrivate("webhook-test.local")],
    ["name -> metadata", () => "https://metadata.test/", resolvesPrivate("metadata.test")],
    ["name -> public + private", () => "https://mixed.test/", resolvesPrivate("mixed.test")],
    ["name -> mapped private", () => "https://mapped.test/", resolvesPrivate("mapped.test")],
    ["name -> 6to4 private", () => "https://sixtofour.test/", resolvesPrivate("sixtofour.test")],
    ["name -> ULA", () => "https://ula.test/", resolvesPrivate("ula.test")]
  ]
  const { lookup, calls } = lookupTable({
    localhost: ["127.0.0.1", "::1"],
    "webhook-test.local": ["10.0.0.5"],
    "metadata.test": ["169.254.169.254"],
    "mixed.test": ["93.184.216.34", "192.168.1.20"],
    "mapped.test": ["::ffff:10.0.0.1"],
    "sixtofour.test": ["2002:c0a8:1::1"],
    "ula.test": ["fd12:3456::1"]
  })

  it("covers at least 30 cases", () => expect(hostile.length).toBeGreaterThanOrEqual(30))

  it.each(hostile)("%s", async (_name, url, reason) => {
    // Allowed networks empty, as in production.
    const r = await send({ url: url(), secret }, message, { ca, lookup, timeoutMs: 2_000 })
    expect(r.ok).toBe(false)
    expect(r.status).toBeNull()
    expect(r.errorKind).toBe("refused")
    expect(r.error).toMatch(/^refused: /)
    expect(r.error).toContain(reason)
    expect(connects).toEqual([])
    expect(blocked).toEqual([])
    expect(receiver.requests).toHaveLength(0)
    expect(receiver.connections).toBe(0)
  })

  it("resolved names only through the lookup given, never IP literals", () => {
    expect(new Set(calls)).toEqual(
      new Set([
        "localhost",
        "webhook-test.local",
        "metadata.test",
        "mixed.test",
        "mapped.test",
        "sixtofour.test",
        "ula.test"
      ])
    )
  })

  it("refuses localhost through the real resolver", async () => {
    const r = await send({ url: receiver.url("/hook", "localhost"), secret }, message, { ca })
    expect(r).toMatchObject({ ok: false, errorKind: "refused" })
    expect(r.error).toBe("refused: localhost resolves to a private or special address")
    expect(receiver.connections).toBe(0)
    expect(connects).toEqual([])
  })

  it("refuses loopback unless WEBHOOK_ALLOWED_NETWORKS allows it", async () => {
    const allowedV6Only = parseAllowedNetworksOrThrow("fd00::/8")
    const r = await send({ url: receiver.url(), secret }, message, { ca, allowed: allowedV6Only })
    expect(r.errorKind).toBe("refused")
    expect(receiver.connections).toBe(0)
  })
})

describe("delivery request", () => {
  it("carries every header, the exact body bytes, and a signature Stripe and verify accept", async () => {
    const host = "receiver.test"
    const { lookup } = lookupTable({ [host]: ["127.0.0.1"] })
    const before = receiver.requests.length
    receiver.reply("/hooks/in", { status: 200, body: "thanks" })
    const r = await send({ url: receiver.url("/hooks/in?source=srs", host), secret }, message, opts({ lookup }))
    expect(r).toMatchObject({
      ok: true,
      status: 200,
      error: null,
      errorKind: null,
      responseSnippet: "thanks",
      addresses: ["127.0.0.1"]
    })
    expect(receiver.requests).toHaveLength(before + 1)
    const req = receiver.requests.at(-1)!
    expect(req.method).toBe("POST")
    expect(req.path).toBe("/hooks/in?source=srs")
    expect(req.body.equals(Buffer.from(message.body, "utf8"))).toBe(true)
    expect(req.headers).toMatchObject({
      host: `${host}:${receiver.port}`,
      "content-type": "application/json",
      "user-agent": USER_AGENT,
      "service-event": message.event,
      "service-delivery": message.deliveryId,
      "content-length": String(Buffer.byteLength(message.body))
    })
    expect(USER_AGENT).toBe("Service-Webhooks/1")
    // TLS was for the real name, the TCP connection to the vetted address.
    expect(req.servername).toBe(host)
    expect(connects.at(-1)).toMatchObject({ host: "127.0.0.1", port: receiver.port, servername: host })
    const header = String(req.headers["service-signature"])
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    const event = Stripe.webhooks.constructEvent(req.body, header, secret)
    expect(event).toMatchObject({ id: message.deliveryId })
    expect(verify(header, req.body, secret)).toMatchObject({ ok: true })
    expect(Math.abs(Number(header.slice(2, header.indexOf(","))) - Date.now() / 1000)).toBeLessThan(5)
  })

  it("signs with the injected clock, per attempt", async () => {
    const r = await send({ url: receiver.url("/clock"), secret }, message, opts({ now: () => 1_800_000_123_999 }))
    expect(r.ok).toBe(true)
    const header = String(receiver.requests.at(-1)!.headers["service-signature"])
    expect(header.startsWith("t=1800000123,v1=")).toBe(true)
    expect(verify(header, message.body, secret, 300, 1_800_000_200)).toMatchObject({
      ok: true,
      timestamp: 1_800_000_123
    })
  })

  it("signs with the previous secret too when given one (a rotation's overlap), the current one first; not when it is null", async () => {
    const previous = newSecret()
    const r = await send({ url: receiver.url("/overlap"), secret, previousSecret: previous }, message, opts())
    expect(r.ok).toBe(true)
    const req = receiver.requests.at(-1)!
    const header = String(req.headers["service-signature"])
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
    expect(String(req.headers["webhook-signature"])).toMatch(/^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/)
    for (const s of [secret, previous]) expect(verify(header, req.body, s)).toMatchObject({ ok: true })
    const [first] = header.split(",").slice(1)
    expect(verify(`${header.split(",")[0]},${first}`, req.body, secret)).toMatchObject({ ok: true })
    expect(verify(header, req.body, newSecret())).toMatchObject({ ok: false })

    await send({ url: receiver.url("/overlap"), secret, previousSecret: null }, message, opts())
    const alone = receiver.requests.at(-1)!
    expect(String(alone.headers["service-signature"])).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    expect(verify(String(alone.headers["service-signature"]), alone.body, previous)).toMatchObject({ ok: false })
  })

  it("sends byte bodies untouched", async () => {
    const bytes = Uint8Array.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xe2, 0x9c, 0x93, 0x22, 0x7d, 0x0a])
    const r = await send({ url: receiver.url("/bytes"), secret }, { ...message, body: bytes }, opts())
    expect(r.ok).toBe(true)
    const req = receiver.requests.at(-1)!
    expect(req.body.equals(Buffer.from(bytes))).toBe(true)
    expect(verify(String(req.headers["service-signature"]), bytes, secret)).toMatchObject({ ok: true })
  })

  it("reuses a kept-alive connection to the same vetted address", async () => {
    const other = await startHttpsReceiver()
    try {
      for (let i = 0; i < 3; i++) {
        expect((await send({ url: other.url("/ka"), secret }, message, opts())).ok).toBe(true)
        // undici checks an idle socket for one event-loop turn before reusing it.
        await new Promise((res) => setTimeout(res, 5))
      }
      expect(other.requests).toHaveLength(3)
      expect(other.connections).toBe(1)
    } finally {
      await other.close()
    }
  })
})

describe("DNS rebinding", () => {
  /** Answers in turn (the last one repeats) with `ttl` seconds, recording every question. */
  const answersInTurn = (ttl: number, ...answers: ReadonlyArray<string>) => {
    const calls: Array<string> = []
    const lookup: Lookup = async (host) => {
      calls.push(host)
      const address = answers[Math.min(calls.length, answers.length) - 1]!
      return [{ address, family: 4, ttl }]
    }
    return { lookup, calls }
  }
  const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms))

  it("connects to the address that was checked, keeps it for its TTL, and re-checks after", async () => {
    // First answer is allowed; every later one is hostile.
    // A TTL long enough that the first two sends fit in it on a loaded machine.
    const { lookup, calls } = answersInTurn(2, "127.0.0.1", "10.0.0.5")
    const url = receiver.url("/rebind", "rebind.test")
    const before = receiver.requests.length

    const first = await send({ url, secret }, message, opts({ lookup }))
    expect(first).toMatchObject({ ok: true, status: 200, addresses: ["127.0.0.1"] })
    expect(calls).toEqual(["rebind.test"]) // no second resolution between check and connect
    expect(connects).toEqual([{ host: "127.0.0.1", port: receiver.port, servername: "rebind.test" }])

    // Within the TTL: no lookup at all, the same vetted address.
    const second = await send({ url, secret }, message, opts({ lookup }))
    expect(second).toMatchObject({ ok: true, addresses: ["127.0.0.1"] })
    expect(calls).toHaveLength(1)
    expect(receiver.requests).toHaveLength(before + 2)

    // After it, the name is asked again, and the kept-alive connection to 127.0.0.1 must
    // not carry a delivery whose name now resolves elsewhere; nothing connects anywhere.
    await sleep(2_050)
    const connected = connects.length
    const third = await send({ url, secret }, message, opts({ lookup }))
    expect(third).toMatchObject({
      ok: false,
      errorKind: "refused",
      error: "refused: rebind.test resolves to a private or special address"
    })
    expect(calls).toHaveLength(2)
    expect(receiver.requests).toHaveLength(before + 2)
    expect(connects).toHaveLength(connected)
    expect(connects.every((c) => c.host === "127.0.0.1")).toBe(true)
    expect(blocked).toEqual([])

    // A refusal is not kept: the next delivery asks again (and is refused again).
    expect(await send({ url, secret }, message, opts({ lookup }))).toMatchObject({ ok: false, errorKind: "refused" })
    expect(calls).toHaveLength(3)
    expect(blocked).toEqual([])
  })

  it("follows a changed answer after its TTL to the new vetted address, never a stale connection", async () => {
    // A decoy on 127.0.0.2, same port: the name moves there after the first delivery.
    const decoy = await startHttpsReceiver({ host: "127.0.0.2", port: receiver.port })
    try {
      const { lookup } = answersInTurn(0.3, "127.0.0.1", "127.0.0.2")
      const url = receiver.url("/moved", "hooks.receiver.test")
      const before = receiver.requests.length
      expect((await send({ url, secret }, message, opts({ lookup }))).ok).toBe(true)
      expect(receiver.requests).toHaveLength(before + 1)
      expect(decoy.connections).toBe(0)
      await sleep(350)
      expect((await send({ url, secret }, message, opts({ lookup }))).ok).toBe(true)
      expect(receiver.requests).toHaveLength(before + 1)
      expect(decoy.requests).toHaveLength(1)
      expect(connects.map((c) => c.host)).toEqual(["127.0.0.1", "127.0.0.2"])
    } finally {
      await decoy.close()
    }
  })

  it("within the TTL, deliveries to several paths of a name share one lookup and one kept-alive connection", async () => {
    const other = await startHttpsReceiver()
    try {
      const { lookup, calls } = answersInTurn(30, "127.0.0.1")
      for (let i = 0; i < 4; i++) {
        const r = await send({ url: other.url(`/ka-${i}`, "receiver.test"), secret }, message, opts({ lookup }))
        expect(r).toMatchObject({ ok: true, addresses: ["127.0.0.1"] })
        // undici checks an idle socket for one event-loop turn before reusing it.
        await sleep(5)
      }
      expect(calls).toEqual(["receiver.test"])
      expect(other.requests.map((r) => r.path)).toEqual(["/ka-0", "/ka-1", "/ka-2", "/ka-3"])
      expect(other.connections).toBe(1)
      expect(connects.filter((c) => c.port === other.port)).toHaveLength(1)
    } finally {
      await other.close()
    }
  })
})

describe("failures", () => {
  it("500 is a failure with the answer kept", async () => {
    receiver.reply("/500", { status: 500, body: "boom" })
    const r = await send({ url: receiver.url("/500"), secret }, message, opts())
    expect(r).toMatchObject({ ok: false, status: 500, error: "http 500", errorKind: "http", responseSnippet: "boom" })
  })

  it("410 is reported as status 410", async () => {
    receiver.reply("/gone", { status: 410, body: "unsubscribed" })
    const r = await send({ url: receiver.url("/gone"), secret }, message, opts())
    expect(r).toMatchObject({ ok: false, status: 410, error: "http 410", errorKind: "http" })
  })

  it("any 2xx is success", async () => {
    receiver.reply("/204", { status: 204 })
    receiver.reply("/202", { status: 202, delayMs: 100 })
    expect(await send({ url: receiver.url("/204"), secret }, message, opts())).toMatchObject({
      ok: true,
      status: 204,
      responseSnippet: ""
    })
    expect(await send({ url: receiver.url("/202"), secret }, message, opts())).toMatchObject({ ok: true, status: 202 })
  })

  it("a redirect is never followed", async () => {
    receiver.reply("/moved", { status: 302, redirect: receiver.url("/elsewhere") })
    receiver.reply("/to-metadata", { status: 307, redirect: "https://169.254.169.254/latest/meta-data/" })
    const before = receiver.requests.length
    const a = await send({ url: receiver.url("/moved"), secret }, message, opts())
    expect(a).toMatchObject({
      ok: false,
      status: 302,
      errorKind: "redirect",
      error: `redirect 302 to ${receiver.url("/elsewhere")} (not followed)`
    })
    const b = await send({ url: receiver.url("/to-metadata"), secret }, message, opts())
    expect(b).toMatchObject({ ok: false, status: 307, errorKind: "redirect" })
    expect(receiver.requests.slice(before).map((r) => r.path)).toEqual(["/moved", "/to-metadata"])
    expect(blocked).toEqual([])
  })

  it("a receiver that never answers times out at the deadline", async () => {
    receiver.reply("/hang", { hang: true })
    const r = await send({ url: receiver.url("/hang"), secret }, message, opts({ timeoutMs: 300 }))
    expect(r).toMatchObject({ ok: false, status: null, errorKind: "timeout" })
    expect(r.error).toMatch(/^timeout: no complete answer within 300 ms$/)
    expect(r.durationMs).toBeGreaterThanOrEqual(290)
    expect(r.durationMs).toBeLessThan(1_500)
  })

  it("a 2xx that comes after the deadline is a timeout", async () => {
    receiver.reply("/slow", { status: 200, delayMs: 800 })
    const r = await send({ url: receiver.url("/slow"), secret }, message, opts({ timeoutMs: 250 }))
    expect(r).toMatchObject({ ok: false, errorKind: "timeout" })
  })

  it("the deadline also covers a body that never ends; the in-time 2xx still counts", async () => {
    receiver.reply("/drip", { status: 200, hangBody: true })
    // A deadline a loaded machine's TLS handshake and headers fit in (300 ms once did not).
    const r = await send({ url: receiver.url("/drip"), secret }, message, opts({ timeoutMs: 1_000 }))
    expect(r).toMatchObject({ ok: true, status: 200, responseSnippet: "partial" })
    expect(r.durationMs).toBeGreaterThanOrEqual(990)
    expect(r.durationMs).toBeLessThan(3_000)
  })

  it("a closed port is a refused connection", async () => {
    const port = await closedPort()
    const r = await send({ url: `https://127.0.0.1:${port}/hook`, secret }, message, opts())
    expect(r).toMatchObject({ ok: false, status: null, errorKind: "connection" })
    expect(r.error).toMatch(/^connection refused: /)
  })

  it("a socket closed without an answer is a connection failure", async () => {
    receiver.reply("/drop", { destroy: true })
    const r = await send({ url: receiver.url("/drop"), secret }, message, opts())
    expect(r).toMatchObject({ ok: false, status: null, errorKind: "connection" })
    expect(r.error).toMatch(/^connection (closed|reset)/)
  })

  it("an untrusted certificate is a TLS error, and nothing is sent", async () => {
    const rogue = await startHttpsReceiver({ certs: "untrusted" })
    try {
      const r = await send({ url: rogue.url("/hook"), secret }, message, opts())
      expect(r).toMatchObject({ ok: false, status: null, errorKind: "tls" })
      expect(r.error).toMatch(/^tls: /)
      expect(rogue.requests).toHaveLength(0)
      // Without the test CA the trusted receiver is just as untrusted.
      const noCa = await send({ url: receiver.url("/hook"), secret }, message, { allowed: LOOPBACK })
      expect(noCa).toMatchObject({ ok: false, errorKind: "tls" })
    } finally {
      await rogue.close()
    }
  })

  it("a certificate for another name is a TLS error (the real host name is checked)", async () => {
    const { lookup } = lookupTable({ "not-in-cert.test": ["127.0.0.1"] })
    const before = receiver.requests.length
    const r = await send({ url: receiver.url("/hook", "not-in-cert.test"), secret }, message, opts({ lookup }))
    expect(r).toMatchObject({ ok: false, errorKind: "tls" })
    expect(r.error).toContain("ERR_TLS_CERT_ALTNAME_INVALID")
    expect(receiver.requests).toHaveLength(before)
  })

  it("reads a huge answer only up to the bound", async () => {
    receiver.reply("/huge", { status: 200, bodyBytes: 50 * 1024 * 1024 })
    const r = await send({ url: receiver.url("/huge"), secret }, message, opts({ maxResponseBytes: 1024 }))
    expect(r).toMatchObject({ ok: true, status: 200 })
    expect(r.responseSnippet).toBe("x".repeat(1024))
    expect(r.durationMs).toBeLessThan(2_000)
    // The sender hung up early: far from everything was pushed into the connection.
    await new Promise((res) => setTimeout(res, 100))
    expect(receiver.bodyBytesWritten).toBeLessThan(50 * 1024 * 1024)
  })

  it("cuts the snippet on a UTF-8 character boundary", async () => {
    receiver.reply("/utf8", { status: 500, body: "é".repeat(100) })
    const r = await send({ url: receiver.url("/utf8"), secret }, message, opts({ maxResponseBytes: 11 }))
    expect(r.responseSnippet).toBe("ééééé")
    receiver.reply("/emoji", { status: 500, body: "a😀😀" })
    const e = await send({ url: receiver.url("/emoji"), secret }, message, opts({ maxResponseBytes: 8 }))
    expect(e.responseSnippet).toBe("a😀")
  })

  it("a name that does not resolve is a dns failure", async () => {
    const { lookup } = lookupTable({})
    const r = await send({ url: "https://nowhere.test/hook", secret }, message, opts({ lookup }))
    expect(r).toMatchObject({ ok: false, errorKind: "dns", error: "dns: nowhere.test does not resolve (ENOTFOUND)" })
    expect(connects).toEqual([])
  })

  it("a hanging lookup is cut by the same deadline", async () => {
    const lookup: Lookup = () => new Promise(() => undefined)
    const r = await send({ url: "https://slow-dns.test/hook", secret }, message, opts({ lookup, timeoutMs: 200 }))
    expect(r).toMatchObject({ ok: false, errorKind: "timeout" })
    expect(r.durationMs).toBeLessThan(1_000)
  })

  it("the caller's signal cancels an attempt", async () => {
    receiver.reply("/hang2", { hang: true })
    const r = await send({ url: receiver.url("/hang2"), secret }, message, opts({ signal: AbortSignal.timeout(150) }))
    expect(r).toMatchObject({ ok: false, errorKind: "aborted" })
    expect(r.durationMs).toBeLessThan(1_000)
  })
})

const closedPort = async (): Promise<number> => {
  const s: TcpServer = createTcpServer()
  await new Promise<void>((res) => s.listen(0, "127.0.0.1", () => res()))
  const port = (s.address() as { port: number }).port
  await new Promise<void>((res) => s.close(() => res()))
  return port
}
