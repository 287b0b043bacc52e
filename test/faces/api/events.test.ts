// GET /api/v1/events and /api/v1/events/{id} over real HTTP through the real routes: paging
// through 30 days, scopes and modules, errors in the API's shape, and every answer checked
// against the served OpenAPI document; the feed is paged through by the typed client (client/).
import { beforeAll, describe, expect, it } from "vitest"
import { SafetyRecordsClient, type Event } from "../../../client/src/index.ts"
import { checkedFetch, makeKey, request, type CheckedFetch } from "../../support/http.ts"
import { createCompany, makeRecord, NEVER_MARK, updateCompany, type TestCompany } from "../../support/views.ts"
import { useReadApi } from "../../support/fixtures.ts"
import { raiseAlerts } from "../../../src/webhooks/alerts/raise.ts"

const HOUR = 3_600_000
const KINDS = [
  ["incident.created", "incidents"],
  ["corrective_action.closed", "corrective-actions"],
  ["permit.closed", "permits"]
] as const

const { db, server, checker, api: client } = useReadApi({})
let checked: CheckedFetch
let acme: TestCompany
let other: TestCompany
let lsn = 0x1000

/** Outbox rows as capture writes them: the record's JSON as the API shows it. */
const events = async (company: TestCompany, n: number) => {
  const rows = Array.from({ length: n }, (_, i) => {
    const [event, resource] = KINDS[i % 3]!
    const createdAt = new Date(Date.now() - (i * 7 + 1) * HOUR).toISOString()
    const record = makeRecord(resource, { companyId: company.id, createdAt })
    return {
      company_id: company.id,
      event,
      resource,
      record_id: String(record.id),
      commit_lsn: `0/${(lsn++).toString(16)}`,
      seq: 0,
      payload: JSON.stringify(record),
      created_at: createdAt
    }
  })
  await db.sql`insert into service.events ${db.sql(rows)}`
  return rows
}

beforeAll(async () => {
  acme = await createCompany(db.sql)
  other = await createCompany(db.sql)
  // For the typed client (client/): every answer checked against the document too.
  checked = checkedFetch(checker, NEVER_MARK)
})

describe("GET /api/v1/events", () => {
  it("is in the OpenAPI document", async () => {
    const doc = (await request(server.url, "/api/v1/openapi.json")).json
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/api/v1/events", "/api/v1/events/{id}"]))
    const list = doc.paths["/api/v1/events"].get
    expect(list.parameters.map((p: { name: string }) => p.name).sort()).toEqual([
      "createdAfter",
      "createdBefore",
      "cursor",
      "limit",
      "type"
    ])
    expect(Object.keys(list.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "403", "429"]))
    expect(Object.keys(doc.paths["/api/v1/events/{id}"].get.responses)).toEqual(
      expect.arrayContaining(["200", "401", "404"])
    )
  })

  it("pages through the last 30 days, newest first, with only what the key could subscribe to", async () => {
    const rows = await events(acme, 144)
    await events(other, 30)
    const { key } = await makeKey(db, acme, { scopes: ["incidents", "corrective-actions"] })
    const expected = rows
      .filter((r) => r.resource !== "permits" && Date.now() - Date.parse(r.created_at) < 30 * 24 * HOUR)
      .sort((a, b) => b.created_at.localeCompare(a.created_at))
    // Paged through by the typed client, which follows nextCursor.
    const typed = new SafetyRecordsClient({ baseUrl: server.url, apiKey: key, fetch: checked.fetch })
    const from = checked.answers.length
    const seen: Array<Event> = []
    for await (const e of typed.events.list({ limit: 40 })) seen.push(e)
    expect(checked.answers.slice(from).map((a) => a.status)).toEqual(
      Array.from({ length: Math.ceil(expected.length / 40) }, () => 200)
    )
    // An alert names its destination where a record event names its record.
    expect(seen.map((e) => ("destination" in e.data ? e.data.destination.id : e.data.id))).toEqual(
      expected.map((r) => r.record_id)
    )
    expect(seen.map((e) => e.event)).toEqual(expected.map((r) => r.event))
    expect(await typed.events.get(seen[1]!.id)).toEqual(seen[1])
    // the payload is the stored one, byte for byte
    const one = await client.get(`/api/v1/events/${seen[0]!.id}`, { key, host: acme.host })
    expect(one.status).toBe(200)
    expect(one.text).toBe(
      `{"data":{"id":"${seen[0]!.id}","event":"${expected[0]!.event}","createdAt":"${expected[0]!.created_at}","data":${expected[0]!.payload}}}`
    )

    // filters, as on the other lists
    const closed = await client.get("/api/v1/events?type=corrective_action.closed&limit=200", { key, host: acme.host })
    expect(closed.json.data.map((e: { data: { id: string } }) => e.data.id)).toEqual(
      expected.filter((r) => r.event === "corrective_action.closed").map((r) => r.record_id)
    )
    const since = new Date(Date.now() - 50 * HOUR).toISOString()
    const recent = await client.get(`/api/v1/events?createdAfter=${since}`, { key, host: acme.host })
    expect(recent.json.data.map((e: { data: { id: string } }) => e.data.id)).toEqual(
      expected.filter((r) => r.created_at > since).map((r) => r.record_id)
    )

    // a module turned off takes its events out at once
    await updateCompany(db.sql, acme.id, { modules: ["incidents", "permits"] })
    const fewer = await client.get("/api/v1/events?limit=200", { key, host: acme.host })
    expect(fewer.json.data.every((e: { event: string }) => e.event === "incident.created")).toBe(true)
    await updateCompany(db.sql, acme.id, { modules: ["incidents", "corrective-actions", "permits"] })
  })

  it("answers 400, 401, 403 and 404 in the API's error shape", async () => {
    const { key } = await makeKey(db, acme, { scopes: ["incidents"] })
    const get = (path: string, k: string | null = key) =>
      client.get(path, { ...(k === null ? {} : { key: k }), host: acme.host })
    const unknown = await get("/api/v1/events?type=incident.deleted")
    expect(unknown.status).toBe(400)
    expect(unknown.json.error).toMatch(/^query parameter "type" must be one of incident\.created, /)
    expect((await get("/api/v1/events?limit=500")).status).toBe(400)
    expect((await get("/api/v1/events?createdBefore=soon")).status).toBe(400)
    expect((await get("/api/v1/events?cursor=abc")).status).toBe(400)
    const excess = await get("/api/v1/events?colour=red")
    expect([excess.status, excess.json.error]).toEqual([
      400,
      'unknown query parameter "colour"; this list takes limit, cursor, createdAfter, createdBefore, type'
    ])
    const refused = await get("/api/v1/events?type=permit.closed")
    expect(refused.status).toBe(403)
    expect(refused.json.error).toBe("this API key cannot read permits, so it cannot see permit.closed events")
    expect((await get("/api/v1/events", null)).status).toBe(401)
    expect((await get("/api/v1/events/7b0c2f59-1a60-4a0e-9d6c-3b1f3c1f2b10")).status).toBe(404)
    expect((await get("/api/v1/events/nope")).status).toBe(404)
    const [theirs] = await db.sql<
      { id: string }[]
    >`select id::text from service.events where company_id = ${other.id} and resource = 'incidents' limit 1`
    expect((await get(`/api/v1/events/${theirs!.id}`)).status).toBe(404)
  })

  it("lists to a key the failure alerts about its own subscriptions, and no other key's", async () => {
    const company = await createCompany(db.sql)
    const mine = await makeKey(db, company, { webhooks: true, name: "mine" })
    const theirs = await makeKey(db, company, { webhooks: true, name: "theirs" })
    const subscribe = async (keyId: string, path: string) =>
      (
        await db.sql<{ id: string }[]>`
          insert into service.webhook_subscriptions (key_id, company_id, url, event)
          values (${keyId}, ${company.id}, ${`https://receiver.example${path}`}, 'incident.created') returning id::text`
      )[0]!.id
    const failing = await subscribe(mine.id, "/mine")
    await subscribe(theirs.id, "/theirs")
    await db.sql.begin((tx) =>
      raiseAlerts(
        tx,
        [
          {
            kind: "webhook.failing",
            endpointId: null,
            subscriptionId: failing,
            lastError: "http 500",
            lastAttemptAt: new Date("2026-11-28T00:00:00Z")
          }
        ],
        { mail: false }
      )
    )
    const get = (path: string, key: string) => client.get(path, { key, host: company.host })
    const seen = await get("/api/v1/events?type=webhook.failing", mine.key)
    expect(seen.status).toBe(200)
    expect(seen.json.data).toHaveLength(1)
    expect(seen.json.data[0]).toMatchObject({
      event: "webhook.failing",
      data: {
        destination: {
          kind: "subscription",
          id: failing,
          url: "https://receiver.example/mine",
          events: ["incident.created"]
        },
        failedDeliveries: 0,
        lastError: "http 500",
        lastAttemptAt: "2026-11-28T00:00:00.000Z",
        switchedOffAt: null,
        switchedOffBy: null
      }
    })
    expect((await get(`/api/v1/events/${seen.json.data[0].id}`, mine.key)).status).toBe(200)
    // Another key of the company sees none of it, in the list or by id.
    expect((await get("/api/v1/events", theirs.key)).json.data).toEqual([])
    expect((await get(`/api/v1/events/${seen.json.data[0].id}`, theirs.key)).status).toBe(404)
  })
})
