// The portal over HTTP, as a browser behind a TLS-terminating proxy reaches it: the admin API's
// link is https:// and the session cookie Secure only when a proxy TRUST_PROXY trusts says
// X-Forwarded-Proto: https; the link's button refuses a form from another origin (nothing is
// spent); a portal form without the session's CSRF token changes nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeKey, makeToken, request } from "../../support/http.ts"
import type { TestServer } from "../../support/server.ts"
import { startServer } from "../../support/server.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("the portal behind a proxy", () => {
  const db = useDatabase()
  let direct: TestServer
  let proxied: TestServer
  let acme: TestCompany
  let adminToken: string
  let keyId: string

  const makeLink = async (server: TestServer, headers: Record<string, string> = {}) => {
    const r = await request(server.url, `/admin/v1/keys/${keyId}/portal-links`, {
      method: "POST",
      headers: { authorization: `Bearer ${adminToken}`, ...headers },
      body: JSON.stringify({ expiresIn: "15m" })
    })
    expect(r.status, r.text).toBe(201)
    return r.json as { url: string; path: string; id: string }
  }
  /** The link's button, as the browser sends it from the link's own page (or from `origin`). */
  const open = (server: TestServer, path: string, headers: Record<string, string> = {}) =>
    request(server.url, path, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: new URL(server.url).origin,
        "sec-fetch-site": "same-origin",
        ...headers
      },
      body: ""
    })

  beforeAll(async () => {
    direct = await startServer(db.url, {}, { pages: true })
    proxied = await startServer(db.url, {}, { pages: true, trustProxy: { _tag: "Peer" } })
    acme = await createCompany(db.sql)
    adminToken = (await makeToken(db, acme, "portal http")).token
    keyId = (await makeKey(db, acme, { webhooks: true, name: "Contractor" })).id
  })
  afterAll(async () => {
    await direct?.close()
    await proxied?.close()
  })

  it("Secure and https:// when a trusted proxy says the browser came over TLS; not otherwise", async () => {
    const plain = await makeLink(direct, { "x-forwarded-proto": "https" })
    // Not trusted: the header says nothing.
    expect(plain.url.startsWith("http://")).toBe(true)
    const opened = await open(direct, plain.path, { "x-forwarded-proto": "https" })
    expect(opened.status).toBe(303)
    expect(opened.headers.get("location")).toBe("/portal")
    const cookie = opened.headers.get("set-cookie")!
    expect(cookie).toMatch(/^srs_portal=[A-Za-z0-9_-]{43}; Path=\/portal; HttpOnly; SameSite=Strict$/)

    const tls = await makeLink(proxied, { "x-forwarded-proto": "https", host: "portal.example" })
    expect(tls.url).toBe(`https://portal.example${tls.path}`)
    const secure = await open(proxied, tls.path, { "x-forwarded-proto": "https" })
    expect(secure.status).toBe(303)
    expect(secure.headers.get("set-cookie")).toMatch(
      /^srs_portal=[A-Za-z0-9_-]{43}; Path=\/portal; HttpOnly; Secure; SameSite=Strict$/
    )
    // The session id is kept as a hash only.
    const value = secure.headers.get("set-cookie")!.split(";")[0]!.split("=")[1]!
    const rows = await db.sql<{ row: string }[]>`select row_to_json(l)::text as row from service.portal_links l`
    for (const r of rows) expect(r.row).not.toContain(value)
  })

  it("the link's button from another origin is refused and spends nothing; a form without the CSRF token changes nothing", async () => {
    const link = await makeLink(direct)
    const forged = await open(direct, link.path, { origin: "http://evil.example", "sec-fetch-site": "cross-site" })
    expect(forged.status).toBe(403)
    const [row] = await db.sql<
      { opened_at: Date | null }[]
    >`select opened_at from service.portal_links where id = ${link.id}`
    expect(row!.opened_at).toBeNull()
    const opened = await open(direct, link.path)
    expect(opened.status).toBe(303)
    const cookie = opened.headers.get("set-cookie")!.split(";")[0]!
    const home = await request(direct.url, "/portal", { headers: { cookie } })
    expect(home.status).toBe(200)
    expect(home.text).toContain("Contractor")
    const csrf = /name="csrf" value="([A-Za-z0-9_-]+)"/.exec(home.text)![1]!
    const noToken = await request(direct.url, "/portal/sign-out", {
      method: "POST",
      headers: {
        cookie,
        "content-type": "application/x-www-form-urlencoded",
        origin: new URL(direct.url).origin,
        "sec-fetch-site": "same-origin"
      },
      body: "csrf=wrong"
    })
    expect(noToken.status).toBe(403)
    expect((await request(direct.url, "/portal", { headers: { cookie } })).status).toBe(200)
    const out = await request(direct.url, "/portal/sign-out", {
      method: "POST",
      headers: {
        cookie,
        "content-type": "application/x-www-form-urlencoded",
        origin: new URL(direct.url).origin,
        "sec-fetch-site": "same-origin"
      },
      body: `csrf=${csrf}`
    })
    expect(out.status).toBe(200)
    expect((await request(direct.url, "/portal", { headers: { cookie } })).status).toBe(401)
  })
})
