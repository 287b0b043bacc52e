import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AdminUser } from "../../../src/access/identity.ts"
import { escapeHtml } from "../../../src/faces/pages/html.ts"
import { sha256 } from "../../../src/access/keys/bearer-secrets.ts"
import { makeToken, request } from "../../support/http.ts"
import type { TestServer } from "../../support/server.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { OUR_ATTRIBUTES, setCookieParts, startWebServer, webClient, type WebClient } from "../../support/pages.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("admin pages over HTTP", () => {
  const db = useDatabase()
  let server: TestServer
  let acme: TestCompany
  let admin: AdminUser

  const newToken = (company: TestCompany = acme) => makeToken(db, company, "web test")

  const signedIn = async (): Promise<{ client: WebClient; token: string; tokenId: string }> => {
    const t = await newToken()
    const client = webClient(server.url)
    const r = await client.signIn(t.token)
    expect(r.status).toBe(303)
    return { client, token: t.token, tokenId: t.id }
  }

  const api = (token: string, method: string, path: string, body?: unknown) =>
    request(server.url, path, {
      method,
      headers: { authorization: `Bearer ${token}` },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })

  const keyCount = async () =>
    Number((await db.sql<{ n: number }[]>`select count(*)::int as n from service.api_keys`)[0]!.n)

  beforeAll(async () => {
    server = await startWebServer(db.url)
    acme = await createCompany(db.sql, { name: "Acme <Safety>" })
    admin = { userId: acme.adminId, email: acme.adminEmail, name: "Ada Admin", companyId: acme.id }
  })
  afterAll(async () => {
    await server?.close()
  })

  it("the sign-in page sets its double-submit cookie; a bad token is refused with the admin API's message", async () => {
    const client = webClient(server.url)
    const page = await client.get("/admin/sign-in")
    expect(page.status).toBe(200)
    expect(page.headers.get("content-type")).toMatch(/^text\/html/)
    const signInCookie = setCookieParts(page.headers.get("set-cookie")!)
    expect(signInCookie.pair).toMatch(/^__Host-srs_admin_signin=[A-Za-z0-9_-]{43}$/)
    expect(signInCookie.attributes).toEqual(OUR_ATTRIBUTES)
    expect(page.text).toContain('<label for="token">Admin token</label>')
    // people type addresses: a trailing slash is forgiven on the pages (never under /api)
    expect((await webClient(server.url).get("/admin/sign-in/")).status).toBe(200)

    for (const [token, message] of [
      ["mat_nope", "unknown admin token"],
      [`mat_${"a".repeat(43)}`, "unknown admin token"]
    ] as const) {
      const r = await client.post("/admin/sign-in", { token })
      expect(r.status).toBe(401)
      expect(r.text).toContain(escapeHtml(`Not signed in: ${message}.`))
      expect(client.cookies.has("__Host-srs_admin")).toBe(false)
      expect((await api(token, "GET", "/admin/v1")).json.error).toBe(message)
    }
    const t = await newToken()
    const revoked = await api(t.token, "POST", `/admin/v1/tokens/${t.id}/revoke`)
    expect(revoked.status).toBe(200)
    const r = await client.post("/admin/sign-in", { token: t.token })
    expect(r.status).toBe(401)
    expect(r.text).toContain("this admin token was revoked")
    expect((await client.post("/admin/sign-in", { token: "" })).status).toBe(400)
    expect(await db.sql`select 1 from service.admin_sessions`).toHaveLength(0)
  })

  it("signing in sets a Secure, HttpOnly, SameSite=Strict __Host- cookie holding a session id, never the token", async () => {
    const t = await newToken()
    const client = webClient(server.url)
    await client.get("/admin/sign-in")
    const r = await client.post("/admin/sign-in", { token: t.token, next: "/admin/activity" })
    expect(r.status).toBe(303)
    expect(r.headers.get("location")).toBe("/admin/activity")
    const cookie = r.headers.get("set-cookie")!
    expect(setCookieParts(cookie).pair).toMatch(/^__Host-srs_admin=[A-Za-z0-9_-]{43}$/)
    expect(setCookieParts(cookie).attributes).toEqual(OUR_ATTRIBUTES)
    expect(cookie).not.toContain(t.token)
    expect(cookie).not.toMatch(/domain=/i)
    const sessionId = client.cookies.get("__Host-srs_admin")!
    const rows = await db.sql<{ id_hash: Buffer; token_id: string; expires_at: Date; absolute_expires_at: Date }[]>`
      select id_hash, token_id::text, expires_at, absolute_expires_at from service.admin_sessions where token_id = ${t.id}`
    expect(rows).toHaveLength(1)
    expect(rows[0]!.id_hash.equals(sha256(sessionId))).toBe(true)
    const idleHours = (rows[0]!.expires_at.getTime() - Date.now()) / 3_600_000
    expect(idleHours).toBeGreaterThan(11.9)
    expect(idleHours).toBeLessThanOrEqual(12)

    const keys = await client.get("/admin/keys")
    expect(keys.status).toBe(200)
    expect(keys.text).toContain("Ada Admin")
    expect(keys.text).toContain("Acme &lt;Safety&gt;")
    expect(keys.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(keys.headers.get("content-security-policy")).not.toContain("unsafe-inline")
    expect(keys.headers.get("x-frame-options")).toBe("DENY")
    expect(keys.headers.get("cache-control")).toBe("no-store")
    expect(keys.headers.get("referrer-policy")).toBe("same-origin")
    expect(keys.headers.get("x-content-type-options")).toBe("nosniff")
    expect(keys.text).not.toMatch(/<script>|<script [^>]*>[^<]/)
    expect(keys.text).toContain('<meta name="viewport"')
    const signInAgain = await client.get("/admin/sign-in")
    expect(signInAgain.status).toBe(303)
    expect(signInAgain.headers.get("location")).toBe("/admin/keys")
    expect((await client.get("/admin")).headers.get("location")).toBe("/admin/keys")
    const script = await request(server.url, "/admin/assets/app.js")
    expect(script.headers.get("content-type")).toMatch(/^text\/javascript/)
  })

  it("pages need a session: the browser is sent to sign in and comes back", async () => {
    for (const path of [
      "/admin/keys",
      "/admin/webhooks",
      "/admin/activity?kind=key",
      "/admin/webhooks/endpoints/00000000-0000-4000-8000-000000000000"
    ]) {
      const r = await request(server.url, path)
      expect(r.status, path).toBe(303)
      expect(r.headers.get("location")).toBe(`/admin/sign-in?next=${encodeURIComponent(path)}`)
    }
    expect((await request(server.url, "/admin")).headers.get("location")).toBe("/admin/sign-in")
    const forged = await request(server.url, "/admin/keys", {
      headers: { cookie: `__Host-srs_admin=${"x".repeat(43)}` }
    })
    expect(forged.status).toBe(303)
    expect(forged.headers.get("location")).toContain("ended=session")
    expect(forged.headers.get("set-cookie")).toMatch(/^__Host-srs_admin=; .*Max-Age=0/)
    // A form without a session changes nothing and goes to sign in.
    const before = await keyCount()
    const post = await request(server.url, "/admin/keys", {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: server.url,
        "sec-fetch-site": "same-origin"
      },
      body: "name=x&read=incidents&expires=never"
    })
    expect(post.status).toBe(303)
    expect(await keyCount()).toBe(before)
  })

  it("a form without the CSRF token, or with another session's, is refused with a 403 page and changes nothing", async () => {
    const { client } = await signedIn()
    const other = await signedIn()
    await client.get("/admin/keys")
    const before = await keyCount()
    const fields = { name: "Sneaky", read: ["incidents"], expires: "never" }
    for (const csrf of [null, "", other.client.csrf(), `${client.csrf()}x`, "a".repeat(43)]) {
      const r = await client.post("/admin/keys", fields, { csrf })
      expect(r.status, String(csrf)).toBe(403)
      expect(r.headers.get("content-type")).toMatch(/^text\/html/)
      expect(r.text).toContain("security token is missing or out of date")
      expect(r.text).toContain("Nothing was changed")
    }
    expect(await keyCount()).toBe(before)
    // Revoking by a forged form changes nothing either.
    const key = (await client.post("/admin/keys", { name: "Real", read: ["incidents"], expires: "never" })).text
    expect(key).toMatch(/mk_[A-Za-z0-9_-]{43}/)
    const [row] = await db.sql<{ id: string }[]>`select id::text from service.api_keys where name = 'Real'`
    expect((await client.post(`/admin/keys/${row!.id}/revoke`, {}, { csrf: null })).status).toBe(403)
    expect((await db.sql`select revoked_at from service.api_keys where id = ${row!.id}`)[0]!.revoked_at).toBeNull()
    expect((await client.post("/admin/keys", fields, { contentType: "text/plain" })).status).toBe(415)
  })

  it("a form from another origin or site is refused with a 403 page even with the right token; nothing changes", async () => {
    const { client } = await signedIn()
    await client.get("/admin/keys")
    const before = await keyCount()
    const fields = { name: "Cross", read: ["incidents"], expires: "never" }
    const port = new URL(server.url).port
    for (const headers of [
      { origin: "http://evil.example", "sec-fetch-site": "cross-site" },
      { origin: "http://localhost:1", "sec-fetch-site": "cross-site" },
      { origin: `http://127.0.0.1:${Number(port) + 1}`, "sec-fetch-site": "same-site" },
      { origin: `http://127.0.0.1:${Number(port) + 1}`, "sec-fetch-site": "" },
      { origin: "null", "sec-fetch-site": "" },
      { origin: "", "sec-fetch-site": "" }
    ]) {
      const r = await client.post("/admin/keys", fields, { headers })
      expect(r.status, JSON.stringify(headers)).toBe(403)
      expect(r.text).toContain("This form was refused")
    }
    expect(await keyCount()).toBe(before)
    // Sign-in is checked the same way (login CSRF), and needs its double-submit cookie.
    const t = await newToken()
    const fresh = webClient(server.url)
    await fresh.get("/admin/sign-in")
    expect(
      (
        await fresh.post(
          "/admin/sign-in",
          { token: t.token },
          { headers: { origin: "http://evil.example", "sec-fetch-site": "cross-site" } }
        )
      ).status
    ).toBe(403)
    fresh.cookies.delete("__Host-srs_admin_signin")
    expect((await fresh.post("/admin/sign-in", { token: t.token })).status).toBe(403)
    expect(await db.sql`select 1 from service.admin_sessions where token_id = ${t.id}`).toHaveLength(0)
  })

  it("keys: created and shown once, listed with who made it and its use, revoked; errors are the admin API's", async () => {
    const { client, token } = await signedIn()
    await client.get("/admin/keys")
    const created = await client.post("/admin/keys", {
      name: "Tableau <BI>",
      read: ["incidents", "audits"],
      expires: "1y",
      webhooks: "on"
    })
    expect(created.status).toBe(200)
    const key = /mk_[A-Za-z0-9_-]{43}/.exec(created.text)![0]
    expect(created.text).toContain("This is the only time the key is shown")
    expect(created.text).toContain("Tableau &lt;BI&gt;")
    expect(created.text).not.toContain("Tableau <BI>")
    expect((await request(server.url, "/api/v1", { key })).status).toBe(200)
    const [row] = await db.sql<
      { id: string; scopes: string[]; webhooks: boolean; created_by_email: string; expires_at: Date }[]
    >`
      select id::text, scopes, webhooks, created_by_email, expires_at from service.api_keys where name = 'Tableau <BI>'`
    expect(row).toMatchObject({ scopes: ["incidents", "audits"], webhooks: true, created_by_email: acme.adminEmail })
    const list = await client.get("/admin/keys")
    expect(list.text).not.toContain(key)
    expect(list.text).toContain(`data-key-id="${row!.id}"`)
    expect(list.text).toContain(acme.adminEmail)

    // The same refusals, in the same words, as POST /admin/v1/keys.
    for (const [fields, body, status] of [
      [{ name: "", read: ["incidents"], expires: "never" }, { name: "", read: ["incidents"], expires: "never" }, 400],
      [
        { name: "x".repeat(101), read: ["incidents"], expires: "never" },
        { name: "x".repeat(101), read: ["incidents"], expires: "never" },
        400
      ],
      [{ name: "no scopes", expires: "never" }, { name: "no scopes", read: [], expires: "never" }, 400]
    ] as const) {
      const page = await client.post("/admin/keys", fields as Record<string, string | ReadonlyArray<string>>)
      const answer = await api(token, "POST", "/admin/v1/keys", body)
      expect(answer.status).toBe(status)
      expect(page.status).toBe(status)
      expect(page.text).toContain(escapeHtml(answer.json.error))
      expect(page.text).toContain('role="alert"')
    }
    const revoked = await client.post(`/admin/keys/${row!.id}/revoke`, {})
    expect(revoked.status).toBe(303)
    const after = await client.get("/admin/keys")
    expect(after.text).toContain("revoked: its next request gets 401")
    expect((await request(server.url, "/api/v1", { key })).status).toBe(401)
    const again = await client.post(`/admin/keys/${row!.id}/revoke`, {})
    expect(again.status).toBe(303)
    const apiAgain = await api(token, "POST", `/admin/v1/keys/${row!.id}/revoke`)
    expect(apiAgain.status).toBe(409)
    expect((await client.get("/admin/keys")).text).toContain(escapeHtml(apiAgain.json.error))
  })

  it("the 21st active key is refused with the admin API's 409 message", async () => {
    const c = await createCompany(db.sql)
    const t = await newToken(c)
    const client = webClient(server.url)
    await client.signIn(t.token)
    await client.get("/admin/keys")
    for (let i = 0; i < 20; i++)
      expect((await client.post("/admin/keys", { name: `k${i}`, read: ["incidents"], expires: "30d" })).status).toBe(
        200
      )
    const page = await client.post("/admin/keys", { name: "k21", read: ["incidents"], expires: "30d" })
    const answer = await api(t.token, "POST", "/admin/v1/keys", { name: "k21", read: ["incidents"] })
    expect(answer.status).toBe(409)
    expect(page.status).toBe(409)
    expect(page.text).toContain(escapeHtml(answer.json.error))
    expect(page.text).toContain('value="k21"')
  })

  it("webhooks: a private address is refused in the admin API's words; the form keeps what was typed", async () => {
    const { client, token } = await signedIn()
    await client.get("/admin/webhooks")
    for (const [url, events] of [
      ["https://10.1.2.3/hook", ["incident.created"]],
      ["http://example.com/hook", ["incident.created"]],
      ["https://203.0.113.9/hook", []]
    ] as const) {
      const page = await client.post("/admin/webhooks/endpoints", { name: "Private", url, events })
      const answer = await api(token, "POST", "/admin/v1/endpoints", { name: "Private", url, events })
      expect(answer.status).toBe(400)
      expect(page.status).toBe(400)
      expect(page.text).toContain(escapeHtml(answer.json.error))
      expect(page.text).toContain(`value="${escapeHtml(url)}"`)
    }
    // A NUL character no field can hold: refused up front, not a 500 from the database.
    for (const fields of [
      { name: "a\u0000b", url: "https://203.0.113.9/hook", events: ["incident.created"] },
      { name: "Nul", url: "https://203.0.113.9/h\u0000ook", events: ["incident.created"] }
    ]) {
      const page = await client.post("/admin/webhooks/endpoints", fields)
      expect(page.status).toBe(400)
      expect(page.text).toContain("NUL character")
    }
    expect(await db.sql`select 1 from service.webhook_endpoints`).toHaveLength(0)
    const missing = await client.get("/admin/webhooks/endpoints/00000000-0000-4000-8000-000000000000")
    expect(missing.status).toBe(404)
    expect((await client.get("/admin/webhooks/endpoints/nope")).status).toBe(404)
  })

  it("webhooks: an endpoint's rate and ordering from the form, shown with its circuit; a bad rate is refused in the admin API's words and changes nothing", async () => {
    const { client, token } = await signedIn()
    await client.get("/admin/webhooks")
    const fields = { name: "Paced", url: "https://93.184.216.34/paced", events: ["incident.created"] }
    const bad = await client.post("/admin/webhooks/endpoints", { ...fields, rateLimit: "0", ordering: "record" })
    const answer = await api(token, "POST", "/admin/v1/endpoints", { ...fields, rateLimit: 0 })
    expect([bad.status, answer.status]).toEqual([400, 400])
    expect(bad.text).toContain(escapeHtml(answer.json.error))
    expect(bad.text).toContain('value="0"')
    const words = await client.post("/admin/webhooks/endpoints", { ...fields, rateLimit: "fast" })
    expect(words.status).toBe(400)
    expect(words.text).toContain("rateLimit must be a number of deliveries per second")
    expect(await db.sql`select 1 from service.webhook_endpoints where name = 'Paced'`).toHaveLength(0)

    const made = await client.post("/admin/webhooks/endpoints", { ...fields, rateLimit: "2.5", ordering: "record" })
    expect(made.status).toBe(200)
    const [row] = await db.sql<{ id: string; rate_limit: number; ordering: string }[]>`
      select id::text, rate_limit, ordering from service.webhook_endpoints where name = 'Paced'`
    expect(row).toMatchObject({ rate_limit: 2.5, ordering: "record" })
    const path = `/admin/webhooks/endpoints/${row!.id}`
    const shown = await client.get(path)
    expect(shown.text).toContain("at most 2.5 deliveries a second")
    expect(shown.text).toContain("each record&#39;s events in the order they happened")
    expect(shown.text).toMatch(/<dd id="circuit"><span class="state on">Closed<\/span>/)

    await db.sql`
      insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at, last_error)
      values (${row!.id}, ${acme.id}, 'open', 5, '2026-03-04T05:06:07.089Z', '2026-03-04T05:06:17.089Z', 'timeout: no answer')`
    const open = await client.get(path)
    expect(open.text).toMatch(/<dd id="circuit"><span class="state failing">Open<\/span> since/)
    expect(open.text).toContain("after 5 timeouts or refused connections in a row")
    expect((await client.get("/admin/webhooks")).text).toContain("Circuit open")

    // The edit form, emptied: no limit, no order.
    const saved = await client.post(path, { name: "Paced", url: fields.url, events: fields.events, rateLimit: "" })
    expect(saved.status).toBe(303)
    expect((await db.sql`select rate_limit, ordering from service.webhook_endpoints where id = ${row!.id}`)[0]).toEqual(
      {
        rate_limit: null,
        ordering: "none"
      }
    )
    await db.sql`delete from service.webhook_endpoints where id = ${row!.id}`
  })

  it("webhooks: an endpoint's filter and thin payloads from the form, shown on its page; a bad filter is refused in the admin API's words, keeps what was typed and changes nothing", async () => {
    const { client, token } = await signedIn()
    await client.get("/admin/webhooks")
    const fields = { name: "Pager", url: "https://93.184.216.34/pager", events: ["incident.created"] }
    const bad = await client.post("/admin/webhooks/endpoints", { ...fields, filter: '{"personName": "Sam"}' })
    const answer = await api(token, "POST", "/admin/v1/endpoints", { ...fields, filter: { personName: "Sam" } })
    expect([bad.status, answer.status]).toEqual([400, 400])
    expect(bad.text).toContain(escapeHtml(answer.json.error))
    expect(bad.text).toContain(escapeHtml('{"personName": "Sam"}'))
    const notJson = await client.post("/admin/webhooks/endpoints", { ...fields, filter: "severity is serious" })
    expect(notJson.status).toBe(400)
    expect(notJson.text).toContain("filter: must be a JSON object")
    expect(await db.sql`select 1 from service.webhook_endpoints where name = 'Pager'`).toHaveLength(0)

    const made = await client.post("/admin/webhooks/endpoints", {
      ...fields,
      filter: '{"severity": {"$in": ["serious", "critical"]}}',
      payload: "thin"
    })
    expect(made.status).toBe(200)
    const [row] = await db.sql<{ id: string; filter: unknown; payload: string }[]>`
      select id::text, filter, payload from service.webhook_endpoints where name = 'Pager'`
    expect(row).toMatchObject({ filter: { severity: { $in: ["serious", "critical"] } }, payload: "thin" })
    const path = `/admin/webhooks/endpoints/${row!.id}`
    const shown = await client.get(path)
    expect(shown.text).toContain(escapeHtml('{"severity":{"$in":["serious","critical"]}}'))
    expect(shown.text).toContain("thin: the record&#39;s id, company and API address only")

    // The edit form with the filter emptied and the box unticked: every event, whole records.
    const saved = await client.post(path, { ...fields, filter: "" })
    expect(saved.status).toBe(303)
    expect((await db.sql`select filter, payload from service.webhook_endpoints where id = ${row!.id}`)[0]).toEqual({
      filter: null,
      payload: "full"
    })
    await db.sql`delete from service.webhook_endpoints where id = ${row!.id}`
  })

  it("webhooks: rotating a secret takes an overlap (24h unless changed); a bad one is refused in the admin API's words and changes nothing", async () => {
    const { client, token } = await signedIn()
    const made = await api(token, "POST", "/admin/v1/endpoints", {
      name: "Rotating",
      url: "https://93.184.216.34/rotate",
      events: ["incident.created"]
    })
    expect(made.status).toBe(201)
    const path = `/admin/webhooks/endpoints/${made.json.id}`
    const page = await client.get(path)
    expect(page.text).toContain('<label for="rotate-overlap">Old secret keeps signing for</label>')
    expect(page.text).toMatch(/<input type="text" id="rotate-overlap" name="overlap" required value="24h"/)
    expect(page.text).not.toContain("Old secret signs until")
    const stored = () =>
      db.sql`select secret, previous_secret, previous_secret_expires_at, secret_rotated_at from service.webhook_endpoints where id = ${made.json.id}`
    const before = await stored()

    for (const overlap of ["2 weeks", "8d", ""]) {
      const refused = await client.post(`${path}/rotate-secret`, { overlap })
      const answer = await api(token, "POST", `/admin/v1/endpoints/${made.json.id}/rotate-secret`, { overlap })
      expect(answer.status, overlap).toBe(400)
      expect(refused.status, overlap).toBe(400)
      expect(refused.text, overlap).toContain(
        `<p class="form-error" role="alert" id="rotate-secret-error">${escapeHtml(answer.json.error)}</p>`
      )
      expect(refused.text, overlap).toContain(`name="overlap" required value="${escapeHtml(overlap)}"`)
      expect(refused.text, overlap).not.toMatch(/whsec_/)
    }
    expect(await stored()).toEqual(before)

    const rotated = await client.post(`${path}/rotate-secret`, { overlap: "24h" })
    expect(rotated.status).toBe(200)
    const [row] = await db.sql<
      { until: Date }[]
    >`select previous_secret_expires_at as until from service.webhook_endpoints where id = ${made.json.id}`
    const until = row!.until.toISOString()
    expect(rotated.text).toMatch(/<code id="new-secret" class="secret" tabindex="0">whsec_[A-Za-z0-9+/]{43}=<\/code>/)
    expect(rotated.text).toContain(
      `Until ${until.slice(0, 16).replace("T", " ")} UTC they are signed with the old secret too`
    )
    expect(rotated.text).toContain(`<dt>Old secret signs until</dt><dd><time datetime="${until}">`)

    const cut = await client.post(`${path}/rotate-secret`, { overlap: "0" })
    expect(cut.status).toBe(200)
    expect(cut.text).toContain("The old secret no longer signs anything.")
    expect(cut.text).not.toContain("Old secret signs until")
    expect((await db.sql`select previous_secret from service.webhook_endpoints where id = ${made.json.id}`)[0]).toEqual(
      { previous_secret: null }
    )
    const log = await api(token, "GET", "/admin/v1/activity?kind=endpoint.secret_rotated")
    expect(
      log.json.data
        .filter((e: { subjectId: string }) => e.subjectId === made.json.id)
        .map((e: { details: unknown }) => e.details)
    ).toEqual([
      { overlapSeconds: 0, previousSecretExpiresAt: null },
      { overlapSeconds: 86_400, previousSecretExpiresAt: until }
    ])
  })

  it("webhooks: Send Again of no such delivery, sent back to no such endpoint, still says what went wrong", async () => {
    const { client } = await signedIn()
    await client.get("/admin/webhooks")
    const nobody = "00000000-0000-4000-8000-0000000000aa"
    const r = await client.post(`/admin/webhooks/deliveries/${nobody}/resend`, { endpoint: nobody })
    expect(r.status).toBe(303)
    const page = await client.get(r.headers.get("location")!)
    expect(page.status).toBe(404)
    expect(page.text).toContain(`no delivery ${nobody}`)
  })

  it("webhooks: only the events of modules that are on are offered", async () => {
    const { client } = await signedIn()
    const before = await client.get("/admin/webhooks")
    expect(before.text).toContain('value="permit.approved"')
    await db.sql`update service.companies set modules = array_remove(modules, 'permits') where id = ${acme.id}`
    try {
      const after = await client.get("/admin/webhooks")
      expect(after.text).not.toContain('value="permit.approved"')
      expect(after.text).not.toContain('value="permit.closed"')
      expect(after.text).toContain('value="incident.created"')
    } finally {
      await db.sql`update service.companies set modules = array_append(modules, 'permits') where id = ${acme.id}`
    }
  })

  it("an idle or too old session, a revoked or expired token and a user no longer admin all send the browser back to sign in", async () => {
    const idle = await signedIn()
    await db.sql`update service.admin_sessions set expires_at = now() - interval '1 second' where token_id = ${idle.tokenId}`
    const r1 = await idle.client.get("/admin/keys")
    expect(r1.status).toBe(303)
    expect(r1.headers.get("location")).toBe("/admin/sign-in?next=%2Fadmin%2Fkeys&ended=session")
    expect(await db.sql`select 1 from service.admin_sessions where token_id = ${idle.tokenId}`).toHaveLength(0)
    const notice = await idle.client.get(r1.headers.get("location")!)
    expect(notice.text).toContain("Your session has ended")
    // Told as information, not as a success.
    expect(notice.text).toContain('<div class="flash info" role="status"><p>Your session has ended')

    const revoked = await signedIn()
    expect((await revoked.client.get("/admin/keys")).status).toBe(200)
    expect((await api(revoked.token, "POST", `/admin/v1/tokens/${revoked.tokenId}/revoke`)).status).toBe(200)
    expect(await db.sql`select 1 from service.admin_sessions where token_id = ${revoked.tokenId}`).toHaveLength(0)
    expect((await revoked.client.get("/admin/webhooks")).status).toBe(303)

    const expired = await signedIn()
    await db.sql`update service.admin_tokens set expires_at = now() - interval '1 second' where id = ${expired.tokenId}`
    expect((await expired.client.get("/admin/activity")).status).toBe(303)
    const absolute = await signedIn()
    await db.sql`update service.admin_sessions set absolute_expires_at = now() - interval '1 second' where token_id = ${absolute.tokenId}`
    expect((await absolute.client.get("/admin/keys")).status).toBe(303)

    const demoted = await signedIn()
    await db.sql`update app.users set role = 'member' where id = ${admin.userId}`
    try {
      const r = await demoted.client.get("/admin/keys")
      expect(r.status).toBe(303)
      expect(r.headers.get("location")).toContain("ended=role")
    } finally {
      await db.sql`update app.users set role = 'admin' where id = ${admin.userId}`
    }

    const out = await signedIn()
    await out.client.get("/admin/keys")
    const signOut = await out.client.post("/admin/sign-out", {})
    expect(signOut.status).toBe(303)
    expect(signOut.headers.get("set-cookie")).toMatch(/Max-Age=0/)
    expect(await db.sql`select 1 from service.admin_sessions where token_id = ${out.tokenId}`).toHaveLength(0)
  })

  it("other methods on the pages' paths answer 405; the activity log filters by kind", async () => {
    const wrong = await request(server.url, "/admin/keys", { method: "DELETE" })
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("GET, HEAD, POST")
    const { client } = await signedIn()
    const all = await client.get("/admin/activity")
    expect(all.status).toBe(200)
    expect(all.text).toContain("key.created")
    const tokens = await client.get("/admin/activity?kind=admin_token")
    expect(tokens.text).toContain("admin_token.created")
    expect(tokens.text).not.toContain("<code>key.created</code>")
    const weird = await client.get(`/admin/activity?kind=${encodeURIComponent('"><script>x</script>')}`)
    expect(weird.text).not.toContain("<script>x")
  })
})
