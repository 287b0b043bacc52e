// No request into a private network: hostile addresses are refused when an endpoint or a
// subscription is made and again before every delivery. A spy on tls.connect records every
// connection and blocks any that is not to loopback, so a broken guard could never reach
// another machine; the live receiver on 127.0.0.1 would show any loopback leak.
import { beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { Lookup } from "../../../src/webhooks/net/address-guard.ts"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { createHook } from "../../../src/webhooks/subscriptions/hooks.ts"
import { testEndpoint } from "../../../src/webhooks/endpoints/ping.ts"
import { insertIncident } from "../../support/app.ts"
import { useLoopbackOnlyTls } from "../../support/tls-guard.ts"
import {
  addEndpoint,
  addHook,
  ADMIN,
  at,
  attemptsOf,
  deliveries,
  dnsTable,
  failure,
  makeKey,
  sleep,
  startEngine,
  type TestDeps,
  useWorld,
  waitFor,
  withEngine
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const dns = dnsTable({
  localhost: ["127.0.0.1"],
  "receiver.test": ["127.0.0.1"],
  "internal.test": ["10.0.0.5"],
  "metadata.google.internal": ["169.254.169.254"],
  "mixed.test": ["93.184.216.34", "127.0.0.1"],
  "v6loop.test": ["::1"],
  "mapped.test": ["::ffff:10.0.0.1"],
  "rebind.test": ["127.0.0.1"]
})
/** Every question the world's lookup was asked; answers carry `answerTtl` seconds when a test sets it. */
const asked: Array<string> = []
let answerTtl: number | undefined
const lookup: Lookup = async (host) => {
  asked.push(host)
  const answers = await dns.lookup(host)
  return answerTtl === undefined ? answers : answers.map((a) => ({ ...a, ttl: answerTtl }))
}

const w = useWorld({ lookup })
const { connects, blocked } = useLoopbackOnlyTls()
let keyId: string
beforeAll(async () => {
  keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"] })
})
beforeEach(async () => {
  await w.db.sql`delete from service.webhook_endpoints`
})

describe("at creation (production default: no allowed networks)", () => {
  const p = () => w.receiver.port
  /** The refusal of a name whose answers include a private or special address. */
  const resolvesPrivate = (name: string) =>
    new RegExp(`${name.replaceAll(".", "\\.")} resolves to a private or special address$`)
  // [what, url, what the refusal says]
  const hostile: ReadonlyArray<readonly [string, () => string, RegExp]> = [
    ["http:// to the live receiver", () => `http://127.0.0.1:${p()}/hook`, /only https/],
    ["loopback", () => `https://127.0.0.1:${p()}/hook`, /loopback/],
    ["decimal IPv4", () => `https://2130706433:${p()}/hook`, /127\.0\.0\.1 .*loopback/],
    ["hex IPv4", () => `https://0x7f000001:${p()}/hook`, /loopback/],
    ["octal IPv4", () => `https://0177.0.0.1:${p()}/hook`, /loopback/],
    ["short IPv4", () => `https://127.1:${p()}/hook`, /loopback/],
    ["mixed hex dotted", () => `https://0x7f.1:${p()}/hook`, /loopback/],
    ["IPv6 loopback", () => `https://[::1]:${p()}/hook`, /loopback/],
    ["IPv4-mapped loopback", () => `https://[::ffff:127.0.0.1]:${p()}/hook`, /loopback/],
    ["IPv4-mapped loopback, hex", () => `https://[::ffff:7f00:1]:${p()}/hook`, /loopback/],
    ["0.0.0.0", () => `https://0.0.0.0:${p()}/hook`, /not a public address/],
    ["0", () => `https://0:${p()}/hook`, /not a public address/],
    ["cloud metadata", () => "https://169.254.169.254/latest/meta-data/", /cloud metadata/],
    ["AWS IPv6 metadata", () => "https://[fd00:ec2::254]/latest/meta-data/", /unique-local/],
    [
      "IPv4-mapped metadata",
      () => "https://[::ffff:169.254.169.254]/",
      /IPv4-mapped form of 169\.254\.169\.254: cloud metadata/
    ],
    ["10/8", () => "https://10.0.0.1/", /private network/],
    ["172.16/12", () => "https://172.16.5.4/", /private network/],
    ["192.168/16", () => "https://192.168.1.1/", /private network/],
    ["CGNAT", () => "https://100.64.0.1/", /carrier-grade NAT/],
    ["IPv6 link-local", () => "https://[fe80::1]/", /link-local/],
    ["IPv6 unique-local", () => "https://[fc00::1]/", /unique-local/],
    ["multicast", () => "https://224.0.0.1/", /multicast/],
    ["broadcast", () => "https://255.255.255.255/", /not a public address/],
    ["reserved", () => "https://240.0.0.1/", /reserved/],
    ["benchmarking", () => "https://198.18.0.1/", /benchmarking/],
    ["documentation IPv6", () => "https://[2001:db8::1]/", /documentation/],
    ["NAT64 of loopback", () => "https://[64:ff9b::7f00:1]/", /loopback/],
    ["IPv6 unspecified", () => "https://[::]/", /unspecified/],
    ["localhost", () => `https://localhost:${p()}/hook`, resolvesPrivate("localhost")],
    ["a name for the live receiver", () => `https://receiver.test:${p()}/hook`, resolvesPrivate("receiver.test")],
    ["a name for a private address", () => "https://internal.test/", resolvesPrivate("internal.test")],
    [
      "a name for the metadata service",
      () => "https://metadata.google.internal/computeMetadata/v1/",
      resolvesPrivate("metadata.google.internal")
    ],
    ["a name with one public and one loopback address", () => "https://mixed.test/", resolvesPrivate("mixed.test")],
    ["a name for IPv6 loopback", () => "https://v6loop.test/", resolvesPrivate("v6loop.test")],
    ["a name for an IPv4-mapped private address", () => "https://mapped.test/", resolvesPrivate("mapped.test")],
    ["credentials in the URL", () => `https://user:pass@receiver.test:${p()}/hook`, /credentials/],
    ["ftp://", () => "ftp://receiver.test/", /only https/],
    ["file://", () => "file:///etc/passwd", /only https/],
    ["javascript:", () => "javascript:alert(1)", /only https/],
    ["an unresolvable name", () => "https://nowhere.test/", /does not resolve/]
  ]
  const strict = (): TestDeps => ({ ...w.deps, allowed: [] })

  it(`has at least 30 hostile addresses (${hostile.length})`, () => expect(hostile.length).toBeGreaterThanOrEqual(30))

  it.each(hostile)("refuses %s for an endpoint and for a subscription, reaching nothing", async (_, url, reason) => {
    const e = await failure(
      runSql(
        strict().sql,
        createEndpoint(strict(), ADMIN, {
          companyId: w.company.id,
          name: "x",
          url: url(),
          events: ["incident.created"]
        })
      )
    )
    expect(e.status).toBe(400)
    expect(e.message).toMatch(reason)
    const s = await failure(
      runSql(
        strict().sql,
        createHook(strict(), { keyId, companyId: w.company.id }, { url: url(), event: "incident.created" })
      )
    )
    expect(s.status).toBe(400)
    expect(s.message).toMatch(reason)
    expect(connects).toEqual([])
    expect(blocked).toEqual([])
    expect(w.receiver.requests).toHaveLength(0)
  })
})

describe("before every delivery", () => {
  /** Waits until exactly `n` of the endpoint's deliveries have had one attempt, and returns them. */
  const attemptedAt = (endpointId: string, n: number, what: string) =>
    waitFor(async () => {
      const all = (await deliveries(w.db.sql)).filter((d) => d.endpoint_id === endpointId && d.attempts === 1)
      return all.length === n ? all : null
    }, what)

  it("refuses a name that resolved to an allowed address at creation and to a private one at delivery", async () => {
    dns.table["rebind.test"] = ["127.0.0.1"]
    const e = await addEndpoint(w, "/rebind", { name: "rebind", url: w.receiver.url("/rebind", "rebind.test") })
    const sub = await addHook(w, "/rebind-sub", { keyId, url: w.receiver.url("/rebind-sub", "rebind.test") })
    dns.table["rebind.test"] = ["10.0.0.7"]
    const engine = await startEngine(w.deps, { retrySchedule: "1h" })
    try {
      await insertIncident(w.db.sql, w.company.id)
      const ds = await waitFor(async () => {
        const all = (await deliveries(w.db.sql)).filter(
          (d) => d.endpoint_id === e.id || d.subscription_id === sub.subscription.id
        )
        return all.length === 2 && all.every((d) => d.attempts === 1) ? all : null
      }, "the attempts")
      for (const d of ds) {
        const [a] = await attemptsOf(w.db.sql, d.id)
        expect(a!.error_kind).toBe("refused")
        expect(a!.error).toBe("refused: rebind.test resolves to a private or special address")
      }
      // The test ping is checked the same way.
      dns.table["rebind.test"] = ["169.254.169.254"]
      const ping = await runSql(w.deps.sql, testEndpoint(w.deps, ADMIN, { id: e.id }))
      expect(ping).toMatchObject({
        ok: false,
        status: null,
        error: "refused: rebind.test resolves to a private or special address"
      })
    } finally {
      await engine.stop()
      dns.table["rebind.test"] = ["127.0.0.1"]
      await w.db.sql`delete from service.webhook_subscriptions`
    }
    expect(at(w.receiver, "/rebind")).toHaveLength(0)
    expect(at(w.receiver, "/rebind-sub")).toHaveLength(0)
    expect(connects).toEqual([])
    expect(blocked).toEqual([])
  })

  it("reuses a vetted answer within its TTL (no lookup, the same connection) and vets a rebinding after it", async () => {
    answerTtl = 5
    dns.table["rebind.test"] = ["127.0.0.1"]
    const e = await addEndpoint(w, "/ttl", { name: "ttl", url: w.receiver.url("/ttl", "rebind.test") })
    const attempted = (n: number) => attemptedAt(e.id, n, `${n} attempts`)
    const engine = await startEngine(w.deps, { retrySchedule: "1h" })
    try {
      asked.length = 0 // creation asked too: it always resolves afresh
      const connections = w.receiver.connections
      await insertIncident(w.db.sql, w.company.id)
      await attempted(1)
      await insertIncident(w.db.sql, w.company.id)
      await attempted(2)
      expect(at(w.receiver, "/ttl")).toHaveLength(2)
      expect(asked).toEqual(["rebind.test"])
      expect(w.receiver.connections - connections).toBe(1)

      // The name moves to a private address; once the TTL is over, the next delivery asks
      // again, and is refused before anything connects, the kept-alive connection included.
      dns.table["rebind.test"] = ["10.0.0.7"]
      await sleep(5_100)
      const connected = connects.length
      await insertIncident(w.db.sql, w.company.id)
      const ds = await attempted(3)
      expect(ds.filter((d) => d.state === "succeeded")).toHaveLength(2)
      expect(
        ds.filter((d) => d.last_error === "refused: rebind.test resolves to a private or special address")
      ).toHaveLength(1)
      expect(asked).toEqual(["rebind.test", "rebind.test"])
      expect(at(w.receiver, "/ttl")).toHaveLength(2)
      expect(connects).toHaveLength(connected)
      expect(blocked).toEqual([])
    } finally {
      await engine.stop()
      answerTtl = undefined
      dns.table["rebind.test"] = ["127.0.0.1"]
    }
  }, 30_000)

  /** One incident, and its delivery to the endpoint once attempted, by an engine run for it (one attempt per delivery). */
  const firstAttempt = (deps: TestDeps, endpointId: string) =>
    withEngine(deps, { retrySchedule: "1h" }, async () => {
      await insertIncident(w.db.sql, w.company.id)
      const [d] = await attemptedAt(endpointId, 1, "the attempt")
      return d!
    })

  it("refuses at delivery an address the running configuration does not allow", async () => {
    const e = await addEndpoint(w, "/loop", { name: "loop" })
    const d = await firstAttempt({ ...w.deps, allowed: [] }, e.id)
    expect(d.last_error).toBe("refused: 127.0.0.1 is not a public address (loopback)")
    expect(at(w.receiver, "/loop")).toHaveLength(0)
    expect(connects).toEqual([])
  })

  it("never follows a redirect, here to the metadata service", async () => {
    w.receiver.reply("/redir", { redirect: "https://169.254.169.254/latest/meta-data/" })
    const e = await addEndpoint(w, "/redir", { name: "redir" })
    const d = await firstAttempt(w.deps, e.id)
    expect(d.last_status).toBe(302)
    expect(d.last_error).toBe("redirect 302 to https://169.254.169.254/latest/meta-data/ (not followed)")
    expect(at(w.receiver, "/redir")).toHaveLength(1)
    expect(connects.every((c) => c.host === "127.0.0.1")).toBe(true)
    expect(blocked).toEqual([])
  })
})
