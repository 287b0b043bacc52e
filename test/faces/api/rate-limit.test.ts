// The per-key rate limit through real requests: 120 a minute by default, 429 with
// Retry-After and the IETF RateLimit fields, held across two service processes on one
// database, a new window after the old one ends; and usage counted without a write per
// request, flushed for the admin key list.
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { listKeys } from "../../../src/access/keys/store.ts"
import { startServer, type TestServer } from "../../support/server.ts"
import { createCompany, NEVER_MARK, seedRecords, type TestCompany } from "../../support/views.ts"
import {
  checkedClient,
  makeKey,
  openApiChecker,
  provideDb,
  request,
  type CheckedClient,
  revokeKeyAs
} from "../../support/http.ts"
import { waitFor } from "../../support/world.ts"
import { useDatabase } from "../../support/fixtures.ts"

const remaining = (header: string | null) => Number(/;r=(\d+)/.exec(header ?? "")?.[1])
const reset = (header: string | null) => Number(/;t=(\d+)/.exec(header ?? "")?.[1])

describe("rate limit", () => {
  const db = useDatabase()
  let company: TestCompany
  const servers: Array<TestServer> = []
  let api: CheckedClient

  beforeAll(async () => {
    company = await createCompany(db.sql)
    await seedRecords(db.sql, "incidents", company.id, 3)
  })
  afterAll(async () => {
    for (const s of servers) await s.close()
  })
  const start = async (settings: Parameters<typeof startServer>[1] = {}) => {
    const s = await startServer(db.url, { usageFlushMillis: 200, ...settings })
    servers.push(s)
    return s
  }

  it("admits 120 requests a minute, then 429 with Retry-After; every answer carries the fields", async () => {
    const server = await start()
    api = checkedClient(
      server.url,
      await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json),
      NEVER_MARK
    )
    const { key } = await makeKey(db, company)
    const answers = []
    for (let i = 0; i < 120; i++)
      answers.push(
        await api.get(i % 3 === 0 ? "/api/v1" : i % 3 === 1 ? "/api/v1/incidents" : "/api/v1/incidents?limit=0", {
          key
        })
      )
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 120 }, (_, i) => (i % 3 === 2 ? 400 : 200)))
    answers.forEach((a, i) => {
      expect(a.headers.get("ratelimit-policy")).toBe('"default";q=120;w=60')
      expect(remaining(a.headers.get("ratelimit"))).toBe(119 - i)
      expect(reset(a.headers.get("ratelimit"))).toBeGreaterThan(0)
      expect(reset(a.headers.get("ratelimit"))).toBeLessThanOrEqual(60)
    })
    const refused = await api.get("/api/v1/incidents", { key })
    expect(refused.status).toBe(429)
    expect(refused.json.error).toMatch(/^rate limit exceeded: 120 requests per 60 seconds; retry in \d+ seconds$/)
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThan(0)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(remaining(refused.headers.get("ratelimit"))).toBe(0)
    expect(reset(refused.headers.get("ratelimit"))).toBe(retryAfter)
    // every kind of request counts, and refusals stay refusals
    expect((await api.get("/api/v1", { key })).status).toBe(429)
    // another key of the same company has its own allowance
    expect((await api.get("/api/v1/incidents", { key: (await makeKey(db, company)).key })).status).toBe(200)
  })

  it("what counts against a key's limit counts in its requests: unknown paths and wrong methods too", async () => {
    const server = await start()
    const { key, id } = await makeKey(db, company)
    const answers = [
      await request(server.url, "/api/v1/incidents", { key }),
      await request(server.url, "/api/v1/nope", { key }),
      await request(server.url, "/api/v1/incidents", { key, method: "POST" }),
      await request(server.url, "/api/v1/incidents/%zz", { key }),
      await request(server.url, "/api/v1/permits?name=%00", { key })
    ]
    expect(answers.map((a) => a.status)).toEqual([200, 404, 405, 400, 400])
    expect(answers.map((a) => remaining(a.headers.get("ratelimit")))).toEqual([119, 118, 117, 116, 115])
    await waitFor(async () => {
      const [k] = await db.sql<{ n: number }[]>`select request_count::int as n from service.api_keys where id = ${id}`
      return k!.n === 5 ? true : null
    }, "the usage flush")
    // The OpenAPI document is no key's request, and still states the policy.
    expect((await request(server.url, "/api/v1/openapi.json")).headers.get("ratelimit-policy")).toBe(
      '"default";q=120;w=60'
    )
  })

  it("holds a key to its limit across two service processes on one database", async () => {
    const a = await start({ rateLimit: 40 })
    const b = await start({ rateLimit: 40 })
    const { key } = await makeKey(db, company)
    const statuses: Array<number> = []
    // interleaved and concurrent, half to each process
    for (let round = 0; round < 10; round++) {
      const batch = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          request((i + round) % 2 === 0 ? a.url : b.url, "/api/v1/incidents", { key })
        )
      )
      statuses.push(...batch.map((x) => x.status))
    }
    const ok = statuses.filter((s) => s === 200).length
    expect(ok).toBeLessThanOrEqual(40)
    expect(ok).toBeGreaterThanOrEqual(36) // at most a request or two per process left unused in leases
    expect(statuses.filter((s) => s !== 200).every((s) => s === 429)).toBe(true)
    const [row] = await db.sql<{ granted: number }[]>`
      select granted from service.rate_limits r join service.api_keys k on k.id = r.key_id where k.fingerprint = sha256(${key}::bytea)`
    expect(row!.granted).toBeLessThanOrEqual(40)
  })

  it("starts a new window when the old one ends, as Retry-After said", async () => {
    const server = await start({ rateLimit: 3, rateWindowSeconds: 2 })
    const { key } = await makeKey(db, company)
    for (let i = 0; i < 3; i++) expect((await request(server.url, "/api/v1/incidents", { key })).status).toBe(200)
    const refused = await request(server.url, "/api/v1/incidents", { key })
    expect(refused.status).toBe(429)
    const wait = Number(refused.headers.get("retry-after"))
    expect(wait).toBeGreaterThanOrEqual(1)
    expect(wait).toBeLessThanOrEqual(2)
    await new Promise((r) => setTimeout(r, wait * 1000 + 50))
    const again = await request(server.url, "/api/v1/incidents", { key })
    expect(again.status).toBe(200)
    expect(remaining(again.headers.get("ratelimit"))).toBe(2)
  })

  it("a key over its limit that is revoked gets 401 on its next request, not 429", async () => {
    const server = await start({ rateLimit: 3 })
    const { id, key } = await makeKey(db, company)
    for (let i = 0; i < 3; i++) expect((await request(server.url, "/api/v1/incidents", { key })).status).toBe(200)
    expect((await request(server.url, "/api/v1/incidents", { key })).status).toBe(429)
    await revokeKeyAs(db, company, id)
    for (const path of ["/api/v1/incidents", "/api/v1", "/api/v1/incidents?limit=abc"]) {
      const a = await request(server.url, path, { key })
      expect(a.status, path).toBe(401)
      expect(a.json).toEqual({ error: "this API key was revoked" })
      expect(a.headers.get("retry-after")).toBeNull()
      expect(a.headers.get("www-authenticate")).toMatch(/^Bearer/)
    }
  })

  it("does not count requests without a usable key", async () => {
    const server = await start({ rateLimit: 2 })
    const { id, key } = await makeKey(db, company)
    await db.sql`update service.api_keys set expires_at = now() - interval '1 second' where id = ${id}`
    for (let i = 0; i < 5; i++) {
      const a = await request(server.url, "/api/v1/incidents", { key })
      expect(a.status).toBe(401)
      expect(a.headers.get("ratelimit-policy")).toBe('"default";q=2;w=60')
    }
    const [row] = await db.sql`select 1 from service.rate_limits where key_id = ${id}`
    expect(row).toBeUndefined()
  })

  it("counts each key's requests and last use for the admin list, written in batches", async () => {
    const server = await start({ usageFlushMillis: 60_000 })
    const { id, key } = await makeKey(db, company)
    const before = Date.now()
    for (let i = 0; i < 7; i++) await request(server.url, "/api/v1/incidents", { key })
    const list = () => Effect.runPromise(listKeys(company.id).pipe(Effect.provide(provideDb(db))))
    // not written per request
    expect((await list()).find((k) => k.id === id)).toMatchObject({ requestCount: 0, lastUsedAt: null })
    await server.close() // shutdown writes what was counted
    servers.splice(servers.indexOf(server), 1)
    const info = (await list()).find((k) => k.id === id)!
    expect(info.requestCount).toBe(7)
    expect(Date.parse(info.lastUsedAt!)).toBeGreaterThanOrEqual(before - 1000)
    // and periodically, adding up across processes
    const s1 = await start()
    const s2 = await start()
    for (let i = 0; i < 3; i++) await request(s1.url, "/api/v1/incidents", { key })
    for (let i = 0; i < 4; i++) await request(s2.url, "/api/v1", { key })
    await new Promise((r) => setTimeout(r, 600))
    expect((await list()).find((k) => k.id === id)!.requestCount).toBe(14)
  })
})
