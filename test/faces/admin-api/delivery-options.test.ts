import { beforeAll, describe, expect, it } from "vitest"
import {
  caller,
  keyCaller,
  makeKey,
  makeToken,
  openApiChecker,
  request,
  type OpenApiChecker
} from "../../support/http.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { useServiceWorld } from "../../support/world.ts"

const RATE_ERROR =
  "rateLimit must be a number of deliveries per second from 0.01 to 1000 (e.g. 5 or 0.5), or null for no limit"

describe("rate, ordering and circuit over HTTP", () => {
  let acme: TestCompany
  const { db, receiver, server } = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Safety", mirrored: false })
    },
    engine: false
  })
  let checker: OpenApiChecker
  let apiChecker: OpenApiChecker
  let token: string
  const call = caller(server, () => checker)
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { token, body })

  beforeAll(async () => {
    checker = await openApiChecker((await request(server.url, "/admin/v1/openapi.json")).json)
    apiChecker = await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json)
    token = (await makeToken(db, acme, "options")).token
  })

  const stored = async (id: string) =>
    (
      await db.sql<{ rate_limit: number | null; ordering: string }[]>`
        select rate_limit, ordering from service.webhook_endpoints where id = ${id}`
    )[0]

  it("admin API: an endpoint takes rateLimit and ordering, shows them and its circuit; bad ones are 400 and change nothing", async () => {
    const made = await admin("POST", "/admin/v1/endpoints", {
      name: "Paced",
      url: receiver.url("/paced"),
      events: ["incident.created"],
      rateLimit: 2.5,
      ordering: "record"
    })
    expect(made.status, made.text).toBe(201)
    const id = made.json.id as string
    expect(made.json.endpoint).toMatchObject({
      rateLimit: 2.5,
      ordering: "record",
      circuit: { state: "closed", failures: 0, openedAt: null, nextProbeAt: null, probes: 0, lastError: null }
    })

    for (const [body, message] of [
      [{ rateLimit: 0 }, RATE_ERROR],
      [{ rateLimit: -3 }, RATE_ERROR],
      [{ rateLimit: 1e6 }, RATE_ERROR],
      [{ rateLimit: "5" }, /^invalid request body: Expected .* at \["rateLimit"\]$/s],
      [{ ordering: "fifo" }, /^invalid request body: Expected .*"record".* at \["ordering"\]$/s],
      [{ ordering: null }, /^invalid request body: Expected .* at \["ordering"\]$/s]
    ] as const) {
      const a = await admin("PATCH", `/admin/v1/endpoints/${id}`, body)
      expect(a.status, JSON.stringify(body)).toBe(400)
      if (typeof message === "string") expect(a.json.error).toBe(message)
      else expect(a.json.error).toMatch(message)
      expect(await stored(id)).toEqual({ rate_limit: 2.5, ordering: "record" })
    }
    const refused = await admin("POST", "/admin/v1/endpoints", {
      name: "Too fast",
      url: receiver.url("/fast"),
      events: ["incident.created"],
      rateLimit: 5000
    })
    expect([refused.status, refused.json.error]).toEqual([400, RATE_ERROR])
    expect(
      ((await admin("GET", "/admin/v1/endpoints")).json.data as Array<{ name: string }>).map((e) => e.name)
    ).toEqual(["Paced"])

    const cleared = await admin("PATCH", `/admin/v1/endpoints/${id}`, { rateLimit: null, ordering: "none" })
    expect(cleared.status, cleared.text).toBe(200)
    expect(cleared.json).toMatchObject({ rateLimit: null, ordering: "none" })

    await db.sql`
      insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at)
      values (${id}, ${acme.id}, 'open', 5, '2026-03-04T05:06:07.089Z', '2026-03-04T05:06:17.089Z')`
    const got = await admin("GET", `/admin/v1/endpoints/${id}`)
    expect(got.json.circuit).toEqual({
      state: "open",
      failures: 5,
      openedAt: "2026-03-04T05:06:07.089Z",
      nextProbeAt: "2026-03-04T05:06:17.089Z",
      probes: 0,
      lastError: null
    })
    await db.sql`delete from service.webhook_endpoints where id = ${id}`
  })

  it("API: POST /api/v1/hooks takes rateLimit and ordering (shown only when set); bad ones are 400 and change nothing", async () => {
    const { key } = await makeKey(db, acme, { scopes: ["incidents"], webhooks: true })
    const hooks = (method: string, path: string, body?: unknown) =>
      keyCaller(server, () => apiChecker)(method, path, key, body)
    const url = receiver.url("/sub")
    const made = await hooks("POST", "/api/v1/hooks", {
      url,
      event: "incident.created",
      rateLimit: 0.5,
      ordering: "record"
    })
    expect(made.status, made.text).toBe(201)
    expect(made.json).toMatchObject({ url, event: "incident.created", rateLimit: 0.5, ordering: "record" })
    const plain = await hooks("POST", "/api/v1/hooks", { url: receiver.url("/plain"), event: "incident.created" })
    expect(Object.keys(plain.json).sort()).toEqual(["active", "createdAt", "event", "id", "name", "secret", "url"])

    const count = async () =>
      (await db.sql<{ n: number }[]>`select count(*)::int as n from service.webhook_subscriptions`)[0]!.n
    const before = await count()
    for (const body of [
      { url: receiver.url("/bad"), event: "incident.created", rateLimit: 0 },
      { url: receiver.url("/bad"), event: "incident.created", rateLimit: "fast" },
      { url: receiver.url("/bad"), event: "incident.created", ordering: "fifo" },
      { url, event: "incident.created", rateLimit: 1001 }
    ]) {
      const a = await hooks("POST", "/api/v1/hooks", body)
      expect(a.status, JSON.stringify(body)).toBe(400)
      expect(typeof a.json.error).toBe("string")
    }
    expect(await count()).toBe(before)
    const got = await hooks("GET", `/api/v1/hooks/${made.json.id}`)
    expect(got.json).toMatchObject({ rateLimit: 0.5, ordering: "record" })

    // The admins see them, and the circuit.
    const subs = await admin("GET", "/admin/v1/subscriptions")
    expect(subs.status).toBe(200)
    const sub = (subs.json.data as Array<Record<string, unknown>>).find((s) => s.id === made.json.id)
    expect(sub).toMatchObject({ rateLimit: 0.5, ordering: "record", circuit: { state: "closed" } })
  })
})
