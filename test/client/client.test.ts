// The typed client (client/) against the real server over real HTTP: every answer it gets is
// checked against the served OpenAPI document (checkedFetch), so the client, its generated
// types and the API cannot drift apart. Lists with auto-paging, get with ETag, errors, the
// 429 retry, sync and deletions, hooks, events, and verifyWebhook on deliveries signed by
// the sender's own signedHeaders.
import { randomUUID } from "node:crypto"
import { beforeAll, describe, expect, it } from "vitest"
import {
  SafetyRecordsClient,
  SafetyRecordsError,
  verifyWebhook,
  WebhookVerificationError,
  type Deletion,
  type Event
} from "../../client/src/index.ts"
import { OPENAPI_PATH } from "../../src/faces/api/definition.ts"
import { deliveryBody } from "../../src/webhooks/net/body.ts"
import { newSecret, signedHeaders } from "../../src/webhooks/net/signature.ts"
import { startServer } from "../support/server.ts"
import { createCompany, makeRecord, NEVER_MARK, seedRecords, storeRecords, type TestCompany } from "../support/views.ts"
import { apiDocument } from "../../client/scripts/generate-schema.ts"
import { checkedFetch, makeKey, openApiChecker, request, type CheckedFetch } from "../support/http.ts"
import { LOOPBACK_WEBHOOKS, useReadApi } from "../support/fixtures.ts"

const at = (second: number) => new Date(Date.UTC(2026, 1, 1, 0, 0, second)).toISOString()

const { db, server, checker } = useReadApi({ rateLimit: 1_000_000 }, LOOPBACK_WEBHOOKS)
let acme: TestCompany
let key: string
let checked: CheckedFetch
let client: SafetyRecordsClient

beforeAll(async () => {
  acme = await createCompany(db.sql, { name: "Acme Client" })
  key = (await makeKey(db, acme, { webhooks: true })).key
  checked = checkedFetch(checker, NEVER_MARK)
  client = new SafetyRecordsClient({ baseUrl: server.url, apiKey: key, fetch: checked.fetch })
})

/** The answers the client got from here on. */
const watch = () => {
  const from = checked.answers.length
  return () => checked.answers.slice(from)
}

describe("the client", () => {
  it("is typed by the document the server serves", () => {
    expect(checker.document).toEqual(apiDocument())
  })

  it("index(): the key, its company and what it can read", async () => {
    const index = await client.index()
    expect(index.company).toEqual({ id: acme.id, name: "Acme Client" })
    expect(index.key.webhooks).toBe(true)
    expect(index.resources.map((r) => r.name)).toContain("incidents")
  })

  it("list(): every record, page after page, newest first; listPage(): one page", async () => {
    const stored = await seedRecords(db.sql, "training-records", acme.id, 95, {
      newest: new Date("2026-06-01T00:00:00Z"),
      stepMillis: 7_000
    })
    const seen = watch()
    const ids: Array<string> = []
    for await (const record of client.list("training-records", { limit: 20 })) ids.push(record.id)
    expect(ids).toEqual(stored.map((s) => s.id))
    expect(seen().map((a) => a.status)).toEqual([200, 200, 200, 200, 200])
    expect(seen().every((a) => a.path.startsWith("/api/v1/training-records?limit=20"))).toBe(true)
    // From a cursor on, and with filters: only what follows.
    const first = await client.listPage("training-records", { limit: 10, createdBefore: "2026-06-01T00:00:00Z" })
    expect(first.data.map((r) => r.id)).toEqual(stored.slice(1, 11).map((s) => s.id))
    const rest: Array<string> = []
    for await (const r of client.list("training-records", {
      limit: 50,
      createdBefore: "2026-06-01T00:00:00Z",
      cursor: first.nextCursor!
    }))
      rest.push(r.id)
    expect(rest).toEqual(stored.slice(11).map((s) => s.id))
    // A resource's own filter.
    await seedRecords(db.sql, "workers", acme.id, 3, {
      row: (i) => ({ name: ["Ada Lovelace", "Alan Turing", "Grace Hopper"][i] })
    })
    const names: Array<string> = []
    for await (const w of client.list("workers", { name: "a" })) names.push(w.name)
    expect(names.sort()).toEqual(["Ada Lovelace", "Alan Turing", "Grace Hopper"])
    expect((await client.listPage("workers", { name: "turing" })).data.map((w) => w.name)).toEqual(["Alan Turing"])
  })

  it("get(): a record; asked again with its ETag, 304 and the record read before; a changed record anew", async () => {
    const [stored] = await storeRecords(
      db.sql,
      "observations",
      [makeRecord("observations", { companyId: acme.id, createdAt: at(1) })],
      acme.id
    )
    const seen = watch()
    const first = await client.get("observations", stored!.id)
    expect(first.id).toBe(stored!.id)
    const again = await client.get("observations", stored!.id)
    expect(again).toEqual(first)
    expect(seen().map((a) => a.status)).toEqual([200, 304])
    const changed = makeRecord("observations", {
      id: stored!.id,
      companyId: acme.id,
      createdAt: at(1),
      row: { title: "Changed title", updated_at: at(50) }
    })
    await db.sql`update service.views set body = ${JSON.stringify(changed)} where resource = 'observations' and id = ${stored!.id}`
    expect((await client.get("observations", stored!.id)).title).toBe("Changed title")
    expect(seen().map((a) => a.status)).toEqual([200, 304, 200])
    // Without a cache, never If-None-Match.
    const plain = new SafetyRecordsClient({ baseUrl: server.url, apiKey: key, fetch: checked.fetch, cacheSize: 0 })
    await plain.get("observations", stored!.id)
    await plain.get("observations", stored!.id)
    expect(
      seen()
        .slice(3)
        .map((a) => a.status)
    ).toEqual([200, 200])
  })

  it("errors are SafetyRecordsError with the API's status and message", async () => {
    const fails = async (p: Promise<unknown>) => {
      try {
        await p
      } catch (e) {
        expect(e).toBeInstanceOf(SafetyRecordsError)
        return e as SafetyRecordsError
      }
      throw new Error("did not fail")
    }
    const missing = await fails(client.get("incidents", "00000000-0000-0000-0000-000000000000"))
    expect([missing.status, missing.message]).toEqual([
      404,
      "no incidents record with id 00000000-0000-0000-0000-000000000000"
    ])
    const bad = await fails(client.listPage("incidents", { createdAfter: "yesterday" }))
    expect(bad.status).toBe(400)
    expect(bad.message).toMatch(/^query parameter "createdAfter" /)
    const tooMany = await fails(client.listPage("incidents", { limit: 500 }))
    expect([tooMany.status, tooMany.message]).toEqual([400, 'query parameter "limit" must be an integer from 1 to 200'])
    const unknown = await fails(
      new SafetyRecordsClient({ baseUrl: server.url, apiKey: `mk_${"A".repeat(43)}`, fetch: checked.fetch }).index()
    )
    expect([unknown.status, unknown.message]).toEqual([401, "unknown API key"])
    const narrow = (await makeKey(db, acme, { scopes: ["incidents"] })).key
    const refused = await fails(
      new SafetyRecordsClient({ baseUrl: server.url, apiKey: narrow, fetch: checked.fetch }).listPage("permits")
    )
    expect(refused.status).toBe(403)
    const hooksRefused = await fails(
      new SafetyRecordsClient({ baseUrl: server.url, apiKey: narrow, fetch: checked.fetch }).hooks.list()
    )
    expect([hooksRefused.status, hooksRefused.message]).toEqual([403, "this key does not have the webhooks permission"])
  })
})

describe("keeping a copy in step", () => {
  it("sync(): everything the first time, then only what changed and what was deleted; next() is where to start again", async () => {
    const permits = Array.from({ length: 23 }, (_, i) =>
      makeRecord("permits", {
        companyId: acme.id,
        createdAt: at(1000 - i),
        row: { updated_at: at(100 + (i % 4) * 10) }
      })
    )
    await storeRecords(db.sql, "permits", permits, acme.id)
    const byChange = [...permits].sort((a, b) => {
      const [ua, ub] = [String(a["updatedAt"]), String(b["updatedAt"])]
      return ua !== ub ? (ua < ub ? -1 : 1) : String(a["id"]) < String(b["id"]) ? -1 : 1
    })

    const read = async (since: string | null) => {
      const run = client.sync("permits", since, { limit: 5 })
      expect(() => run.next()).toThrow(/to the end/)
      const changed: Array<string> = []
      for await (const r of run.changed) changed.push(r.id)
      const deleted: Array<Deletion> = []
      for await (const d of run.deleted) deleted.push(d)
      return { changed, deleted, next: run.next() }
    }

    const first = await read(null)
    expect(first.changed).toEqual(byChange.map((r) => String(r["id"])))
    expect(first.deleted).toEqual([])
    expect(first.next).toBe(`updatedAfter=${encodeURIComponent(at(130))}`)

    const quiet = await read(first.next)
    expect(quiet).toEqual({ changed: [], deleted: [], next: first.next })

    // Two records change, one is deleted (capture's tombstone), one is new.
    const [a, b, gone] = [byChange[0]!, byChange[5]!, byChange[9]!]
    for (const r of [a, b]) {
      const updated = { ...r, title: `${String(r["title"])} (revised)`, updatedAt: at(300) }
      await db.sql`update service.views set body = ${JSON.stringify(updated)}, updated_at = ${at(300)}, changed_at = ${at(300)} where resource = 'permits' and id = ${String(r["id"])}`
    }
    await db.sql`delete from service.views where resource = 'permits' and id = ${String(gone["id"])}`
    // In milliseconds, as capture writes deletion times.
    await db.sql`insert into service.deletions (resource, id, company_id, deleted_at) values ('permits', ${String(gone["id"])}, ${acme.id}, date_trunc('milliseconds', now()))`
    const added = makeRecord("permits", { companyId: acme.id, createdAt: at(2000), row: { updated_at: at(310) } })
    await storeRecords(db.sql, "permits", [added], acme.id)

    const second = await read(first.next)
    expect(second.changed).toEqual([...[a, b].map((r) => String(r["id"])).sort(), String(added["id"])])
    expect(second.deleted.map((d) => [d.resource, d.id])).toEqual([["permits", String(gone["id"])]])
    const next = new URLSearchParams(second.next)
    expect(next.get("updatedAfter")).toBe(at(310))
    expect(next.get("deletedSince")).toBe(second.deleted[0]!.deletedAt)

    // The deletion comes again (since is inclusive: deleting twice does no harm), nothing else.
    const third = await read(second.next)
    expect(third.changed).toEqual([])
    expect(third.deleted.map((d) => d.id)).toEqual([String(gone["id"])])
    expect(third.next).toBe(second.next)
    // One moment for both.
    expect((await read(at(305))).changed).toEqual([String(added["id"])])
  })

  it("deletions(): every page, oldest first; deletionsPage(): one", async () => {
    const ids = Array.from({ length: 7 }, () => randomUUID())
    for (const [i, id] of ids.entries()) {
      // In milliseconds, as capture writes deletion times.
      await db.sql`insert into service.deletions (resource, id, company_id, deleted_at) values ('incidents', ${id}, ${acme.id}, date_trunc('milliseconds', now()) - make_interval(secs => ${100 - i}))`
    }
    const seen = watch()
    const listed: Array<string> = []
    for await (const d of client.deletions({ resource: "incidents", limit: 2 })) listed.push(d.id)
    expect(listed).toEqual(ids)
    expect(seen()).toHaveLength(4)
    const page = await client.deletionsPage({ resource: "incidents", limit: 3 })
    expect([page.data.map((d) => d.id), typeof page.nextCursor]).toEqual([ids.slice(0, 3), "string"])
  })
})

describe("events and hooks", () => {
  it("events.list(): the feed page after page, each event typed by its name; events.get(): one", async () => {
    const rows = Array.from({ length: 9 }, (_, i) => {
      const [event, resource] =
        i % 2 === 0 ? (["permit.closed", "permits"] as const) : (["incident.created", "incidents"] as const)
      const createdAt = new Date(Date.now() - (i + 1) * 3_600_000).toISOString()
      const record = makeRecord(resource, { companyId: acme.id, createdAt })
      return {
        company_id: acme.id,
        event,
        resource,
        record_id: String(record["id"]),
        commit_lsn: `0/${(0x5000 + i).toString(16)}`,
        seq: 0,
        payload: JSON.stringify(record),
        created_at: createdAt
      }
    })
    await db.sql`insert into service.events ${db.sql(rows)}`
    const events: Array<Event> = []
    for await (const e of client.events.list({ limit: 4 })) events.push(e)
    expect(events.map((e) => ("destination" in e.data ? e.data.destination.id : e.data.id))).toEqual(
      rows.map((r) => r.record_id)
    )
    for (const e of events) {
      // The union is discriminated by event: each narrows to its record.
      if (e.event === "permit.closed")
        expect(typeof e.data.closedAt === "string" || e.data.closedAt === null).toBe(true)
      else if (e.event === "incident.created") expect(typeof e.data.severity).toBe("string")
      else throw new Error(`unexpected ${e.event}`)
    }
    const closed: Array<string> = []
    for await (const e of client.events.list({ type: "permit.closed" }))
      if (e.event === "permit.closed") closed.push(e.data.id)
    expect(closed).toEqual(rows.filter((r) => r.event === "permit.closed").map((r) => r.record_id))
    expect(await client.events.get(events[0]!.id)).toEqual(events[0])
  })

  it("hooks: create, list, get, delete", async () => {
    const made = await client.hooks.create({ url: "https://127.0.0.1:9/hooks/client", event: "incident.created" })
    expect(made).toMatchObject({ event: "incident.created", name: "incident.created", active: true })
    expect(made.secret).toMatch(/^whsec_/)
    const list = await client.hooks.list()
    expect(list.data.map((h) => h.id)).toContain(made.id)
    expect(list.events).toContain("permit.closed")
    const { secret: _secret, ...withoutSecret } = made
    expect(await client.hooks.get(made.id)).toEqual(withoutSecret)
    await client.hooks.delete(made.id)
    await expect(client.hooks.get(made.id)).rejects.toMatchObject({ status: 404 })
    await expect(
      client.hooks.create({ url: "https://127.0.0.1:9/hooks/client", event: "incident.deleted" as "incident.created" })
    ).rejects.toMatchObject({ status: 400 })
  })

  it("hooks: an idempotent subscribe, a subscription's deliveries, resend, recover and its progress", async () => {
    const hook = { url: "https://127.0.0.1:9/hooks/client-idem", event: "incident.created" } as const
    const idempotencyKey = randomUUID()
    const made = await client.hooks.create(hook, { idempotencyKey })
    expect(await client.hooks.create(hook, { idempotencyKey })).toEqual(made)
    await expect(client.hooks.create({ ...hook, event: "permit.closed" }, { idempotencyKey })).rejects.toMatchObject({
      status: 409
    })
    expect(await client.hooks.deliveriesPage(made.id, { status: "failed", limit: 10 })).toEqual({
      data: [],
      nextCursor: null
    })
    const all: Array<unknown> = []
    for await (const d of client.hooks.deliveries(made.id)) all.push(d)
    expect(all).toEqual([])
    const missing = randomUUID()
    await expect(client.hooks.delivery(made.id, missing)).rejects.toMatchObject({ status: 404 })
    await expect(client.hooks.resend(made.id, missing)).rejects.toMatchObject({ status: 404 })
    // Nothing was ever sent to it: nothing to recover, so no job.
    const recovery = await client.hooks.recover(made.id, new Date(Date.now() - 3_600_000))
    expect(recovery).toMatchObject({ id: null, subscriptionId: made.id, state: "finished", queued: 0 })
    await expect(client.hooks.recover(made.id, "not a date")).rejects.toMatchObject({ status: 400 })
    await expect(client.hooks.recovery(missing)).rejects.toMatchObject({ status: 404 })
    await client.hooks.delete(made.id)
  })

  it("retries a 429 after Retry-After, a bounded number of times", async () => {
    const limited = await startServer(db.url, { rateLimit: 2, rateWindowSeconds: 1 })
    try {
      const limitedChecker = await openApiChecker((await request(limited.url, OPENAPI_PATH)).json)
      const own = checkedFetch(limitedChecker, NEVER_MARK)
      const patient = new SafetyRecordsClient({ baseUrl: limited.url, apiKey: key, fetch: own.fetch })
      for (let i = 0; i < 5; i++) expect((await patient.index()).company.id).toBe(acme.id)
      expect(own.answers.filter((a) => a.status === 429).length).toBeGreaterThan(0)
      expect(own.answers.filter((a) => a.status === 200)).toHaveLength(5)
      const hasty = new SafetyRecordsClient({ baseUrl: limited.url, apiKey: key, fetch: own.fetch, maxRetries: 0 })
      const results = await Promise.allSettled([hasty.index(), hasty.index(), hasty.index()])
      const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult | undefined
      expect(refused?.reason).toBeInstanceOf(SafetyRecordsError)
      expect(refused?.reason).toMatchObject({ status: 429, retryAfter: 1 })
    } finally {
      await limited.close()
    }
  })
})

describe("verifyWebhook", () => {
  const secret = newSecret()
  const record = makeRecord("incidents", { companyId: randomUUID(), createdAt: at(1) })
  const id = randomUUID()
  const body = deliveryBody({
    deliveryId: id,
    event: "incident.created",
    createdAt: at(1),
    payload: JSON.stringify(record)
  })
  const now = Math.floor(Date.now() / 1000)
  // The headers the sender sends (src/webhooks/net/sender.ts uses signedHeaders too).
  const headers = signedHeaders(secret, id, now, body)
  const standardOnly = {
    "webhook-id": headers["webhook-id"]!,
    "webhook-timestamp": headers["webhook-timestamp"]!,
    "webhook-signature": headers["webhook-signature"]!
  }
  const serviceOnly = { "service-signature": headers["service-signature"]! }

  it("accepts a delivery by either signature, from node:http or fetch headers, and returns its body", () => {
    for (const h of [
      headers,
      standardOnly,
      serviceOnly,
      new Headers(headers),
      { "Service-Signature": headers["service-signature"]! }
    ]) {
      const delivery = verifyWebhook(body, h, secret)
      expect(delivery).toEqual(JSON.parse(body))
      expect(delivery.event === "incident.created" && delivery.data.id).toBe(record["id"])
    }
    expect(verifyWebhook(Buffer.from(body), standardOnly, secret).id).toBe(id)
    // Several signatures (a secret being rotated): one that matches is enough.
    expect(
      verifyWebhook(
        body,
        { ...standardOnly, "webhook-signature": `v1,AAAA ${standardOnly["webhook-signature"]}` },
        secret
      ).id
    ).toBe(id)
  })

  it("refuses a changed body, another secret, an old timestamp and a delivery without signatures", () => {
    const refuses = (b: string, h: Record<string, string>, s = secret, options = {}) => {
      expect(() => verifyWebhook(b, h, s, options)).toThrow(WebhookVerificationError)
    }
    const tampered = body.replace('"incident.created"', '"incident.creatEd"')
    for (const h of [headers, standardOnly, serviceOnly]) {
      refuses(tampered, h)
      refuses(body, h, newSecret())
      refuses(body, h, secret, { nowSeconds: now + 301 })
      refuses(body, h, secret, { nowSeconds: now - 301 })
      expect(verifyWebhook(body, h, secret, { nowSeconds: now + 299 }).id).toBe(id)
    }
    refuses(body, {})
    refuses(body, { ...standardOnly, "webhook-id": randomUUID() })
    refuses(body, { "webhook-signature": standardOnly["webhook-signature"] })
    expect(() => verifyWebhook(body, {}, secret)).toThrow(/no webhook-signature or Service-Signature/)
    // One bad scheme and one good: the good one verifies.
    expect(
      verifyWebhook(
        body,
        { ...serviceOnly, "webhook-id": id, "webhook-timestamp": String(now), "webhook-signature": "v1,AAAA" },
        secret
      ).id
    ).toBe(id)
  })
})
