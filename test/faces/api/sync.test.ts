// Keeping a copy in step (docs/integrators.md#keeping-a-copy-in-step), through real HTTP to the
// real server: lists by change time (updatedAfter, updatedBefore, sort=updatedAt) paged across
// equal timestamps, and conditional GET (ETag, If-None-Match, 304). Lists are walked through the
// typed client (client/), every answer checked against the served document. Views are stored as
// capture stores them (their change time is their updatedAt); sync-capture.test.ts drives the same
// through real capture.
import { beforeAll, describe, expect, it } from "vitest"
import { createCompany, makeRecord, NEVER_MARK, storeRecords, type TestCompany } from "../../support/views.ts"
import { SafetyRecordsClient, type ListPage } from "../../../client/src/index.ts"
import { checkedFetch, makeKey, request, type Answer } from "../../support/http.ts"
import { useReadApi } from "../../support/fixtures.ts"

const at = (second: number) => new Date(Date.UTC(2026, 1, 1, 0, 0, second)).toISOString()

interface Walked {
  readonly ids: Array<string>
  readonly pages: Array<ListPage<"permits">>
}

describe("sync by change time", () => {
  const { db, server, checker, api } = useReadApi()
  let acme: TestCompany
  let key: string
  let client: SafetyRecordsClient
  // 230 permits over four change times, created in an order of their own.
  let permits: Array<Record<string, unknown>>

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme Sync" })
    const other = await createCompany(db.sql, { name: "Other Sync" })
    key = (await makeKey(db, acme)).key
    // The typed client (client/), every answer checked against the document.
    client = new SafetyRecordsClient({
      baseUrl: server.url,
      apiKey: key,
      fetch: checkedFetch(checker, NEVER_MARK).fetch
    })
    permits = Array.from({ length: 230 }, (_, i) =>
      makeRecord("permits", {
        companyId: acme.id,
        createdAt: at(1000 - i),
        row: { updated_at: at(100 + (i % 4) * 10) }
      })
    )
    await storeRecords(db.sql, "permits", permits, acme.id)
    // Another company's records never show.
    await storeRecords(
      db.sql,
      "permits",
      [makeRecord("permits", { companyId: other.id, createdAt: at(5), row: { updated_at: at(120) } })],
      other.id
    )
  })

  const byChange = (records: ReadonlyArray<Record<string, unknown>>) =>
    [...records].sort((a, b) => {
      const [ua, ub] = [String(a["updatedAt"]), String(b["updatedAt"])]
      return ua !== ub ? (ua < ub ? -1 : 1) : String(a["id"]) < String(b["id"]) ? -1 : 1
    })

  /** A walk of the permits by change time through the client's listPage, following nextCursor. */
  const walk = async (params: { readonly updatedAfter?: string }, limit: number): Promise<Walked> => {
    const ids: Array<string> = []
    const pages: Array<ListPage<"permits">> = []
    let cursor: string | null = null
    do {
      const page: ListPage<"permits"> = await client.listPage("permits", {
        sort: "updatedAt",
        ...params,
        limit,
        ...(cursor === null ? {} : { cursor })
      })
      pages.push(page)
      ids.push(...page.data.map((r) => r.id))
      cursor = page.nextCursor
    } while (cursor !== null)
    return { ids, pages }
  }

  it("sort=updatedAt: oldest change first, ties by id, every record exactly once across equal timestamps", async () => {
    const expected = byChange(permits).map((r) => String(r["id"]))
    for (const limit of [7, 23, 50, 200]) {
      const { ids, pages } = await walk({}, limit)
      expect(ids).toEqual(expected)
      expect(pages).toHaveLength(Math.ceil(230 / limit))
      // Where the next sync starts: only on the last page, the last record's change time.
      for (const page of pages.slice(0, -1)) expect(page.nextUpdatedAfter).toBeNull()
      expect(pages.at(-1)!.nextUpdatedAfter).toBe(at(130))
    }
    // One record per page through a boundary inside one timestamp, from a bound.
    const { ids } = await walk({ updatedAfter: at(110) }, 1)
    expect(ids).toEqual(byChange(permits.filter((r) => String(r["updatedAt"]) > at(110))).map((r) => String(r["id"])))
  })

  it("updatedAfter and updatedBefore bound the change time strictly, in either order and with other filters", async () => {
    const expectIds = (page: any, records: ReadonlyArray<Record<string, unknown>>) =>
      expect(page.data.map((r: { id: string }) => r.id)).toEqual(records.map((r) => String(r["id"])))
    const between = permits.filter((r) => String(r["updatedAt"]) > at(100) && String(r["updatedAt"]) < at(130))
    // The default order stays newest created first.
    const newest = await api.get(`/api/v1/permits?updatedAfter=${at(100)}&updatedBefore=${at(130)}&limit=200`, { key })
    expect(newest.json.nextUpdatedAfter).toBeUndefined()
    expectIds(
      newest.json,
      [...between].sort((a, b) => (String(a["createdAt"]) < String(b["createdAt"]) ? 1 : -1))
    )
    const oldest = await api.get(
      `/api/v1/permits?updatedAfter=${at(100)}&updatedBefore=${at(130)}&sort=updatedAt&limit=200`,
      { key }
    )
    expectIds(oldest.json, byChange(between))
    // An offset, a date alone, and createdAfter together with updatedAfter.
    const offset = await api.get(
      `/api/v1/permits?updatedAfter=${encodeURIComponent("2026-02-01T01:01:50+01:00")}&sort=updatedAt&limit=200`,
      { key }
    )
    expectIds(offset.json, byChange(permits.filter((r) => String(r["updatedAt"]) > at(110))))
    expect((await api.get("/api/v1/permits?updatedBefore=2026-02-01&limit=200", { key })).json.data).toEqual([])
    const both = await api.get(
      `/api/v1/permits?createdAfter=${at(900)}&updatedAfter=${at(120)}&sort=updatedAt&limit=200`,
      { key }
    )
    expectIds(
      both.json,
      byChange(permits.filter((r) => String(r["createdAt"]) > at(900) && String(r["updatedAt"]) > at(120)))
    )
  })

  it("a sync asks again from nextUpdatedAfter: nothing while nothing changed, then only what changed", async () => {
    const first = await walk({}, 200)
    const since = first.pages.at(-1)!.nextUpdatedAfter as string
    const again = await client.listPage("permits", { sort: "updatedAt", updatedAfter: since })
    expect(again).toEqual({ data: [], nextCursor: null, nextUpdatedAfter: since })
    // Nothing at all and no bound: nothing to start from.
    const none = await client.listPage("sds", { sort: "updatedAt" })
    expect(none).toEqual({ data: [], nextCursor: null, nextUpdatedAfter: null })
    const changed = [
      makeRecord("permits", { companyId: acme.id, createdAt: at(1), row: { updated_at: at(200) } }),
      makeRecord("permits", { companyId: acme.id, createdAt: at(2), row: { updated_at: at(200) } })
    ]
    await storeRecords(db.sql, "permits", changed, acme.id)
    const next = await client.listPage("permits", { sort: "updatedAt", updatedAfter: since })
    expect(next.data.map((r) => r.id)).toEqual(byChange(changed).map((r) => String(r["id"])))
    expect(next.nextUpdatedAfter).toBe(at(200))
    // The client's sync starts from the same place: only what changed, and where to go on from.
    const run = client.sync("permits", since)
    const synced: Array<string> = []
    for await (const r of run.changed) synced.push(r.id)
    for await (const d of run.deleted) throw new Error(`nothing was deleted, yet ${d.id}`)
    expect(synced).toEqual(byChange(changed).map((r) => String(r["id"])))
    expect(new URLSearchParams(run.next()).get("updatedAfter")).toBe(at(200))
  })

  it("refuses a bad updatedAfter, updatedBefore or sort as it refuses createdAfter, and a cursor of the other order", async () => {
    for (const bad of ["2026-02-30", "yesterday", "2026-01-01T10:00:00 02:00"]) {
      const created = await api.get(`/api/v1/permits?createdAfter=${encodeURIComponent(bad)}`, { key })
      expect(created.status).toBe(400)
      for (const param of ["updatedAfter", "updatedBefore"]) {
        const a = await api.get(`/api/v1/permits?${param}=${encodeURIComponent(bad)}`, { key })
        expect(a.status).toBe(400)
        expect(a.json.error).toBe(created.json.error.replace("createdAfter", param))
      }
    }
    const sort = await api.get("/api/v1/permits?sort=createdAt", { key })
    expect([sort.status, sort.json.error]).toEqual([400, 'query parameter "sort" must be updatedAt'])
    const page = await api.get("/api/v1/permits?limit=5", { key })
    const mixed = await api.get(`/api/v1/permits?limit=5&sort=updatedAt&cursor=${page.json.nextCursor}`, { key })
    expect([mixed.status, mixed.json.error]).toEqual([400, expect.stringMatching(/^cursor belongs to another list/)])
    const bounded = await api.get(`/api/v1/permits?limit=5&sort=updatedAt&updatedAfter=${at(100)}`, { key })
    const unbounded = await api.get(`/api/v1/permits?limit=5&sort=updatedAt&cursor=${bounded.json.nextCursor}`, { key })
    expect(unbounded.status).toBe(400)
  })

  it("is in the OpenAPI document", () => {
    const list = checker.document.paths["/api/v1/permits"].get
    const params = Object.fromEntries(list.parameters.map((p: { name: string }) => [p.name, p]))
    expect(params.updatedAfter.schema.pattern).toBe(params.createdAfter.schema.pattern)
    expect(params.updatedBefore.schema.description).toMatch(/strictly before/)
    expect(params.sort.schema.anyOf).toEqual([{ type: "string", enum: ["updatedAt"] }])
    const envelope = list.responses["200"].content["application/json"].schema
    expect(Object.keys(envelope.properties)).toEqual(["data", "nextCursor", "nextUpdatedAfter"])
    expect(envelope.required).toEqual(["data", "nextCursor"])
  })
})

describe("conditional GET", () => {
  const { db, server, checker } = useReadApi()
  let acme: TestCompany
  let key: string
  let id: string

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme Etag" })
    key = (await makeKey(db, acme)).key
    const [stored] = await storeRecords(
      db.sql,
      "observations",
      [makeRecord("observations", { companyId: acme.id, createdAt: at(1) })],
      acme.id
    )
    id = stored!.id
  })

  const get = async (path: string, ifNoneMatch?: string) => {
    const a = await request(server.url, path, {
      key,
      ...(ifNoneMatch === undefined ? {} : { headers: { "if-none-match": ifNoneMatch } })
    })
    checker.check("GET", path, a)
    return a
  }
  const remaining = (a: Answer) => Number(/;r=(\d+);/.exec(a.headers.get("ratelimit") ?? "")?.[1])

  it("a record's answer carries a strong ETag; If-None-Match with it answers 304, no body, counted like any request", async () => {
    const path = `/api/v1/observations/${id}`
    const first = await get(path)
    const etag = first.headers.get("etag")!
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{20,}"$/)
    expect((await get(path)).headers.get("etag")).toBe(etag)
    const before = remaining(first)
    const hit = await get(path, etag)
    expect(hit.status).toBe(304)
    expect(hit.text).toBe("")
    expect(hit.headers.get("etag")).toBe(etag)
    expect(hit.headers.get("ratelimit-policy")).toBe('"default";q=1000000;w=60')
    expect(remaining(hit)).toBe(before - 2)
    // Several tags, a weak one (If-None-Match compares weakly) and "*" also match.
    for (const header of [`"nope", ${etag}`, `W/${etag}`, "*"]) expect((await get(path, header)).status).toBe(304)
    const miss = await get(path, '"nope"')
    expect([miss.status, miss.headers.get("etag")]).toEqual([200, etag])
    expect(miss.json.data.id).toBe(id)
  })

  it("a changed record has a new ETag, and the old one gets the new record", async () => {
    const path = `/api/v1/observations/${id}`
    const old = (await get(path)).headers.get("etag")!
    const changed = makeRecord("observations", {
      id,
      companyId: acme.id,
      createdAt: at(1),
      row: { title: "Changed title", updated_at: at(50) }
    })
    await db.sql`update service.views set body = ${JSON.stringify(changed)} where resource = 'observations' and id = ${id}`
    const a = await get(path, old)
    expect(a.status).toBe(200)
    expect(a.json.data.title).toBe("Changed title")
    expect(a.headers.get("etag")).not.toBe(old)
    expect((await get(path, a.headers.get("etag")!)).status).toBe(304)
  })

  it("lists too, and a new record changes the list's ETag; errors carry none and never answer 304", async () => {
    const path = "/api/v1/observations?limit=10"
    const list = await get(path)
    const etag = list.headers.get("etag")!
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{20,}"$/)
    expect((await get(path, etag)).status).toBe(304)
    // The same list by another query is another answer with the same bytes: same tag.
    expect((await get("/api/v1/observations?limit=11")).headers.get("etag")).toBe(etag)
    await storeRecords(
      db.sql,
      "observations",
      [makeRecord("observations", { companyId: acme.id, createdAt: at(2) })],
      acme.id
    )
    const after = await get(path, etag)
    expect(after.status).toBe(200)
    expect(after.json.data).toHaveLength(2)
    expect(after.headers.get("etag")).not.toBe(etag)
    const missing = await get(`/api/v1/observations/00000000-0000-0000-0000-000000000000`, "*")
    expect([missing.status, missing.headers.get("etag")]).toEqual([404, null])
    const refused = await request(server.url, path, { key: `mk_${"A".repeat(43)}`, headers: { "if-none-match": "*" } })
    expect([refused.status, refused.headers.get("etag")]).toEqual([401, null])
  })

  it("the document gives every GET its ETag and its 304", () => {
    for (const [path, item] of Object.entries<any>(checker.document.paths)) {
      if (item.get === undefined) continue
      expect(item.get.responses["200"].headers.ETag, path).toBeDefined()
      expect(item.get.responses["304"].headers.ETag, path).toBeDefined()
      expect(item.get.responses["304"].headers.RateLimit, path).toBeDefined()
      expect(item.get.responses["304"].content, path).toBeUndefined()
    }
  })
})
