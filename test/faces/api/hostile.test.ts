// Requests without a valid key, as anyone who reaches the port can send them, through the real
// server: a Host that is no host name is refused before any lookup; Hosts no company has are
// not remembered; a client's failed authentications are limited (429 with Retry-After, and no
// further statement), while a key the process knows still works from that client's address;
// TRUST_PROXY decides which address a request counts against; revocation stays immediate. Each
// refusal a flood makes by the thousand is answered by the server's door (src/faces/door.ts)
// in the service; every test runs with it and without it (the router's answer), and the two
// answers are the same (the door adds X-Request-Id, which this test server's router, without
// the observability middleware, does not: that tells them apart here).
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { parseTrustProxy, type TrustProxy } from "../../../src/platform/http/client-address.ts"
import { useDatabase } from "../../support/fixtures.ts"
import { makeKey, request, revokeKeyAs } from "../../support/http.ts"
import { startServer, type TestServer } from "../../support/server.ts"
import { createCompany, seedRecords, type TestCompany } from "../../support/views.ts"

const madeUp = () => `mk_${randomBytes(32).toString("base64url")}`

const FAILURE_TEXT =
  /^too many requests with an unknown, revoked or expired API key from this address \(at most 5 a minute\); retry in \d+ seconds?$/

describe.each([
  ["at the door", true],
  ["through the router", false]
])("requests without a valid key, %s", (_mode, door) => {
  const db = useDatabase()
  let acme: TestCompany
  let other: TestCompany
  const servers: Array<TestServer> = []

  beforeAll(async () => {
    acme = await createCompany(db.sql)
    other = await createCompany(db.sql)
    await seedRecords(db.sql, "incidents", acme.id, 2)
  })
  afterAll(async () => {
    for (const s of servers) await s.close()
  })
  const start = async (authFailuresPerMinute = 5, trustProxy?: TrustProxy, authLookupsPerSecond?: number) => {
    const s = await startServer(
      db.url,
      {
        rateLimit: 1_000_000,
        authFailuresPerMinute,
        ...(authLookupsPerSecond === undefined ? {} : { authLookupsPerSecond })
      },
      trustProxy === undefined ? { door } : { trustProxy, door }
    )
    servers.push(s)
    return s
  }
  const trust = (text: string): TrustProxy => {
    const t = parseTrustProxy(text)
    if ("error" in t) throw new Error(t.error)
    return t
  }

  it("a Host that is no host name: 400 before any lookup, on endpoints and unknown paths alike", async () => {
    const server = await start()
    const { key } = await makeKey(db, acme)
    expect((await request(server.url, "/api/v1/incidents", { key, headers: { host: acme.host } })).status).toBe(200)
    const before = server.keys().statements
    for (const host of [
      `${"a".repeat(250)}.com`,
      "bad host",
      "acme..example",
      "acme.example:99999",
      "[::1",
      "exa$mple.com",
      "a/b"
    ]) {
      for (const path of ["/api/v1/incidents", "/api/v1", "/api/v1/nope"]) {
        for (const k of [key, madeUp()]) {
          const a = await request(server.url, path, { key: k, headers: { host } })
          expect(a.status, `${host} ${path}`).toBe(400)
          expect(a.json).toEqual({
            error:
              "the Host header is not a host name: send a name of at most 253 letters, digits, hyphens and dots, or an IP address, with an optional :port"
          })
          expect(a.headers.get("ratelimit-policy")).toBe('"default";q=1000000;w=60')
          expect(a.headers.get("x-request-id") !== null).toBe(door)
        }
      }
    }
    // the OpenAPI document too: nothing under /api/ reads a Host that is not one
    expect((await request(server.url, "/api/v1/openapi.json", { headers: { host: "bad host" } })).status).toBe(400)
    expect(server.keys().statements).toBe(before)
    // nothing was counted against the address either: made-up keys still get their 401
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(401)
    // and the longest host name allowed, and an IPv6 address, are Hosts
    const longest = `${"a".repeat(63)}.${"b".repeat(63)}.${"c".repeat(63)}.${"d".repeat(61)}`
    expect(longest.length).toBe(253)
    for (const host of [longest, `${longest}.:8443`, "[::1]:3000", "127.0.0.1"])
      expect((await request(server.url, "/api/v1/incidents", { key, headers: { host } })).status, host).toBe(200)
  })

  it("Hosts of no company are not remembered; a company's host still binds its keys", async () => {
    const server = await start(1000)
    const { key } = await makeKey(db, acme)
    const [count] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.companies`
    const companies = count!.n
    for (let i = 0; i < 200; i++) {
      const host = `${randomBytes(20).toString("hex")}-${i}.nowhere.example`
      expect((await request(server.url, "/api/v1/incidents", { key, headers: { host } })).status).toBe(200)
      expect((await request(server.url, "/api/v1/incidents", { key: madeUp(), headers: { host } })).status).toBe(401)
    }
    const stats = server.keys()
    expect(stats.companyHosts).toBe(companies)
    expect(stats.keys.entries).toBe(1)
    expect(stats.unknown.entries).toBe(200)
    expect((await request(server.url, "/api/v1/incidents", { key, headers: { host: other.host } })).status).toBe(401)
  })

  it("a client's failed authentications: 429 with Retry-After past the limit, with no further statement", async () => {
    const server = await start(5)
    const refused = []
    for (let i = 0; i < 5; i++) refused.push(await request(server.url, "/api/v1/incidents", { key: madeUp() }))
    expect(refused.map((a) => [a.status, a.json.error])).toEqual(Array(5).fill([401, "unknown API key"]))
    const statements = server.keys().statements
    expect(statements).toBeGreaterThanOrEqual(5)
    for (let i = 0; i < 50; i++) {
      const a = await request(server.url, i % 2 === 0 ? "/api/v1/incidents" : "/api/v1/nope", { key: madeUp() })
      expect(a.status).toBe(429)
      expect(a.json.error).toMatch(FAILURE_TEXT)
      const wait = Number(a.headers.get("retry-after"))
      expect(wait).toBeGreaterThanOrEqual(1)
      expect(wait).toBeLessThanOrEqual(12)
      expect(a.json.error).toContain(`retry in ${wait} second`)
      expect(a.headers.get("ratelimit-policy")).toBe('"default";q=1000000;w=60')
      expect(a.headers.get("ratelimit")).toBeNull()
      expect(a.headers.get("content-type")).toBe("application/json")
      expect(a.headers.get("x-request-id") !== null).toBe(door)
    }
    if (door) {
      const echoed = await request(server.url, "/api/v1/incidents", {
        key: madeUp(),
        headers: { "x-request-id": "caller-id-123" }
      })
      expect(echoed.headers.get("x-request-id")).toBe("caller-id-123")
    }
    // the OpenAPI document takes no key, and is served whatever the address did
    expect((await request(server.url, "/api/v1/openapi.json", { key: madeUp() })).status).toBe(200)
    expect((await request(server.url, "/api/v1/openapi.json?x=1", { key: madeUp() })).status).toBe(200)
    // A credential of no key's shape counts too, and a request without a key is told how to send one.
    expect((await request(server.url, "/api/v1/incidents", { key: "mk_short" })).status).toBe(429)
    const missing = await request(server.url, "/api/v1/incidents")
    expect(missing.status).toBe(401)
    expect(missing.json.error).toMatch(/^missing API key/)
    expect(server.keys().statements).toBe(statements)
    expect(server.keys().clients.entries).toBe(1)
    // another address has its own allowance
    const elsewhere = await request(server.url, "/api/v1/incidents", { key: madeUp(), localAddress: "127.0.0.2" })
    expect(elsewhere.status).toBe(401)
  })

  it("a key the process knows is served from an address over its limit; one it has not met waits", async () => {
    const server = await start(5)
    const known = await makeKey(db, acme)
    const unmet = await makeKey(db, acme)
    expect((await request(server.url, "/api/v1/incidents", { key: known.key })).status).toBe(200)
    for (let i = 0; i < 5; i++)
      expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(401)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(429)
    for (let i = 0; i < 3; i++) {
      const a = await request(server.url, "/api/v1/incidents", { key: known.key })
      expect(a.status).toBe(200)
      expect(a.json.data).toHaveLength(2)
    }
    const waits = await request(server.url, "/api/v1/incidents", { key: unmet.key })
    expect(waits.status).toBe(429)
    expect(waits.json.error).toMatch(FAILURE_TEXT)
    // from another address the unmet key is served, and known from then on
    expect((await request(server.url, "/api/v1/incidents", { key: unmet.key, localAddress: "127.0.0.2" })).status).toBe(
      200
    )
    expect((await request(server.url, "/api/v1/incidents", { key: unmet.key })).status).toBe(200)
  })

  it("a usable key gives its token back; a key refused as a credential keeps it spent", async () => {
    const server = await start(3)
    const fresh = [await makeKey(db, acme), await makeKey(db, acme), await makeKey(db, acme), await makeKey(db, acme)]
    // four keys met for the first time, more than the bucket holds: each gives its token back
    for (const { key } of fresh) expect((await request(server.url, "/api/v1/incidents", { key })).status).toBe(200)
    // a 403 is a usable key too
    const narrow = await makeKey(db, acme, { scopes: ["permits"] })
    expect((await request(server.url, "/api/v1/incidents", { key: narrow.key })).status).toBe(403)
    // another company's key at acme's host is refused as a credential: it counts
    const theirs = await makeKey(db, other)
    const wrongHost = await request(server.url, "/api/v1/incidents", { key: theirs.key, headers: { host: acme.host } })
    expect(wrongHost.status).toBe(401)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(401)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(401)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(429)
  })

  it("a flood from many addresses: past the process's budget of lookups, 429 for all but addresses that showed a usable key", async () => {
    // One lookup a second, two at once: each address of the flood is within its own allowance.
    const server = await start(5, trust("true"), 1)
    const known = await makeKey(db, acme)
    const from = (address: string, key: string) =>
      request(server.url, "/api/v1/incidents", { key, headers: { "x-forwarded-for": address } })
    // An address whose client showed a usable key (its lookup's token went back).
    expect((await from("198.51.100.1", known.key)).status).toBe(200)
    const answers = []
    for (let i = 0; i < 10; i++) {
      const a = await from(`2001:db8:${i}::1`, madeUp())
      answers.push(a)
      if (a.status === 429) break
    }
    const held = answers[answers.length - 1]!
    expect(held.status).toBe(429)
    expect(held.json.error).toMatch(
      /^too many requests with credentials this service does not know, from many addresses; it looks up at most 1 a second; retry in \d+ seconds?$/
    )
    expect(Number(held.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(held.headers.get("x-request-id") !== null).toBe(door)
    // Every answer before it was a lookup's 401: the first two at least (the burst).
    expect(answers.slice(0, -1).every((a) => a.status === 401)).toBe(true)
    expect(answers.length).toBeGreaterThanOrEqual(3)
    expect(server.keys().lookupsRefused).toBeGreaterThanOrEqual(1)
    // Through it: the address that showed a usable key still has its lookups (its own five)...
    for (let i = 0; i < 3; i++) expect((await from("198.51.100.1", madeUp())).status).toBe(401)
    // ...and a key the process knows is served from an address of the flood.
    expect((await from("2001:db8:0::1", known.key)).status).toBe(200)
  })

  it("revocation is immediate, and a revoked key keeps its own 401 from an address over the limit", async () => {
    const server = await start(2)
    const { id, key } = await makeKey(db, acme)
    expect((await request(server.url, "/api/v1/incidents", { key })).status).toBe(200)
    for (let i = 0; i < 2; i++)
      expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(401)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUp() })).status).toBe(429)
    await revokeKeyAs(db, acme, id)
    for (const path of ["/api/v1/incidents", "/api/v1", "/api/v1/incidents/00000000-0000-0000-0000-000000000000"]) {
      const a = await request(server.url, path, { key })
      expect(a.status, path).toBe(401)
      expect(a.json).toEqual({ error: "this API key was revoked" })
    }
  })

  describe("TRUST_PROXY", () => {
    const exhaust = async (server: TestServer, headers: Record<string, string>, localAddress?: string) => {
      const statuses = []
      for (let i = 0; i < 4; i++)
        statuses.push(
          (
            await request(server.url, "/api/v1/incidents", {
              key: madeUp(),
              headers,
              ...(localAddress === undefined ? {} : { localAddress })
            })
          ).status
        )
      return statuses
    }

    it("off: X-Forwarded-For is ignored, every request counts against the connection's address", async () => {
      const server = await start(3)
      const statuses = []
      for (let i = 0; i < 4; i++)
        statuses.push(
          (
            await request(server.url, "/api/v1/incidents", {
              key: madeUp(),
              headers: { "x-forwarded-for": `198.51.100.${i}` }
            })
          ).status
        )
      expect(statuses).toEqual([401, 401, 401, 429])
    })

    it("true: the client is the last address the proxy added; what the client wrote before it is not used", async () => {
      const server = await start(3, trust("true"))
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.1" })).toEqual([401, 401, 401, 429])
      // the same client, whatever it put in front
      expect(await exhaust(server, { "x-forwarded-for": "203.0.113.9, 198.51.100.1" })).toEqual([429, 429, 429, 429])
      // another client behind the same proxy has its own allowance
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.2" })).toEqual([401, 401, 401, 429])
      // an IPv6 client counts by its /64
      expect(await exhaust(server, { "x-forwarded-for": "2001:db8:1:2::1" })).toEqual([401, 401, 401, 429])
      expect(await exhaust(server, { "x-forwarded-for": "2001:db8:1:2:ffff::9" })).toEqual([429, 429, 429, 429])
      // no header: the connection's address
      expect(await exhaust(server, {})).toEqual([401, 401, 401, 429])
    })

    it("networks: only a proxy in them is believed, and the client is the right-most address outside them", async () => {
      const server = await start(3, trust("127.0.0.1/32, 10.0.0.0/8"))
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.7, 10.1.2.3" })).toEqual([401, 401, 401, 429])
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.7" })).toEqual([429, 429, 429, 429])
      // from an address that is not a proxy, the header is the client's own words: ignored
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.8" }, "127.0.0.2")).toEqual([401, 401, 401, 429])
      expect(await exhaust(server, { "x-forwarded-for": "198.51.100.9" }, "127.0.0.2")).toEqual([429, 429, 429, 429])
    })
  })
})
