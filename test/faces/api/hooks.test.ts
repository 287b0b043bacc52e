// /api/v1/hooks through real HTTP to the real server: the rules of
// docs/api.md#webhook-subscriptions, its record, a repeated subscribe answering the same
// subscription, the secret only on subscribing, every error as {"error"}, and the answers as the
// OpenAPI document says.
import { beforeAll, describe, expect, it } from "vitest"
import { parseAllowedNetworksOrThrow } from "../../../src/webhooks/net/address-guard.ts"
import { makeKey, openApiChecker, request, type OpenApiChecker, caller } from "../../support/http.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { useDatabase, useServer } from "../../support/fixtures.ts"

const HOOK_URL = "https://127.0.0.1:9/hooks/a"

describe("/api/v1/hooks", () => {
  const db = useDatabase()
  const server = useServer(db, {}, { webhooks: { allowed: parseAllowedNetworksOrThrow("127.0.0.0/8") } })
  let acme: TestCompany
  let other: TestCompany
  let checker: OpenApiChecker
  let full: string // webhooks, reads everything
  let plain: string // no webhooks permission
  let narrow: string // webhooks, reads incidents only
  let foreign: string // webhooks, another company

  const send = caller(
    () => server.url,
    () => checker
  )
  const call = (method: string, path: string, key: string, body?: unknown) => send(method, path, { token: key, body })

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme" })
    other = await createCompany(db.sql, { name: "Other" })
    full = (await makeKey(db, acme, { webhooks: true, name: "full" })).key
    plain = (await makeKey(db, acme, { webhooks: false, name: "plain" })).key
    narrow = (await makeKey(db, acme, { webhooks: true, scopes: ["incidents"], name: "narrow" })).key
    foreign = (await makeKey(db, other, { webhooks: true, name: "foreign" })).key
    const doc = await request(server.url, "/api/v1/openapi.json")
    checker = await openApiChecker(doc.json)
  })

  it("is in the OpenAPI document with its four operations", () => {
    const paths = checker.document.paths
    expect(Object.keys(paths["/api/v1/hooks"])).toEqual(expect.arrayContaining(["post", "get"]))
    expect(Object.keys(paths["/api/v1/hooks/{id}"])).toEqual(expect.arrayContaining(["get", "delete"]))
    expect(Object.keys(paths["/api/v1/hooks"].post.responses)).toEqual(
      expect.arrayContaining(["201", "400", "401", "403"])
    )
  })

  it("403 without the webhooks permission, on every operation", async () => {
    for (const [method, path, body] of [
      ["POST", "/api/v1/hooks", { url: HOOK_URL, event: "incident.created" }],
      ["GET", "/api/v1/hooks", undefined],
      ["GET", "/api/v1/hooks/00000000-0000-4000-8000-000000000000", undefined],
      ["DELETE", "/api/v1/hooks/00000000-0000-4000-8000-000000000000", undefined]
    ] as const) {
      const a = await call(method, path, plain, body)
      expect(a.status, `${method} ${path}`).toBe(403)
      expect(a.json.error).toMatch(/webhooks permission/)
    }
    // Rule 1 comes first: a malformed body from such a key is still 403, not 400.
    for (const body of ["{not json", { event: "incident.created" }, { url: 1, event: [] }]) {
      const a = await call("POST", "/api/v1/hooks", plain, body)
      expect(a.status, JSON.stringify(body)).toBe(403)
      expect(a.json.error).toMatch(/webhooks permission/)
    }
  })

  it("a key revoked a moment ago gets 401 on its next hooks request (not 403), on every operation", async () => {
    const soon = await makeKey(db, acme, { webhooks: true, name: "soon revoked" })
    const made = await call("POST", "/api/v1/hooks", soon.key, { url: HOOK_URL, event: "permit.closed" })
    expect(made.status).toBe(201)
    // The API has just authenticated the key, so it is in its in-memory directory.
    expect((await call("GET", "/api/v1/hooks", soon.key)).status).toBe(200)
    await db.sql`update service.api_keys set revoked_at = now() where id = ${soon.id}`
    for (const [method, path, body] of [
      ["POST", "/api/v1/hooks", { url: HOOK_URL, event: "incident.created" }],
      ["GET", "/api/v1/hooks", undefined],
      ["GET", `/api/v1/hooks/${made.json.id}`, undefined],
      ["DELETE", `/api/v1/hooks/${made.json.id}`, undefined]
    ] as const) {
      const a = await call(method, path, soon.key, body)
      expect(a.status, `${method} ${path}`).toBe(401)
      expect(Object.keys(a.json)).toEqual(["error"])
    }
  })

  it("401 without a key", async () => {
    const a = await request(server.url, "/api/v1/hooks")
    expect(a.status).toBe(401)
    expect(Object.keys(a.json)).toEqual(["error"])
  })

  it("subscribes: 201 with the 2.4 record and a whsec_ secret; repeating answers 201 with the same id", async () => {
    const a = await call("POST", "/api/v1/hooks", full, { url: HOOK_URL, event: "incident.created" })
    expect(a.status).toBe(201)
    expect(Object.keys(a.json).sort()).toEqual(["active", "createdAt", "event", "id", "name", "secret", "url"])
    expect(a.json).toMatchObject({ name: "incident.created", event: "incident.created", url: HOOK_URL, active: true })
    expect(a.json.secret).toMatch(/^whsec_/)
    expect(new Date(a.json.createdAt).toISOString()).toBe(a.json.createdAt)
    // It carries the signing secret: no cache on the way may keep it.
    expect(a.headers.get("cache-control")).toBe("no-store")

    const again = await call("POST", "/api/v1/hooks", full, { url: HOOK_URL, event: "incident.created" })
    expect(again.status).toBe(201)
    expect(again.json.id).toBe(a.json.id)
    expect(again.json.secret).toBe(a.json.secret)

    // A subscribe that succeeds leaves the subscription on, also one an admin turned off (rule 3 of
    // docs/api.md#webhook-subscriptions).
    await db.sql`update service.webhook_subscriptions set active = false where id = ${a.json.id}`
    const back = await call("POST", "/api/v1/hooks", full, { url: HOOK_URL, event: "incident.created" })
    expect(back.status).toBe(201)
    expect(back.json).toMatchObject({ id: a.json.id, active: true })
    const [on] = await db.sql<
      { active: boolean }[]
    >`select active from service.webhook_subscriptions where id = ${a.json.id}`
    expect(on!.active).toBe(true)

    // one secret per key (rule 6)
    const second = await call("POST", "/api/v1/hooks", full, { url: HOOK_URL, event: "permit.approved" })
    expect(second.status).toBe(201)
    expect(second.json.id).not.toBe(a.json.id)
    expect(second.json.secret).toBe(a.json.secret)
    const [row] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.webhook_subscriptions where url = ${HOOK_URL}`
    expect(row!.n).toBe(2)
  })

  it("GET lists the key's subscriptions and the events it may subscribe to, never the secret", async () => {
    const a = await call("GET", "/api/v1/hooks", full)
    expect(a.status).toBe(200)
    expect(a.json.data.map((s: { event: string }) => s.event).sort()).toEqual(["incident.created", "permit.approved"])
    expect(a.text).not.toContain("whsec_")
    expect(a.json.events).toContain("incident.created")
    expect(a.json.events).toContain("permit.closed")
    const n = await call("GET", "/api/v1/hooks", narrow)
    // The alerts about its own subscriptions need no resource.
    expect(n.json).toEqual({
      data: [],
      events: ["incident.created", "webhook.failing", "webhook.recovered", "webhook.switched_off"]
    })

    const one = await call("GET", `/api/v1/hooks/${a.json.data[0].id}`, full)
    expect(one.status).toBe(200)
    expect(one.json).toEqual(a.json.data[0])
    expect(one.json).not.toHaveProperty("secret")
  })

  it("400 for http://, private addresses, a non-URL and a malformed body", async () => {
    for (const url of [
      "http://127.0.0.1:9/x",
      "https://10.0.0.1/x",
      "https://169.254.169.254/latest",
      "https://[::1]/x",
      "not a url"
    ]) {
      const a = await call("POST", "/api/v1/hooks", full, { url, event: "incident.created" })
      expect(a.status, url).toBe(400)
    }
    expect((await call("POST", "/api/v1/hooks", full, { event: "incident.created" })).status).toBe(400)
    expect((await call("POST", "/api/v1/hooks", full, "{not json")).status).toBe(400)
  })

  it("400 for an unknown event; 403 for an event about records the key cannot read", async () => {
    const unknown = await call("POST", "/api/v1/hooks", full, { url: HOOK_URL, event: "incident.deleted" })
    expect(unknown.status).toBe(400)
    expect(unknown.json.error).toMatch(/event/)
    const unreadable = await call("POST", "/api/v1/hooks", narrow, { url: HOOK_URL, event: "permit.approved" })
    expect(unreadable.status).toBe(403)
    expect(unreadable.json.error).toMatch(/cannot read permits/)
    const readable = await call("POST", "/api/v1/hooks", narrow, { url: HOOK_URL, event: "incident.created" })
    expect(readable.status).toBe(201)
  })

  it("404 for a missing, malformed or foreign id; DELETE answers 204 and the id is gone", async () => {
    const mine = await call("POST", "/api/v1/hooks", full, {
      url: "https://127.0.0.1:9/hooks/del",
      event: "audit.created"
    })
    expect(mine.status).toBe(201)
    for (const key of [foreign, narrow]) {
      expect((await call("GET", `/api/v1/hooks/${mine.json.id}`, key)).status).toBe(404)
      expect((await call("DELETE", `/api/v1/hooks/${mine.json.id}`, key)).status).toBe(404)
    }
    expect((await call("GET", "/api/v1/hooks/00000000-0000-4000-8000-000000000000", full)).status).toBe(404)
    expect((await call("GET", "/api/v1/hooks/nope", full)).status).toBe(404)
    const del = await call("DELETE", `/api/v1/hooks/${mine.json.id}`, full)
    expect(del.status).toBe(204)
    expect(del.text).toBe("")
    expect((await call("GET", `/api/v1/hooks/${mine.json.id}`, full)).status).toBe(404)
    expect((await call("DELETE", `/api/v1/hooks/${mine.json.id}`, full)).status).toBe(404)
  })
})
