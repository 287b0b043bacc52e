// The admin HTTP API (/admin/v1) with admin tokens the CLI issues: the same operations as
// the CLI, JSON errors, and tokens that stop working when revoked or when their user is no
// longer an admin. Every answer is checked against /admin/v1/openapi.json.
import { beforeAll, describe, expect, it } from "vitest"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { openApiChecker, request, type OpenApiChecker, caller } from "../../support/http.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { runCli } from "../../support/cli.ts"
import { useDatabase, useServer } from "../../support/fixtures.ts"

describe("admin HTTP API", () => {
  const db = useDatabase()
  const server = useServer(db)
  let checker: OpenApiChecker
  let acme: TestCompany
  let token: string
  let tokenId: string

  const call = caller(server, () => checker)

  beforeAll(async () => {
    checker = await openApiChecker((await request(server.url, "/admin/v1/openapi.json")).json)
    acme = await createCompany(db.sql, { name: "Acme Safety" })
    const r = await runCli(["tokens", "create", "--as", acme.adminEmail, "--name", "ci", "--json"], {
      DATABASE_URL: db.url
    })
    expect(r.code).toBe(0)
    ;({ id: tokenId, token } = JSON.parse(r.stdout))
    expect(token).toMatch(/^mat_/)
  })

  it("401 without a token or with a wrong one", async () => {
    for (const t of [undefined, "mat_nope", `mk_${"a".repeat(43)}`]) {
      const a = await call("GET", "/admin/v1/keys", t === undefined ? {} : { token: t })
      expect(a.status).toBe(401)
    }
  })

  it("who am I", async () => {
    const a = await call("GET", "/admin/v1", { token })
    expect(a.status).toBe(200)
    expect(a.json).toEqual({
      company: { id: acme.id, name: "Acme Safety", host: acme.host },
      admin: { id: acme.adminId, email: acme.adminEmail, name: "Ada Admin" }
    })
  })

  it("creates, lists, shows and revokes keys; the read API follows", async () => {
    const created = await call("POST", "/admin/v1/keys", {
      token,
      body: { name: "Tableau", read: ["incidents", "audits"], expires: "1y" }
    })
    expect(created.status).toBe(201)
    expect(created.json).toMatchObject({
      name: "Tableau",
      scopes: ["incidents", "audits"],
      webhooks: false,
      companyId: acme.id
    })
    expect(created.json.key).toMatch(/^mk_/)
    // An answer with a key in it is stored nowhere on the way (nor is any admin answer).
    expect(created.headers.get("cache-control")).toBe("no-store")
    expect((await call("GET", "/admin/v1", { token })).headers.get("cache-control")).toBe("no-store")
    const read = await request(server.url, "/api/v1", { key: created.json.key })
    expect(read.status).toBe(200)
    expect(read.headers.get("cache-control")).toBeNull()
    const all = await call("POST", "/admin/v1/keys", {
      token,
      body: { name: "Everything", read: "all", webhooks: true }
    })
    expect(all.json.scopes).toEqual([...RESOURCES])
    expect(all.json.expiresAt).toBeNull()

    const list = await call("GET", "/admin/v1/keys", { token })
    expect(list.json.data.map((k: { name: string }) => k.name)).toEqual(["Everything", "Tableau"])
    expect(list.json.data[1]).toMatchObject({ createdBy: acme.adminEmail, state: "active" })
    // Tableau's one request may or may not be flushed yet (usage is written every few seconds); Everything made none.
    expect(list.json.data[0]).toMatchObject({ requestCount: 0 })
    expect(JSON.stringify(list.json)).not.toContain(created.json.key)

    const one = await call("GET", `/admin/v1/keys/${created.json.id}`, { token })
    expect(one.json.name).toBe("Tableau")

    const revoked = await call("POST", `/admin/v1/keys/${created.json.id}/revoke`, { token })
    expect(revoked.status).toBe(200)
    expect(revoked.json).toMatchObject({ state: "revoked", revokedBy: acme.adminEmail })
    expect((await request(server.url, "/api/v1", { key: created.json.key })).status).toBe(401)
    const twice = await call("POST", `/admin/v1/keys/${created.json.id}/revoke`, { token })
    expect(twice.status).toBe(409)
    const kinds = await db.sql<
      { kind: string }[]
    >`select kind from service.activity where subject_id = ${created.json.id} order by id`
    expect(kinds.map((k) => k.kind)).toEqual(["key.created", "key.revoked"])
  })

  it("400 for a bad body, 404 for another company's or an unknown key, 405 for other methods", async () => {
    for (const body of [
      {},
      { name: "x" },
      { name: "x", read: ["nope"] },
      { name: "x", read: "all", expires: "2d" },
      { name: "", read: "all" },
      "{not json"
    ]) {
      const a = await call("POST", "/admin/v1/keys", { token, body })
      expect(a.status, JSON.stringify(body)).toBe(400)
    }
    const them = await createCompany(db.sql)
    const r = await runCli(
      [
        "keys",
        "create",
        "--company",
        them.host,
        "--name",
        "theirs",
        "--read",
        "all",
        "--as",
        them.adminEmail,
        "--json"
      ],
      { DATABASE_URL: db.url }
    )
    const theirs = JSON.parse(r.stdout).id
    for (const path of [
      `/admin/v1/keys/${theirs}`,
      "/admin/v1/keys/00000000-0000-4000-8000-000000000000",
      "/admin/v1/keys/nope"
    ]) {
      expect((await call("GET", path, { token })).status).toBe(404)
    }
    expect((await call("POST", `/admin/v1/keys/${theirs}/revoke`, { token })).status).toBe(404)
    // a body that is not JSON: 400 in the error shape too
    const form = await request(server.url, "/admin/v1/keys", {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
      body: "name=x&read=all"
    })
    expect(form.status).toBe(400)
    expect(form.json).toEqual({
      error:
        "invalid request body: send JSON with Content-Type: application/json (got application/x-www-form-urlencoded)"
    })
    checker.check("POST", "/admin/v1/keys", form)
    const wrong = await request(server.url, "/admin/v1/keys", {
      method: "DELETE",
      headers: { authorization: `Bearer ${token}` }
    })
    expect(wrong.status).toBe(405)
    expect(wrong.headers.get("allow")).toBe("GET, HEAD, POST")
  })

  it("portal links: an hour unless said, at most 24 hours; only for an active key with the webhooks permission", async () => {
    const key = (
      await call("POST", "/admin/v1/keys", { token, body: { name: "Contractor", read: "all", webhooks: true } })
    ).json
    const plain = (await call("POST", "/admin/v1/keys", { token, body: { name: "Reader", read: "all" } })).json
    const link = await call("POST", `/admin/v1/keys/${key.id}/portal-links`, {
      token,
      body: { expiresIn: "90m", branding: { name: "Acme Partners", colour: "#0B4F8A" } }
    })
    expect(link.status, link.text).toBe(201)
    expect(link.json).toMatchObject({ keyId: key.id, keyName: "Contractor" })
    expect(link.json.path).toMatch(/^\/portal\/[A-Za-z0-9_-]{43}$/)
    expect(link.json.url).toBe(`${server.url}${link.json.path}`)
    const life = Date.parse(link.json.expiresAt) - Date.now()
    expect(life).toBeGreaterThan(89 * 60_000)
    expect(life).toBeLessThanOrEqual(90 * 60_000)
    const [row] = await db.sql<{ token_hash: Buffer; brand_colour: string; created_by: string }[]>`
      select token_hash, brand_colour, created_by from service.portal_links where id = ${link.json.id}`
    expect(row!.token_hash).toHaveLength(32)
    expect(row!.brand_colour).toBe("#0b4f8a")
    expect(row!.created_by).toBe(acme.adminEmail)
    const byDefault = await call("POST", `/admin/v1/keys/${key.id}/portal-links`, { token, body: {} })
    expect(Date.parse(byDefault.json.expiresAt) - Date.now()).toBeGreaterThan(59 * 60_000)
    expect(Date.parse(byDefault.json.expiresAt) - Date.now()).toBeLessThanOrEqual(60 * 60_000)
    for (const [body, status, message] of [
      [{ expiresIn: "25h" }, 400, "at most 24 hours"],
      [{ expiresIn: 86_401 }, 400, "at most 24 hours"],
      [{ expiresIn: "tomorrow" }, 400, "not a duration"],
      [{ branding: { colour: "red" } }, 400, "not a colour"],
      [{ lifetime: "1h" }, 400, "lifetime"]
    ] as const) {
      const a = await call("POST", `/admin/v1/keys/${key.id}/portal-links`, { token, body })
      expect(a.status, JSON.stringify(body)).toBe(status)
      expect(a.json.error).toContain(message)
    }
    const noHooks = await call("POST", `/admin/v1/keys/${plain.id}/portal-links`, { token, body: {} })
    expect(noHooks.status).toBe(409)
    expect(noHooks.json.error).toContain("no webhooks permission")
    const other = await createCompany(db.sql)
    const theirs = JSON.parse(
      (
        await runCli(
          [
            "keys",
            "create",
            "--company",
            other.host,
            "--name",
            "x",
            "--read",
            "all",
            "--webhooks",
            "--as",
            other.adminEmail,
            "--json"
          ],
          { DATABASE_URL: db.url }
        )
      ).stdout
    )
    expect((await call("POST", `/admin/v1/keys/${theirs.id}/portal-links`, { token, body: {} })).status).toBe(404)
    await call("POST", `/admin/v1/keys/${key.id}/revoke`, { token })
    expect((await call("POST", `/admin/v1/keys/${key.id}/portal-links`, { token, body: {} })).status).toBe(409)
    const kinds = (
      await db.sql<{ kind: string }[]>`
      select kind from service.activity where company_id = ${acme.id} and kind = 'portal_link.created'`
    ).length
    expect(kinds).toBe(2)
  })

  it("409 for the 21st active key", async () => {
    const c = await createCompany(db.sql)
    const t = JSON.parse(
      (await runCli(["tokens", "create", "--as", c.adminEmail, "--json"], { DATABASE_URL: db.url })).stdout
    ).token
    for (let i = 0; i < 20; i++) {
      const a = await call("POST", "/admin/v1/keys", { token: t, body: { name: `k${i}`, read: "all" } })
      expect(a.status).toBe(201)
    }
    const refused = await call("POST", "/admin/v1/keys", { token: t, body: { name: "k21", read: "all" } })
    expect(refused.status).toBe(409)
    expect(refused.json.error).toMatch(/already has 20 active API keys/)
  })

  it("tokens: listed, revoked, and refused once their user is no longer an admin", async () => {
    const list = await call("GET", "/admin/v1/tokens", { token })
    expect(list.json.data[0]).toMatchObject({ id: tokenId, name: "ci", userEmail: acme.adminEmail, state: "active" })
    const cliList = await runCli(["tokens", "list", "--company", acme.host, "--json"], { DATABASE_URL: db.url })
    expect(JSON.parse(cliList.stdout)[0].id).toBe(tokenId)

    const second = JSON.parse(
      (await runCli(["tokens", "create", "--as", acme.adminEmail, "--json"], { DATABASE_URL: db.url })).stdout
    )
    expect((await call("POST", `/admin/v1/tokens/${second.id}/revoke`, { token })).status).toBe(200)
    expect((await call("GET", "/admin/v1/keys", { token: second.token })).status).toBe(401)

    await db.sql`update app.users set role = 'member' where id = ${acme.adminId}`
    try {
      const a = await call("GET", "/admin/v1/keys", { token })
      expect(a.status).toBe(401)
      expect(a.json.error).toMatch(/no longer an admin/)
    } finally {
      await db.sql`update app.users set role = 'admin' where id = ${acme.adminId}`
    }
    const revoked = await runCli(["tokens", "revoke", tokenId, "--as", acme.adminEmail, "--json"], {
      DATABASE_URL: db.url
    })
    expect(revoked.code).toBe(0)
    expect((await call("GET", "/admin/v1/keys", { token })).status).toBe(401)
  })

  it("the admin document validates and the docs page is served", async () => {
    expect(checker.document.openapi).toBe("3.1.0")
    expect((await request(server.url, "/admin/v1/docs")).status).toBe(200)
  })
})
