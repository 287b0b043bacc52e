// Made-up admin tokens and session cookies, as anyone who reaches the port can send them: each
// would cost a lookup, so they take from the same allowance of failed authentications per
// client as made-up API keys do (429 with Retry-After past it, and no lookup at all: a token
// not accepted lately waits too), while another address, and a credential accepted lately, go on.
import { randomBytes } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { useDatabase } from "../../support/fixtures.ts"
import { makeToken, request } from "../../support/http.ts"
import { startServer, type TestServer } from "../../support/server.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"

const madeUpToken = () => `mat_${randomBytes(32).toString("base64url")}`
const madeUpKey = () => `mk_${randomBytes(32).toString("base64url")}`
// A cookie of a session's shape that names no session.
const madeUpSession = () => `__Host-srs_admin=${randomBytes(32).toString("base64url")}`

const TOO_MANY =
  /^too many requests with an unknown, revoked or expired admin token or session from this address \(at most 3 a minute\); retry in \d+ seconds?$/

describe("admin tokens and sessions without a valid credential", () => {
  const db = useDatabase()
  let acme: TestCompany
  let token: string
  const servers: Array<TestServer> = []
  const start = async () => {
    const s = await startServer(db.url, { rateLimit: 1_000_000, authFailuresPerMinute: 3 }, { pages: true })
    servers.push(s)
    return s
  }

  beforeAll(async () => {
    acme = await createCompany(db.sql)
    token = (await makeToken(db, acme, "real")).token
  })
  afterAll(async () => {
    for (const s of servers) await s.close()
  })

  it("the admin API: 401 while the client has failures left, then 429 with Retry-After, before any lookup", async () => {
    const server = await start()
    for (let i = 0; i < 3; i++) {
      const a = await request(server.url, "/admin/v1/keys", { key: madeUpToken() })
      expect([a.status, a.json.error]).toEqual([401, "unknown admin token"])
    }
    const over = await request(server.url, "/admin/v1/keys", { key: madeUpToken() })
    expect(over.status).toBe(429)
    expect(over.json.error).toMatch(TOO_MANY)
    const wait = Number(over.headers.get("retry-after"))
    expect(wait).toBeGreaterThanOrEqual(1)
    expect(wait).toBeLessThanOrEqual(20)
    expect(over.json.error).toContain(`retry in ${wait} second`)
    // Nothing is looked up for this address now, not even a real token.
    expect((await request(server.url, "/admin/v1/keys", { key: token })).status).toBe(429)
    // Another address has its own allowance, and a real token from it works.
    const elsewhere = { localAddress: "127.0.0.2" }
    expect((await request(server.url, "/admin/v1/keys", { key: token, ...elsewhere })).status).toBe(200)
    expect((await request(server.url, "/admin/v1/keys", { key: madeUpToken(), ...elsewhere })).status).toBe(401)
    // Accepted once, the real token goes on from the spent address too (checked, as every time);
    // made-up ones from there still wait.
    expect((await request(server.url, "/admin/v1/keys", { key: token })).status).toBe(200)
    expect((await request(server.url, "/admin/v1/keys", { key: madeUpToken() })).status).toBe(429)
  })

  it("a good token gives its allowance back: any number of requests with it from one address", async () => {
    const server = await start()
    for (let i = 0; i < 10; i++)
      expect((await request(server.url, "/admin/v1/keys", { key: token, localAddress: "127.0.0.3" })).status).toBe(200)
  })

  it("one allowance per client across the read API, the admin API and the pages", async () => {
    const server = await start()
    const from = { localAddress: "127.0.0.4" }
    expect((await request(server.url, "/api/v1/incidents", { key: madeUpKey(), ...from })).status).toBe(401)
    expect((await request(server.url, "/admin/v1/keys", { key: madeUpToken(), ...from })).status).toBe(401)
    // A made-up session cookie is sent to sign in (its lookup found nothing) and counts.
    const page = await request(server.url, "/admin/keys", { headers: { cookie: madeUpSession() }, ...from })
    expect(page.status).toBe(303)
    // Spent: the pages answer a 429 page, the APIs their 429s.
    const tooMany = await request(server.url, "/admin/keys", { headers: { cookie: madeUpSession() }, ...from })
    expect(tooMany.status).toBe(429)
    expect(tooMany.headers.get("content-type")).toMatch(/^text\/html/)
    expect(Number(tooMany.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
    expect(tooMany.text).toContain("too many requests with an unknown, revoked or expired admin token or session")
    expect((await request(server.url, "/admin/v1/keys", { key: madeUpToken(), ...from })).status).toBe(429)
    expect((await request(server.url, "/api/v1/incidents", { key: madeUpKey(), ...from })).status).toBe(429)
    // Without a session cookie there is nothing to look up: the sign-in page, as always.
    expect((await request(server.url, "/admin/sign-in", from)).status).toBe(200)
  })
})
