import { beforeAll, describe, expect, it } from "vitest"
import { WEBHOOK_EVENTS } from "../../../src/domain/event-kinds.ts"
import { RESOURCES, type Resource } from "../../../src/domain/resources.ts"
import { startServer } from "../../support/server.ts"
import { useReadApi } from "../../support/fixtures.ts"
import {
  createCompany,
  makeRecord,
  NEVER_MARK,
  WITHHELD_IN_A_PRIVACY_CASE,
  seedRecords,
  storeRecords,
  updateCompany,
  type StoredRecord,
  type TestCompany
} from "../../support/views.ts"
import { checkedClient, makeKey, request, revokeKeyAs } from "../../support/http.ts"

const T0 = Date.parse("2026-05-01T12:00:00.000Z")
const iso = (ms: number) => new Date(ms).toISOString()

describe("read API", () => {
  const { db, server, checker, api } = useReadApi()
  let acme: TestCompany
  let other: TestCompany
  let key: string
  const seeded = new Map<Resource, ReadonlyArray<StoredRecord>>()

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme Safety" })
    other = await createCompany(db.sql, { name: "Other Co" })
    // Every resource: 12 records one hour apart, newest at T0.
    for (const r of RESOURCES) {
      seeded.set(r, await seedRecords(db.sql, r, acme.id, 12, { newest: new Date(T0), stepMillis: 3_600_000 }))
    }
    await seedRecords(db.sql, "incidents", other.id, 3, { newest: new Date(T0) })
    key = (await makeKey(db, acme)).key
  })

  describe("GET /api/v1", () => {
    it("401 without a key, with a malformed one and with an unknown one", async () => {
      for (const k of [undefined, "nonsense", `mk_${"A".repeat(43)}`]) {
        const a = await api.get("/api/v1", k === undefined ? {} : { key: k })
        expect(a.status).toBe(401)
        expect(a.headers.get("www-authenticate")).toMatch(/^Bearer/)
        expect(a.headers.get("ratelimit-policy")).toBe('"default";q=1000000;w=60')
      }
      const missing = await api.get("/api/v1")
      expect(missing.json.error).toMatch(/missing API key/)
      const wrongScheme = await request(server.url, "/api/v1", { headers: { authorization: `Basic ${key}` } })
      expect(wrongScheme.status).toBe(401)
    })

    it("tells what the key can read now, and that it works", async () => {
      const a = await api.get("/api/v1", { key })
      expect(a.status).toBe(200)
      expect(a.json.company).toEqual({ id: acme.id, name: "Acme Safety" })
      expect(a.json.key).toMatchObject({ name: "test key", expiresAt: null, webhooks: false })
      expect(a.json.resources).toEqual(RESOURCES.map((name) => ({ name, path: `/api/v1/${name}` })))
      expect(a.json.events).toEqual([])
    })

    it("lists only readable resources, and the events of those when the key has the webhooks permission", async () => {
      const k = await makeKey(db, acme, { scopes: ["incidents", "changes", "workers"], webhooks: true, expires: "30d" })
      const a = await api.get("/api/v1", { key: k.key })
      expect(a.json.resources.map((r: { name: string }) => r.name)).toEqual(["incidents", "workers", "changes"])
      // And the failure alerts about its own subscriptions, which need no resource.
      expect(a.json.events).toEqual([
        "incident.created",
        "change.approved",
        "change.implemented",
        "webhook.failing",
        "webhook.recovered",
        "webhook.switched_off"
      ])
      const days = (Date.parse(a.json.key.expiresAt) - Date.now()) / 86_400_000
      expect(days).toBeGreaterThan(29.9)
      expect(days).toBeLessThanOrEqual(30)
      const all = await makeKey(db, acme, { webhooks: true })
      expect((await api.get("/api/v1", { key: all.key })).json.events).toEqual([...WEBHOOK_EVENTS])
    })
  })

  describe("lists and records of every resource", () => {
    it.each(RESOURCES)("%s: newest first, each record as get returns it", async (resource) => {
      const list = await api.get(`/api/v1/${resource}`, { key })
      expect(list.status).toBe(200)
      const stored = seeded.get(resource)!
      expect(list.json.data.map((r: { id: string }) => r.id)).toEqual(stored.map((s) => s.id))
      expect(list.json.nextCursor).toBeNull()
      // exactly the stored JSON
      expect(list.text).toBe(`{"data":[${stored.map((s) => s.body).join(",")}],"nextCursor":null}`)
      const one = await api.get(`/api/v1/${resource}/${stored[3]!.id}`, { key })
      expect(one.status).toBe(200)
      expect(one.text).toBe(`{"data":${stored[3]!.body}}`)
    })

    it("404 for an unknown record, a record of another company, another resource's id, and a non-id", async () => {
      const incident = seeded.get("incidents")![0]!.id
      const theirs = (await api.get("/api/v1/incidents", { key: (await makeKey(db, other)).key })).json.data[0].id
      for (const path of [
        "/api/v1/incidents/00000000-0000-4000-8000-000000000000",
        `/api/v1/incidents/${theirs}`,
        `/api/v1/workers/${incident}`,
        "/api/v1/incidents/not-a-uuid"
      ]) {
        const a = await api.get(path, { key })
        expect(a.status, path).toBe(404)
        expect(a.json.error).toMatch(/no (incidents|workers) record with id/)
      }
    })

    it("a company's lists never show another company's records", async () => {
      const otherKey = (await makeKey(db, other)).key
      const mine = await api.get("/api/v1/incidents?limit=200", { key })
      const theirs = await api.get("/api/v1/incidents?limit=200", { key: otherKey })
      expect(theirs.json.data).toHaveLength(3)
      const ids = new Set(mine.json.data.map((r: { id: string }) => r.id))
      for (const r of theirs.json.data) expect(ids.has(r.id)).toBe(false)
    })

    it("HEAD answers like GET without a body", async () => {
      const a = await request(server.url, "/api/v1/incidents", { key, method: "HEAD" })
      expect(a.status).toBe(200)
      expect(a.text).toBe("")
    })
  })

  describe("limit", () => {
    it.each([
      ["1", 200, 1],
      ["12", 200, 12],
      ["200", 200, 12],
      ["", 400, 0],
      ["0", 400, 0],
      ["201", 400, 0],
      ["abc", 400, 0],
      ["1.5", 400, 0],
      ["-1", 400, 0],
      ["1e1", 400, 0]
    ])("limit=%s -> %i", async (limit, status, count) => {
      const a = await api.get(`/api/v1/observations?limit=${limit}`, { key })
      expect(a.status).toBe(status)
      if (status === 200) expect(a.json.data).toHaveLength(count)
      else expect(a.json.error).toMatch(/"limit" must be an integer from 1 to 200/)
    })
    it("defaults to 50", async () => {
      await seedRecords(db.sql, "job-sites", other.id, 60)
      const otherKey = (await makeKey(db, other)).key
      const a = await api.get("/api/v1/job-sites", { key: otherKey })
      expect(a.json.data).toHaveLength(50)
      expect(typeof a.json.nextCursor).toBe("string")
    })
    it("limit 1 pages one record at a time", async () => {
      const stored = seeded.get("permits")!
      const ids: Array<string> = []
      let cursor: string | null = null
      do {
        const page: any = await api.get(`/api/v1/permits?limit=1${cursor ? `&cursor=${cursor}` : ""}`, { key })
        expect(page.status).toBe(200)
        ids.push(...page.json.data.map((r: { id: string }) => r.id))
        cursor = page.json.nextCursor
      } while (cursor !== null)
      expect(ids).toEqual(stored.map((s) => s.id))
    })
  })

  describe("createdAfter and createdBefore", () => {
    // observations: 12 records at T0, T0-1h, ..., T0-11h (2026-05-01T12:00Z down to 01:00Z)
    const ids = (a: { json: { data: Array<{ createdAt: string }> } }) => a.json.data.map((r) => r.createdAt)
    it.each([
      ["createdAfter=2026-05-01T09:00:00Z", ["12:00", "11:00", "10:00"]],
      ["createdAfter=2026-05-01T09:00:00.001Z", ["12:00", "11:00", "10:00"]],
      ["createdAfter=2026-05-01T08:59:59.999Z", ["12:00", "11:00", "10:00", "09:00"]],
      ["createdAfter=2026-05-01T09:00", ["12:00", "11:00", "10:00"]],
      ["createdAfter=2026-05-01T11:00:00%2B02:00", ["12:00", "11:00", "10:00"]],
      ["createdAfter=2026-05-01T04:00:00-05:00", ["12:00", "11:00", "10:00"]],
      ["createdBefore=2026-05-01T03:00:00Z", ["02:00", "01:00"]],
      ["createdBefore=2026-05-01T03:00:00.001Z", ["03:00", "02:00", "01:00"]],
      ["createdAfter=2026-05-01T05:00:00Z&createdBefore=2026-05-01T08:00:00Z", ["07:00", "06:00"]],
      [
        "createdAfter=2026-05-01",
        ["12:00", "11:00", "10:00", "09:00", "08:00", "07:00", "06:00", "05:00", "04:00", "03:00", "02:00", "01:00"]
      ],
      ["createdAfter=2026-05-02", []],
      ["createdBefore=2026-05-01", []],
      ["createdAfter=2026-05-01T10:00:00Z&createdBefore=2026-05-01T10:00:00Z", []]
    ])("%s", async (query, times) => {
      const a = await api.get(`/api/v1/observations?${query}`, { key })
      expect(a.status).toBe(200)
      expect(ids(a)).toEqual(times.map((t) => `2026-05-01T${t}:00.000Z`))
    })
    it.each([
      ["createdAfter", "2026-02-30"],
      ["createdAfter", "yesterday"],
      ["createdAfter", "2026-05-01T25:00:00Z"],
      ["createdBefore", "2026-05-01 10:00:00"],
      ["createdBefore", "1714564800"],
      ["createdBefore", ""]
    ])("400 for %s=%s", async (param, value) => {
      const a = await api.get(`/api/v1/observations?${param}=${encodeURIComponent(value)}`, { key })
      expect(a.status).toBe(400)
      expect(a.json.error).toContain(`"${param}"`)
    })
  })

  describe("status on corrective-actions", () => {
    let byStatus: Record<string, Array<string>>
    beforeAll(async () => {
      const c = await createCompany(db.sql)
      byStatus = { open: [], in_progress: [], completed: [], verified: [] }
      const records = []
      let i = 0
      for (const status of ["open", "in_progress", "completed", "verified", "open", "verified", "in_progress"]) {
        const record = makeRecord("corrective-actions", {
          companyId: c.id,
          createdAt: iso(T0 - i++ * 60_000),
          row: { status, completed_at: status === "completed" || status === "verified" ? iso(T0) : null }
        })
        byStatus[status]!.push(String(record["id"]))
        records.push(record)
      }
      await storeRecords(db.sql, "corrective-actions", records, c.id)
      statusKey = (await makeKey(db, c)).key
    })
    let statusKey: string
    it.each([
      ["open", ["open", "in_progress"]],
      ["closed", ["completed", "verified"]],
      ["in_progress", ["in_progress"]],
      ["completed", ["completed"]],
      ["verified", ["verified"]]
    ])("status=%s", async (value, statuses) => {
      const a = await api.get(`/api/v1/corrective-actions?status=${value}`, { key: statusKey })
      expect(a.status).toBe(200)
      const got = a.json.data.map((r: { id: string }) => r.id).sort()
      expect(got).toEqual(statuses.flatMap((s) => byStatus[s]!).sort())
      for (const r of a.json.data) expect(statuses).toContain(r.status)
    })
    it("status=open pages newest first across both of its statuses", async () => {
      // The records were made a minute apart, newest first: open, in_progress, ..., open, ..., in_progress.
      const all = ["open", "in_progress", "completed", "verified", "open", "verified", "in_progress"]
      const expected = all.flatMap((status, i) =>
        status === "open" || status === "in_progress"
          ? [byStatus[status]![all.slice(0, i).filter((s) => s === status).length]!]
          : []
      )
      const got: string[] = []
      let cursor: string | null = null
      for (let page = 0; page < 10; page++) {
        const a = await api.get(
          `/api/v1/corrective-actions?status=open&limit=1${cursor === null ? "" : `&cursor=${cursor}`}`,
          { key: statusKey }
        )
        expect(a.status).toBe(200)
        got.push(...a.json.data.map((r: { id: string }) => r.id))
        cursor = a.json.nextCursor
        if (cursor === null) break
      }
      expect(got).toEqual(expected)
    })
    it.each(["done", "OPEN", "open,closed", ""])("400 for status=%j", async (value) => {
      const a = await api.get(`/api/v1/corrective-actions?status=${value}`, { key: statusKey })
      expect(a.status).toBe(400)
      expect(a.json.error).toContain('"status"')
    })
    it("status belongs to corrective-actions only", async () => {
      const a = await api.get("/api/v1/incidents?status=open", { key })
      expect(a.status).toBe(400)
      expect(a.json.error).toBe(
        'unknown query parameter "status"; this list takes limit, cursor, createdAfter, createdBefore, updatedAfter, updatedBefore, sort'
      )
    })
  })

  describe("name on workers and job-sites", () => {
    let nameKey: string
    beforeAll(async () => {
      const c = await createCompany(db.sql)
      const names = ["Dana Okafor", "Ana Lima", "ANAÏS Roy", "Bob 100% Safe", "bob_underscore", "Zed"]
      await storeRecords(
        db.sql,
        "workers",
        names.map((name, i) =>
          makeRecord("workers", { companyId: c.id, createdAt: iso(T0 - i * 1000), row: { name } })
        ),
        c.id
      )
      await storeRecords(
        db.sql,
        "job-sites",
        ["Riverside Tower", "Harbour Depot", "North River Yard"].map((name, i) =>
          makeRecord("job-sites", { companyId: c.id, createdAt: iso(T0 - i * 1000), row: { name } })
        ),
        c.id
      )
      nameKey = (await makeKey(db, c)).key
    })
    const names = (a: { json: { data: Array<{ name: string }> } }) => a.json.data.map((r) => r.name)
    it.each([
      ["workers", "ana", ["Dana Okafor", "Ana Lima", "ANAÏS Roy"]],
      ["workers", "ANA", ["Dana Okafor", "Ana Lima", "ANAÏS Roy"]],
      ["workers", "anaï", ["ANAÏS Roy"]],
      ["workers", "AnAïs", ["ANAÏS Roy"]],
      ["workers", "100%", ["Bob 100% Safe"]],
      ["workers", "b_1", []],
      ["workers", "b_u", ["bob_underscore"]],
      ["workers", "b_", ["bob_underscore"]],
      ["workers", "%", ["Bob 100% Safe"]],
      ["workers", "zzz", []],
      ["job-sites", "river", ["Riverside Tower", "North River Yard"]]
    ])("%s?name=%s", async (resource, name, expected) => {
      const a = await api.get(`/api/v1/${resource}?name=${encodeURIComponent(name)}`, { key: nameKey })
      expect(a.status).toBe(200)
      expect(names(a)).toEqual(expected)
    })
    it("400 for an empty name, and on resources without names", async () => {
      expect((await api.get("/api/v1/workers?name=", { key: nameKey })).status).toBe(400)
      const a = await api.get("/api/v1/permits?name=x", { key: nameKey })
      expect(a.status).toBe(400)
      expect(a.json.error).toMatch(/unknown query parameter "name"/)
    })
    it("pages through a name filter", async () => {
      const first = await api.get("/api/v1/workers?name=A&limit=3", { key: nameKey })
      const second = await api.get(`/api/v1/workers?name=A&limit=3&cursor=${first.json.nextCursor}`, { key: nameKey })
      expect([...names(first), ...names(second)]).toEqual(["Dana Okafor", "Ana Lima", "ANAÏS Roy", "Bob 100% Safe"])
      expect(second.json.nextCursor).toBeNull()
      // the cursor is bound to the name, case aside
      expect(
        (await api.get(`/api/v1/workers?name=a&limit=3&cursor=${first.json.nextCursor}`, { key: nameKey })).status
      ).toBe(200)
      expect(
        (await api.get(`/api/v1/workers?name=an&limit=3&cursor=${first.json.nextCursor}`, { key: nameKey })).status
      ).toBe(400)
    })
  })

  describe("unknown and repeated parameters", () => {
    it.each([
      ["/api/v1/incidents?colour=red", /unknown query parameter "colour"/],
      ["/api/v1/incidents?limit=1&limit=2", /"limit" must be given once/],
      ["/api/v1/incidents?Limit=5", /unknown query parameter "Limit"/]
    ])("%s", async (path, message) => {
      const a = await api.get(path, { key })
      expect(a.status).toBe(400)
      expect(a.json.error).toMatch(message)
    })

    it.each([
      ["/api/v1?verbose=1", "verbose"],
      ["/api/v1/incidents/3f1d1e0e-0000-4000-8000-000000000000?expand=reporter", "expand"],
      ["/api/v1/events/3f1d1e0e-0000-4000-8000-000000000000?limit=5", "limit"],
      ["/api/v1?&&x%20y=1", "x y"]
    ])("a path that takes no parameters refuses them: %s", async (path, param) => {
      const a = await api.get(path, { key })
      expect(a.status).toBe(400)
      expect(a.json.error).toBe(`unknown query parameter "${param}"; this path takes none`)
      expect(a.headers.get("ratelimit")).toBeTruthy()
    })

    it("an empty query is no parameter, and a key is checked before parameters", async () => {
      expect((await api.get("/api/v1?", { key })).status).toBe(200)
      expect((await api.get("/api/v1?verbose=1", {})).status).toBe(401)
    })
  })

  describe("cursors", () => {
    let cursor: string
    beforeAll(async () => {
      cursor = (await api.get("/api/v1/audits?limit=5", { key })).json.nextCursor
    })
    it("continues where the page ended", async () => {
      const next = await api.get(`/api/v1/audits?limit=5&cursor=${cursor}`, { key })
      expect(next.json.data.map((r: { id: string }) => r.id)).toEqual(
        seeded
          .get("audits")!
          .slice(5, 10)
          .map((s) => s.id)
      )
    })
    it("may change the page size", async () => {
      const next = await api.get(`/api/v1/audits?limit=7&cursor=${cursor}`, { key })
      expect(next.json.data).toHaveLength(7)
      expect(next.json.nextCursor).toBeNull()
    })
    it("400 when tampered with", async () => {
      const flipped = cursor.slice(0, 3) + (cursor[3] === "A" ? "B" : "A") + cursor.slice(4)
      for (const bad of [flipped, cursor.slice(0, -2), `${cursor}x`, "garbage", "a.b"]) {
        const a = await api.get(`/api/v1/audits?cursor=${bad}`, { key })
        expect(a.status, bad).toBe(400)
        expect(a.json.error).toMatch(/^cursor /)
      }
    })
    it("400 when reused with other filters, another resource or another company", async () => {
      const filtered = (await api.get("/api/v1/audits?limit=2&createdAfter=2026-05-01", { key })).json.nextCursor
      for (const path of [
        `/api/v1/audits?cursor=${filtered}`,
        `/api/v1/audits?cursor=${filtered}&createdAfter=2026-05-01T00:00:01Z`,
        `/api/v1/audits?cursor=${cursor}&createdBefore=2026-06-01`,
        `/api/v1/inspections?cursor=${cursor}`
      ]) {
        const a = await api.get(path, { key })
        expect(a.status, path).toBe(400)
        expect(a.json.error).toMatch(/^cursor belongs to another list/)
      }
      // the same filters written differently are the same list
      const same = await api.get(`/api/v1/audits?cursor=${filtered}&createdAfter=2026-05-01T00:00:00%2B00:00&limit=2`, {
        key
      })
      expect(same.status).toBe(200)
      const otherCompanyKey = (await makeKey(db, other)).key
      const foreign = await api.get(`/api/v1/audits?cursor=${cursor}`, { key: otherCompanyKey })
      expect(foreign.status).toBe(400)
    })
  })

  describe("paths and methods", () => {
    it.each([
      "/api/v1/nothing",
      "/api/v2/incidents",
      "/api/v1/incidents/a/b",
      "/",
      "/api",
      "/api/v1//incidents/x/y",
      "/api/v1/incidents/",
      "/API/v1/incidents",
      "/api/v1/Incidents",
      "/api/v1//incidents",
      "/api/v1/"
    ])("404 for %s", async (path) => {
      const a = await api.get(path, { key })
      expect(a.status).toBe(404)
      expect(a.json.error).toMatch(/no such path/)
    })
    it.each([
      ["POST", "/api/v1/incidents", "GET, HEAD"],
      ["DELETE", "/api/v1/incidents", "GET, HEAD"],
      ["PUT", `/api/v1/incidents/00000000-0000-4000-8000-000000000000`, "GET, HEAD"],
      ["PATCH", "/api/v1/corrective-actions/x", "GET, HEAD"],
      ["POST", "/api/v1", "GET, HEAD"],
      ["DELETE", "/api/v1/openapi.json", "GET, HEAD"]
    ])("405 for %s %s", async (method, path, allow) => {
      const a = await api.get(path, { key, method })
      expect(a.status).toBe(405)
      expect(a.headers.get("allow")).toBe(allow)
      expect(a.json.error).toContain(`${method} is not allowed`)
    })

    it("an unknown path or method under /api carries the rate-limit fields and counts against a good key", async () => {
      const remaining = (h: Headers) => Number(/;r=(\d+);/.exec(h.get("ratelimit") ?? "")?.[1])
      const first = await api.get("/api/v1/nothing", { key })
      const second = await api.get("/api/v1/incidents/", { key })
      const third = await api.get("/api/v1/incidents", { key, method: "POST" })
      for (const a of [first, second, third]) {
        expect(a.headers.get("ratelimit-policy")).toMatch(/^"default";q=\d+;w=\d+$/)
        expect(a.headers.get("ratelimit")).toMatch(/^"default";r=\d+;t=\d+$/)
      }
      expect(remaining(second.headers)).toBe(remaining(first.headers) - 1)
      expect(remaining(third.headers)).toBe(remaining(second.headers) - 1)
      // without a good key: the policy only; outside /api: neither
      const anonymous = await api.get("/api/v1/nothing", {})
      expect([anonymous.status, anonymous.headers.get("ratelimit"), anonymous.headers.get("ratelimit-policy")]).toEqual(
        [404, null, expect.stringMatching(/^"default"/)]
      )
      const unknownKey = await api.get("/api/v1/nothing", { key: "mk_nope" })
      expect([unknownKey.status, unknownKey.headers.get("ratelimit")]).toEqual([404, null])
      const elsewhere = await api.get("/nothing", { key })
      expect([elsewhere.status, elsewhere.headers.get("ratelimit-policy")]).toEqual([404, null])
    })
  })

  describe("request bodies", () => {
    it.each(["text/plain", "application/x-www-form-urlencoded", "application/xml"])(
      "a body sent as %s is a 400 in the error shape, as documented",
      async (contentType) => {
        const k = (await makeKey(db, other, { webhooks: true })).key
        const a = await request(server.url, "/api/v1/hooks", {
          key: k,
          method: "POST",
          headers: { "content-type": contentType },
          body: "url=https://example.com/hook&event=incident.created"
        })
        expect(a.status).toBe(400)
        expect(a.headers.get("content-type")).toMatch(/^application\/json/)
        expect(a.json).toEqual({
          error: `invalid request body: send JSON with Content-Type: application/json (got ${contentType})`
        })
        expect(a.headers.get("ratelimit")).toMatch(/^"default";r=\d+;t=\d+$/)
        checker.check("POST", "/api/v1/hooks", a)
      }
    )
  })

  describe("scopes, modules, tier and the company's API", () => {
    it("403 outside the key's scopes", async () => {
      const k = (await makeKey(db, acme, { scopes: ["incidents"] })).key
      expect((await api.get("/api/v1/incidents", { key: k })).status).toBe(200)
      for (const path of [
        "/api/v1/workers",
        `/api/v1/workers/${seeded.get("workers")![0]!.id}`,
        "/api/v1/workers?limit=abc"
      ]) {
        const a = await api.get(path, { key: k })
        expect(a.status, path).toBe(403)
        expect(a.json.error).toBe("this API key may not read workers")
      }
    })
    it("403 for a module that is off, then 200 as soon as it is on again", async () => {
      const c = await createCompany(db.sql, { modules: RESOURCES.filter((r) => r !== "permits") })
      await seedRecords(db.sql, "permits", c.id, 2)
      const k = (await makeKey(db, c)).key
      const off = await api.get("/api/v1/permits", { key: k })
      expect(off.status).toBe(403)
      expect(off.json.error).toBe("the permits module is turned off for this company")
      const index = await api.get("/api/v1", { key: k })
      expect(index.json.resources.map((r: { name: string }) => r.name)).not.toContain("permits")
      await updateCompany(db.sql, c.id, { modules: RESOURCES })
      expect((await api.get("/api/v1/permits", { key: k })).status).toBe(200)
      // and off again: refused on the very next request, though the key was just served
      await updateCompany(db.sql, c.id, { modules: ["incidents"] })
      expect((await api.get("/api/v1/permits", { key: k })).status).toBe(403)
      expect((await api.get(`/api/v1/permits/00000000-0000-4000-8000-000000000000`, { key: k })).status).toBe(403)
      expect((await api.get("/api/v1/incidents", { key: k })).status).toBe(200)
    })
    it.each([
      ["team", { tier: "team" as const }, /Company tier; this company is on the team tier/],
      ["starter", { tier: "starter" as const }, /on the starter tier/],
      ["API off", { apiEnabled: false }, /the API is turned off for this company/],
      ["not mirrored yet", { mirrored: false }, /not available for this company/]
    ])("403 for a company %s", async (_, options, message) => {
      const c = await createCompany(db.sql, options)
      const k = (await makeKey(db, c)).key
      for (const path of ["/api/v1", "/api/v1/incidents"]) {
        const a = await api.get(path, { key: k })
        expect(a.status).toBe(403)
        expect(a.json.error).toMatch(message)
      }
    })
    it("a company that loses the API is refused on the next request", async () => {
      const c = await createCompany(db.sql)
      const k = (await makeKey(db, c)).key
      expect((await api.get("/api/v1/incidents", { key: k })).status).toBe(200)
      await updateCompany(db.sql, c.id, { tier: "team" })
      expect((await api.get("/api/v1/incidents", { key: k })).status).toBe(403)
      await updateCompany(db.sql, c.id, { tier: "company", apiEnabled: false })
      expect((await api.get("/api/v1", { key: k })).status).toBe(403)
    })
  })

  describe("each company's own address", () => {
    it("401 for a key of another company at a company's host; fine at its own host and at unknown hosts", async () => {
      expect((await api.get("/api/v1/incidents", { key, host: other.host })).status).toBe(401)
      expect((await api.get("/api/v1/incidents", { key, host: `${other.host.toUpperCase()}:8443` })).status).toBe(401)
      const refused = await api.get("/api/v1", { key, host: other.host })
      expect(refused.json.error).toMatch(/another company/)
      expect((await api.get("/api/v1/incidents", { key, host: acme.host })).status).toBe(200)
      expect((await api.get("/api/v1/incidents", { key, host: `${acme.host}:3000` })).status).toBe(200)
      expect((await api.get("/api/v1/incidents", { key, host: "localhost" })).status).toBe(200)
      expect((await api.get("/api/v1/incidents", { key, host: "api.example.org" })).status).toBe(200)
    })
  })

  describe("expiry and revocation", () => {
    it("401 once a key has expired", async () => {
      const k = await makeKey(db, acme, { expires: "30d" })
      expect((await api.get("/api/v1/incidents", { key: k.key })).status).toBe(200)
      await db.sql`update service.api_keys set expires_at = now() - interval '1 second' where id = ${k.id}`
      const a = await api.get("/api/v1/incidents", { key: k.key })
      expect(a.status).toBe(401)
      expect(a.json.error).toMatch(/^this API key expired at /)
      expect((await api.get("/api/v1", { key: k.key })).status).toBe(401)
    })
    it("401 on the very next request after revocation, in this process and in another", async () => {
      const second = await startServer(db.url, { rateLimit: 1_000_000 })
      try {
        const k = await makeKey(db, acme)
        const clients = new Map(
          [server.url, second.url].map((base) => [base, checkedClient(base, checker, NEVER_MARK)])
        )
        // both processes have served (and remembered) the key
        for (const client of clients.values()) {
          expect((await client.get("/api/v1/incidents", { key: k.key })).status).toBe(200)
          expect((await client.get("/api/v1/incidents?limit=abc", { key: k.key })).status).toBe(400)
        }
        await revokeKeyAs(db, acme, k.id)
        for (const base of [second.url, server.url]) {
          for (const path of [
            "/api/v1/incidents",
            "/api/v1/incidents?limit=abc",
            "/api/v1",
            `/api/v1/incidents/${seeded.get("incidents")![0]!.id}`,
            "/api/v1/incidents/nope"
          ]) {
            const a = await clients.get(base)!.get(path, { key: k.key })
            expect(a.status, `${base} ${path}`).toBe(401)
            expect(a.json.error).toBe("this API key was revoked")
          }
        }
      } finally {
        await second.close()
      }
    })
  })

  describe("requests sent at once", () => {
    it("each request gets its own answer, whatever else is asked at the same moment", async () => {
      // Sent at once, these are read by few statements (src/read/batch.ts): other keys,
      // companies, resources, filters, pages and refusals must not leak into one another.
      const revoked = await makeKey(db, acme)
      await revokeKeyAs(db, acme, revoked.id)
      const otherKey = (await makeKey(db, other)).key
      const incidentsOnly = (await makeKey(db, acme, { scopes: ["incidents"] })).key
      const incidents = seeded.get("incidents")!
      const workers = seeded.get("workers")!
      const page = (records: ReadonlyArray<StoredRecord>, from: number, to: number) =>
        records.slice(from, to).map((r) => r.id)
      const second = (await api.get("/api/v1/incidents?limit=5", { key })).json.nextCursor as string
      const asks: Array<{ path: string; key: string; status: number; text?: string; ids?: ReadonlyArray<string> }> = [
        { path: `/api/v1/incidents/${incidents[0]!.id}`, key, status: 200, text: `{"data":${incidents[0]!.body}}` },
        { path: `/api/v1/workers/${workers[1]!.id}`, key, status: 200, text: `{"data":${workers[1]!.body}}` },
        { path: `/api/v1/workers/${incidents[2]!.id}`, key, status: 404 },
        { path: `/api/v1/incidents/${incidents[0]!.id}`, key: otherKey, status: 404 },
        { path: `/api/v1/incidents/${incidents[1]!.id}`, key: revoked.key, status: 401 },
        { path: `/api/v1/workers/${workers[0]!.id}`, key: incidentsOnly, status: 403 },
        { path: "/api/v1/incidents?limit=5", key, status: 200, ids: page(incidents, 0, 5) },
        { path: `/api/v1/incidents?limit=5&cursor=${second}`, key, status: 200, ids: page(incidents, 5, 10) },
        {
          path: `/api/v1/incidents?createdBefore=${incidents[9]!.createdAt}`,
          key,
          status: 200,
          ids: page(incidents, 10, 12)
        },
        {
          path: `/api/v1/incidents?createdAfter=${incidents[3]!.createdAt}`,
          key,
          status: 200,
          ids: page(incidents, 0, 3)
        },
        { path: "/api/v1/workers?limit=3", key, status: 200, ids: page(workers, 0, 3) },
        { path: "/api/v1/incidents", key: otherKey, status: 200 },
        { path: "/api/v1/incidents", key: revoked.key, status: 401 },
        { path: "/api/v1/workers", key: incidentsOnly, status: 403 }
      ]
      const all = [...asks, ...asks, ...asks]
      const answers = await Promise.all(all.map((a) => api.get(a.path, { key: a.key })))
      all.forEach((ask, i) => {
        const answer = answers[i]!
        expect(answer.status, ask.path).toBe(ask.status)
        if (ask.text !== undefined) expect(answer.text).toBe(ask.text)
        if (ask.ids !== undefined)
          expect(
            answer.json.data.map((r: { id: string }) => r.id),
            ask.path
          ).toEqual(ask.ids)
      })
      const theirs = answers[all.findIndex((a) => a.key === otherKey && a.path === "/api/v1/incidents")]!
      expect(theirs.json.data).toHaveLength(3)
      expect(new Set(theirs.json.data.map((r: { id: string }) => r.id)).has(incidents[0]!.id)).toBe(false)
    })
  })

  describe("data that is never sent", () => {
    it("privacy cases come without the person, location, description, body part and injury type", async () => {
      const c = await createCompany(db.sql)
      const record = makeRecord("incidents", {
        companyId: c.id,
        createdAt: iso(T0),
        row: {
          privacy_case: true,
          person_name: NEVER_MARK,
          location: NEVER_MARK,
          description: NEVER_MARK,
          body_part: NEVER_MARK,
          injury_type: NEVER_MARK
        }
      })
      await storeRecords(db.sql, "incidents", [record], c.id)
      const k = (await makeKey(db, c)).key
      const a = await api.get(`/api/v1/incidents/${record["id"]}`, { key: k })
      expect(a.status).toBe(200)
      expect(a.json.data).toMatchObject({
        privacyCase: true,
        ...WITHHELD_IN_A_PRIVACY_CASE
      })
    })
    it("no NEVER column reaches any answer, as a value or as a key", async () => {
      const neverKeys = [
        "phone",
        "email",
        "photoUrl",
        "qrCode",
        "workRestrictions",
        "medicalNotes",
        "photos",
        "voiceNoteUrl",
        "signature",
        "evidencePhotos",
        "certificateFile",
        "attachments",
        "documentFile",
        "fileUrl",
        "contactPhone",
        "contactEmail",
        "photo"
      ]
      for (const r of RESOURCES) {
        const a = await api.get(`/api/v1/${r}?limit=200`, { key })
        const walk = (v: unknown): void => {
          if (Array.isArray(v)) v.forEach(walk)
          else if (v !== null && typeof v === "object") {
            for (const [k, x] of Object.entries(v)) {
              expect(neverKeys, `${r}: ${k}`).not.toContain(k)
              walk(x)
            }
          }
        }
        walk(a.json)
      }
    })
  })

  describe("the OpenAPI document and the docs page", () => {
    it("is OpenAPI 3.1 with every endpoint and error status", () => {
      const doc = checker.document
      expect(doc.openapi).toBe("3.1.0")
      expect(Object.keys(doc.paths)).toEqual(
        expect.arrayContaining(["/api/v1", ...RESOURCES.flatMap((r) => [`/api/v1/${r}`, `/api/v1/${r}/{id}`])])
      )
      for (const r of RESOURCES) {
        const list = doc.paths[`/api/v1/${r}`].get
        expect(Object.keys(list.responses).sort()).toEqual(["200", "304", "400", "401", "403", "429"])
        expect(Object.keys(doc.paths[`/api/v1/${r}/{id}`].get.responses).sort()).toEqual([
          "200",
          "304",
          "400",
          "401",
          "403",
          "404",
          "429"
        ])
        const params = list.parameters.map((p: { name: string }) => p.name)
        const base = ["limit", "cursor", "createdAfter", "createdBefore", "updatedAfter", "updatedBefore", "sort"]
        expect(params).toEqual(
          r === "workers" || r === "job-sites"
            ? [...base, "name"]
            : r === "corrective-actions"
              ? [...base, "status"]
              : base
        )
      }
      expect(doc.components.securitySchemes.apiKey.type).toBe("http")
      expect(doc.components.securitySchemes.apiKey.scheme.toLowerCase()).toBe("bearer")
    })
    it("the docs page is served", async () => {
      const a = await request(server.url, "/docs")
      expect(a.status).toBe(200)
      expect(a.headers.get("content-type")).toMatch(/text\/html/)
      expect(a.text).toContain("Safety Records API")
      // Scalar's bundle inline, the document as its content; the second answer is the same page.
      expect(a.text).toContain("window.Scalar.createApiReference")
      expect(a.text).toContain('"openapi":"3.1')
      const again = await request(server.url, "/docs")
      expect(again.text).toBe(a.text)
    })
    it("every answer of this suite matched the document", () => {
      // the checked client threw on any mismatch; here: it saw every kind of answer
      const seen = [...checker.seen.keys()].map((k) => k.split(" ")[2])
      for (const status of ["200", "400", "401", "403", "404"]) expect(seen).toContain(status)
      expect(api.answers.length).toBeGreaterThan(150)
    })
  })
})
