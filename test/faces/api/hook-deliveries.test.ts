// A receiver's own deliveries through the read API (docs/api.md#your-deliveries), through real
// HTTP to the real server, with capture, a delivery engine and its replay lane on a real
// database, sending to a real HTTPS receiver on loopback that fails, hangs and recovers: the
// log with its attempts and a capped excerpt of the answers (never a payload), its filters and
// cursor; Send Again under the same id; recovery since a time as a replay the key follows;
// Idempotency-Key on subscribing; every refusal a JSON error that changes nothing.
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { beforeAll, describe, expect, it } from "vitest"
import { insertIncident } from "../../support/app.ts"
import { caller, makeKey, openApiChecker, request, type OpenApiChecker } from "../../support/http.ts"
import { createCompany, updateCompany, type TestCompany } from "../../support/views.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { getReplay } from "../../../src/webhooks/replay/jobs.ts"
import { runSql } from "../../support/sql.ts"
import { startServer } from "../../support/server.ts"
import { at, fannedOut, sleep, useServiceWorld, waitFor } from "../../support/world.ts"

const NO_SUCH = "00000000-0000-4000-8000-000000000000"
/** A title no answer about deliveries may carry: they never show a payload. */
const TITLE = "Crane outrigger sank into soft ground"
/** The end of a long answer from the receiver: past the excerpt, so never shown. */
const TAIL = "END-OF-THE-RECEIVERS-LONG-ANSWER"

type Attempt = {
  number: number
  startedAt: string
  durationMs: number
  status: number | null
  errorKind: string | null
  error: string | null
  response?: string | null
}
type Delivery = {
  id: string
  subscriptionId: string
  eventId: string
  event: string
  status: string
  heldReason: string | null
  attemptCount: number
  nextAttemptAt: string | null
  finishedAt: string | null
  attempts: Array<Attempt>
}

describe("/api/v1/hooks/{id}/deliveries, resend, recover, /api/v1/replays/{id}, Idempotency-Key", () => {
  let acme: TestCompany
  let other: TestCompany
  const { db, cap, receiver, server, deps } = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Self Service", mirrored: false })
      other = await createCompany(sql, { name: "Other Self Service", mirrored: false })
    },
    // A hung receiver times out quickly; a recovery of a few deliveries lasts a few seconds.
    engine: { timeoutMs: 800, replayRate: 2 },
    // The tests poll the API while they wait: the key's limit is not what they are about
    // (test/faces/api/rate-limit.test.ts is); the answers still carry it.
    settings: { rateLimit: 100_000 }
  })
  let checker: OpenApiChecker
  let key: string
  let keyId: string
  let stranger: string // the same company, webhooks, another key
  let foreign: string // another company
  let plain: string // no webhooks permission

  const send = caller(
    () => server.url,
    () => checker
  )
  const call = (method: string, path: string, k: string, body?: unknown) => send(method, path, { token: k, body })

  const subscribe = async (path: string, k = key, event = "incident.created") => {
    const a = await call("POST", "/api/v1/hooks", k, { url: receiver.url(path), event })
    expect(a.status, a.text).toBe(201)
    return a.json.id as string
  }

  const deliveriesOf = async (sub: string, query = "", k = key) => {
    const a = await call("GET", `/api/v1/hooks/${sub}/deliveries${query}`, k)
    expect(a.status, a.text).toBe(200)
    expect(a.text).not.toContain(TITLE)
    return a.json as { data: Array<Delivery>; nextCursor: string | null }
  }

  const rowsOf = (sub: string) =>
    db.sql<{ id: string; state: string; attempts: number; event_id: string }[]>`
      select id::text, state, attempts, event_id::text from service.webhook_deliveries where subscription_id = ${sub}
      order by created_at, id`

  const webhookIds = (path: string) => at(receiver, path).map((r) => r.headers["webhook-id"] as string)

  beforeAll(async () => {
    checker = await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json)
    const made = await makeKey(db, acme, { webhooks: true, name: "receiver" })
    key = made.key
    keyId = made.id
    stranger = (await makeKey(db, acme, { webhooks: true, name: "stranger" })).key
    foreign = (await makeKey(db, other, { webhooks: true, name: "foreign" })).key
    plain = (await makeKey(db, acme, { webhooks: false, name: "plain" })).key
  })

  it("documents the new operations; 401 without a key, 403 without the webhooks permission, 404 for another key's subscription", async () => {
    const sub = await subscribe("/refusals")
    const paths = [
      ["GET", "/api/v1/hooks/{id}/deliveries", `/api/v1/hooks/${sub}/deliveries`, undefined],
      ["GET", "/api/v1/hooks/{id}/deliveries/{deliveryId}", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}`, undefined],
      [
        "POST",
        "/api/v1/hooks/{id}/deliveries/{deliveryId}/resend",
        `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}/resend`,
        undefined
      ],
      ["POST", "/api/v1/hooks/{id}/recover", `/api/v1/hooks/${sub}/recover`, { since: "2026-01-01" }],
      ["GET", "/api/v1/replays/{id}", `/api/v1/replays/${NO_SUCH}`, undefined]
    ] as const
    for (const [method, template, path, body] of paths) {
      expect(checker.document.paths[template]?.[method.toLowerCase()], `${method} ${template}`).toBeDefined()
      const none = await request(server.url, path, { method, ...(body ? { body: JSON.stringify(body) } : {}) })
      expect(none.status, `${method} ${path}`).toBe(401)
      const p = await call(method, path, plain, body)
      expect([p.status, p.json.error], `${method} ${path}`).toEqual([
        403,
        "this key does not have the webhooks permission"
      ])
    }
    for (const k of [stranger, foreign]) {
      for (const [method, , path, body] of paths.slice(0, 4)) {
        const a = await call(method, path, k, body)
        expect([a.status, a.json.error], `${method} ${path}`).toEqual([404, "no such subscription"])
      }
    }
    expect((await call("GET", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}`, key)).json.error).toBe("no such delivery")
    expect((await call("GET", "/api/v1/hooks/not-an-id/deliveries", key)).status).toBe(404)
  })

  it("a module off refuses resend and recover (403) but not the log; the API off or another tier refuses every path", async () => {
    const sub = await subscribe("/company-rules")
    const since = { since: new Date(Date.now() - 60_000).toISOString() }
    await updateCompany(db.sql, acme.id, { modules: RESOURCES.filter((r) => r !== "incidents") })
    try {
      const r = await call("POST", `/api/v1/hooks/${sub}/recover`, key, since)
      expect([r.status, r.json.error]).toEqual([403, "the incidents module is turned off for this company"])
      expect((await call("POST", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}/resend`, key)).status).toBe(403)
      expect((await call("GET", `/api/v1/hooks/${sub}/deliveries`, key)).status).toBe(200)
    } finally {
      await updateCompany(db.sql, acme.id, { modules: RESOURCES })
    }
    for (const change of [{ apiEnabled: false }, { tier: "team" }]) {
      await updateCompany(db.sql, acme.id, change)
      try {
        for (const [method, path, body] of [
          ["GET", `/api/v1/hooks/${sub}/deliveries`, undefined],
          ["POST", `/api/v1/hooks/${sub}/recover`, since],
          ["GET", `/api/v1/replays/${NO_SUCH}`, undefined]
        ] as const) {
          const a = await call(method, path, key, body)
          expect(a.status, `${JSON.stringify(change)} ${method} ${path}`).toBe(403)
        }
      } finally {
        await updateCompany(db.sql, acme.id, { apiEnabled: true, tier: "company" })
      }
    }
    expect(Number((await db.sql`select count(*)::int as n from service.webhook_replays`)[0]!.n)).toBe(0)
  })

  it("every new path counts in the key's rate limit: past it, 429 with Retry-After, and nothing is resent", async () => {
    const { sql: _sql, ...webhooks } = deps
    const limited = await startServer(db.url, { rateLimit: 5, rateWindowSeconds: 60 }, { webhooks })
    try {
      // A key of its own, used only here: its window starts with its first request.
      const own = (await makeKey(db, acme, { webhooks: true, name: "limited" })).key
      const at = (method: string, path: string, body?: unknown) =>
        request(limited.url, path, { method, key: own, ...(body ? { body: JSON.stringify(body) } : {}) })
      const made = await at("POST", "/api/v1/hooks", { url: receiver.url("/limited"), event: "incident.created" })
      expect(made.status).toBe(201)
      const sub = made.json.id as string
      const answers = [
        await at("GET", `/api/v1/hooks/${sub}/deliveries`),
        await at("GET", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}`),
        await at("POST", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}/resend`),
        await at("GET", `/api/v1/replays/${NO_SUCH}`)
      ]
      expect(answers.map((a) => a.status)).toEqual([200, 404, 404, 404])
      expect(answers.map((a) => a.headers.get("ratelimit"))).toEqual(
        [3, 2, 1, 0].map((r) => expect.stringMatching(new RegExp(`^"default";r=${r};t=\\d+$`)))
      )
      for (const [method, path, body] of [
        ["POST", `/api/v1/hooks/${sub}/deliveries/${NO_SUCH}/resend`, undefined],
        ["POST", `/api/v1/hooks/${sub}/recover`, { since: new Date(Date.now() - 60_000).toISOString() }]
      ] as const) {
        const refused = await at(method, path, body)
        expect(refused.status).toBe(429)
        expect(Object.keys(refused.json)).toEqual(["error"])
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0)
      }
      expect(Number((await db.sql`select count(*)::int as n from service.webhook_replays`)[0]!.n)).toBe(0)
    } finally {
      await limited.close()
    }
  })

  it("a failing receiver: every attempt in the log with its status and duration, the answer capped to an excerpt, never the payload", async () => {
    const path = "/failing"
    receiver.reply(path, { status: 500, body: `${"x".repeat(1_000)}${TAIL}` })
    const sub = await subscribe(path)
    const incident = await insertIncident(db.sql, acme.id, { title: TITLE })
    await waitFor(async () => (await rowsOf(sub)).some((r) => r.state === "failed"), "failed after six attempts")
    const page = await deliveriesOf(sub)
    expect(page.nextCursor).toBeNull()
    expect(page.data).toHaveLength(1)
    const d = page.data[0]!
    const [event] = await db.sql<{ id: string }[]>`select id::text from service.events where record_id = ${incident}`
    expect(d).toMatchObject({
      subscriptionId: sub,
      eventId: event!.id,
      event: "incident.created",
      status: "failed",
      heldReason: null,
      attemptCount: 6,
      nextAttemptAt: null
    })
    // The delivery id is the webhook-id the receiver saw, on every attempt.
    expect(new Set(webhookIds(path))).toEqual(new Set([d.id]))
    expect(webhookIds(path)).toHaveLength(6)
    // The list shows the latest five attempts, without answers.
    expect(d.attempts.map((a) => a.number)).toEqual([2, 3, 4, 5, 6])
    for (const a of d.attempts) {
      expect(a).toMatchObject({ status: 500, errorKind: "http", error: "http 500" })
      expect(a.durationMs).toBeGreaterThanOrEqual(0)
      expect(a).not.toHaveProperty("response")
    }
    const one = await call("GET", `/api/v1/hooks/${sub}/deliveries/${d.id}`, key)
    expect(one.status).toBe(200)
    expect(one.text).not.toContain(TITLE)
    expect(one.text).not.toContain(TAIL)
    expect(one.json.attempts.map((a: Attempt) => a.number)).toEqual([1, 2, 3, 4, 5, 6])
    for (const a of one.json.attempts as Array<Attempt>) expect(a.response).toBe("x".repeat(200))
    // Another subscription's delivery is not found under this one.
    const mine = await subscribe("/failing-other")
    expect((await call("GET", `/api/v1/hooks/${mine}/deliveries/${d.id}`, key)).status).toBe(404)
  })

  it("a hanging receiver shows a timeout; once it answers, resend sends it again under the same id", async () => {
    const path = "/hanging"
    receiver.reply(path, { hang: true })
    const sub = await subscribe(path)
    await insertIncident(db.sql, acme.id, { title: "Hung" })
    await waitFor(async () => (await rowsOf(sub)).some((r) => r.attempts >= 1), "a first attempt")
    const [first] = (await deliveriesOf(sub)).data
    expect(first!.attempts[0]).toMatchObject({ number: 1, status: null, errorKind: "timeout" })
    await waitFor(async () => (await rowsOf(sub))[0]!.state === "failed", "failed", 30_000)

    receiver.reply(path, { status: 204 })
    const before = webhookIds(path).length
    const r = await call("POST", `/api/v1/hooks/${sub}/deliveries/${first!.id}/resend`, key)
    expect(r.status, r.text).toBe(202)
    expect(r.json).toMatchObject({ id: first!.id, status: "pending", finishedAt: null })
    // Counted in the key's rate limit like any request.
    expect(r.headers.get("ratelimit")).toMatch(/^"default";r=\d+;t=\d+$/)
    await waitFor(async () => (await rowsOf(sub))[0]!.state === "succeeded", "resent and delivered")
    expect(webhookIds(path).slice(before)).toEqual([first!.id])
    const after = (await deliveriesOf(sub)).data[0]!
    expect(after).toMatchObject({ id: first!.id, status: "succeeded", attemptCount: 7 })
    expect(after.attempts.at(-1)).toMatchObject({ number: 7, status: 204, errorKind: null, error: null })

    // Another key cannot resend it; a key that can no longer read incidents cannot either.
    expect((await call("POST", `/api/v1/hooks/${sub}/deliveries/${first!.id}/resend`, stranger)).status).toBe(404)
    const [keyRow] = await db.sql<{ scopes: string[] }[]>`select scopes from service.api_keys where id = ${keyId}`
    const scopes = keyRow!.scopes
    await db.sql`update service.api_keys set scopes = '{corrective-actions}' where id = ${keyId}`
    try {
      const no = await call("POST", `/api/v1/hooks/${sub}/deliveries/${first!.id}/resend`, key)
      expect([no.status, no.json.error]).toEqual([
        403,
        "this key cannot read incidents, the records of incident.created"
      ])
      const rec = await call("POST", `/api/v1/hooks/${sub}/recover`, key, {
        since: new Date(Date.now() - 60_000).toISOString()
      })
      expect(rec.status).toBe(403)
    } finally {
      await db.sql`update service.api_keys set scopes = ${scopes} where id = ${keyId}`
    }
    expect((await rowsOf(sub))[0]!.attempts).toBe(7)
    // A subscription turned off may not receive: 409, the reason given, nothing changes.
    await db.sql`update service.webhook_subscriptions set active = false where id = ${sub}`
    const off = await call("POST", `/api/v1/hooks/${sub}/deliveries/${first!.id}/resend`, key)
    expect(off.status).toBe(409)
    expect(off.json.error).toMatch(/the subscription is turned off$/)
    expect((await rowsOf(sub))[0]).toMatchObject({ state: "succeeded", attempts: 7 })
  })

  it("filters by status and creation time; pages with a cursor bound to its filters", async () => {
    const path = "/paged"
    receiver.reply(path, (r) =>
      JSON.parse(r.body.toString("utf8")).data.title.startsWith("ok") ? {} : { status: 400 }
    )
    const sub = await subscribe(path)
    for (let i = 0; i < 5; i++) await insertIncident(db.sql, acme.id, { title: `ok ${i}` })
    // Deliveries are made at fan-out: the moment between the two batches is after the first's.
    await waitFor(async () => (await rowsOf(sub)).length === 5, "the first five fanned out")
    const middle = new Date().toISOString()
    await sleep(20)
    for (let i = 0; i < 2; i++) await insertIncident(db.sql, acme.id, { title: `bad ${i}` })
    await waitFor(async () => {
      const rows = await rowsOf(sub)
      return rows.length === 7 && rows.every((r) => r.state === "succeeded" || r.state === "failed")
    }, "seven finished")
    const all = await deliveriesOf(sub)
    expect(all.data).toHaveLength(7)
    const stored = await rowsOf(sub)
    expect(all.data.map((d) => d.id)).toEqual(stored.map((r) => r.id).reverse())
    expect((await deliveriesOf(sub, "?status=failed")).data.map((d) => d.status)).toEqual(["failed", "failed"])
    expect((await deliveriesOf(sub, "?status=succeeded")).data).toHaveLength(5)
    expect((await deliveriesOf(sub, "?status=pending")).data).toEqual([])
    expect((await deliveriesOf(sub, `?createdAfter=${middle}`)).data.map((d) => d.status)).toEqual(["failed", "failed"])
    expect((await deliveriesOf(sub, `?createdBefore=${middle}`)).data).toHaveLength(5)

    const seen: Array<string> = []
    let cursor: string | null = null
    let pages = 0
    do {
      const page = await deliveriesOf(sub, `?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)
      seen.push(...page.data.map((d) => d.id))
      cursor = page.nextCursor
      pages++
    } while (cursor !== null)
    expect(pages).toBe(3)
    expect(seen).toEqual(all.data.map((d) => d.id))

    const first = await deliveriesOf(sub, "?limit=2")
    const other = await call("GET", `/api/v1/hooks/${sub}/deliveries?status=failed&cursor=${first.nextCursor}`, key)
    expect(other.status).toBe(400)
    expect(other.json.error).toMatch(/^cursor belongs to another list/)
    const elsewhere = await subscribe("/paged-2")
    expect((await call("GET", `/api/v1/hooks/${elsewhere}/deliveries?cursor=${first.nextCursor}`, key)).status).toBe(
      400
    )
    for (const [q, message] of [
      ["?status=done", /^query parameter "status" must be one of succeeded, failed, pending/],
      ["?limit=0", /^query parameter "limit"/],
      ["?createdAfter=yesterday", /^query parameter "createdAfter"/],
      [
        "?sort=updatedAt",
        /^unknown query parameter "sort"; this list takes limit, cursor, status, createdAfter, createdBefore$/
      ]
    ] as const) {
      const a = await call("GET", `/api/v1/hooks/${sub}/deliveries${q}`, key)
      expect(a.status, q).toBe(400)
      expect(a.json.error, q).toMatch(message)
    }
  })

  it("recover: what failed or never went since a time is sent again on the replay lane under its own ids; the key follows it", async () => {
    const path = "/recovering"
    receiver.reply(path, { status: 200 })
    const sub = await subscribe(path)
    const start = new Date(Date.now() - 1_000).toISOString()
    await insertIncident(db.sql, acme.id, { title: "delivered" })
    await waitFor(async () => (await rowsOf(sub)).some((r) => r.state === "succeeded"), "one delivered")
    // Down: three fail.
    receiver.reply(path, { status: 503 })
    for (let i = 0; i < 3; i++) await insertIncident(db.sql, acme.id, { title: `missed ${i}` })
    await waitFor(async () => (await rowsOf(sub)).filter((r) => r.state === "failed").length === 3, "three failed")
    // Turned off by an admin meanwhile: an event it never got a delivery for.
    await db.sql`update service.webhook_subscriptions set active = false where id = ${sub}`
    const never = await insertIncident(db.sql, acme.id, { title: "never sent" })
    await cap.settle()
    await fannedOut(db.sql)
    await db.sql`update service.webhook_subscriptions set active = true where id = ${sub}`
    expect(await rowsOf(sub)).toHaveLength(4)
    const failedIds = (await rowsOf(sub)).filter((r) => r.state === "failed").map((r) => r.id)
    const delivered = (await rowsOf(sub)).find((r) => r.state === "succeeded")!.id

    // Mistakes change nothing.
    for (const [body, message] of [
      [{}, /since/],
      [{ since: "last week" }, /^since must be/],
      [{ since: new Date(Date.now() - 40 * 86_400_000).toISOString() }, /^since must be within the last 30 days/],
      [{ since: new Date(Date.now() + 86_400_000).toISOString() }, /^since must be in the past$/]
    ] as const) {
      const a = await call("POST", `/api/v1/hooks/${sub}/recover`, key, body)
      expect(a.status, JSON.stringify(body)).toBe(400)
      expect(a.json.error).toMatch(message)
    }
    expect(Number((await db.sql`select count(*)::int as n from service.webhook_replays`)[0]!.n)).toBe(0)

    receiver.reply(path, { status: 200 })
    const before = webhookIds(path).length
    const r = await call("POST", `/api/v1/hooks/${sub}/recover`, key, { since: start })
    expect(r.status, r.text).toBe(202)
    expect(r.json).toMatchObject({
      subscriptionId: sub,
      state: "running",
      matched: 5,
      queued: 4,
      skippedDelivered: 1,
      skippedInFlight: 0
    })
    const id = r.json.id as string
    // One at a time: a second while it runs is a 409.
    const again = await call("POST", `/api/v1/hooks/${sub}/recover`, key, { since: start })
    expect(again.status).toBe(409)
    expect(again.json.error).toContain(id)
    // Only the key that started it reads it.
    for (const k of [stranger, foreign]) expect((await call("GET", `/api/v1/replays/${id}`, k)).status).toBe(404)
    await waitFor(
      async () => (await call("GET", `/api/v1/replays/${id}`, key)).json.state === "finished",
      "finished",
      30_000
    )
    const done = await call("GET", `/api/v1/replays/${id}`, key)
    expect(done.json).toMatchObject({
      id,
      state: "finished",
      queued: 4,
      progress: { sent: 4, remaining: 0, inEngine: 0 }
    })
    const resent = webhookIds(path).slice(before)
    // The failed ones under their own ids, the one never sent under a new one; the delivered one not again.
    expect(resent).toHaveLength(4)
    expect(resent).toEqual(expect.arrayContaining(failedIds))
    expect(resent).not.toContain(delivered)
    const rows = await rowsOf(sub)
    expect(rows.every((x) => x.state === "succeeded")).toBe(true)
    const [neverEvent] = await db.sql<{ id: string }[]>`select id::text from service.events where record_id = ${never}`
    expect(rows.find((x) => x.event_id === neverEvent!.id)).toBeDefined()
    // The admins see it among the replays, made by the key.
    expect(await runSql(db.sql, getReplay({ id }))).toMatchObject({
      source: "api",
      createdBy: null,
      byKey: { id: keyId, name: "receiver" },
      failedOnly: true,
      destination: { kind: "subscription", id: sub }
    })
    // Logged as the key's.
    const [log] = await db.sql<{ details: { byKey: string; replayId: string } }[]>`
      select details from service.activity where kind = 'deliveries.replayed' and subject_id = ${sub}`
    expect(log!.details).toMatchObject({ byKey: keyId, replayId: id })

    // Nothing left to recover: no job, its counts.
    const nothing = await call("POST", `/api/v1/hooks/${sub}/recover`, key, { since: start })
    expect(nothing.status).toBe(202)
    expect(nothing.json).toMatchObject({ id: null, state: "finished", matched: 5, queued: 0, skippedDelivered: 5 })
    // An admin's replay is not the key's to read.
    const [adminReplay] = await db.sql<{ id: string }[]>`
      insert into service.webhook_replays (company_id, subscription_id, since, until, events, failed_only, source, matched,
        planned_resend, planned_create, skipped_delivered, skipped_in_flight, total, state)
      values (${acme.id}, ${sub}, now() - interval '1 hour', now(), '{incident.created}', true, 'api', 0, 0, 0, 0, 0, 0, 'finished')
      returning id::text`
    expect((await call("GET", `/api/v1/replays/${adminReplay!.id}`, key)).status).toBe(404)
  })

  it("examples/recover/recover.mjs lists what failed, with the answers' start, and recovers it", {
    timeout: 60_000
  }, async () => {
    const path = "/example"
    receiver.reply(path, { status: 502, body: "upstream down" })
    const sub = await subscribe(path)
    const since = new Date(Date.now() - 1_000).toISOString()
    for (let i = 0; i < 2; i++) await insertIncident(db.sql, acme.id, { title: `example ${i}` })
    await waitFor(async () => (await rowsOf(sub)).filter((r) => r.state === "failed").length === 2, "two failed")
    const failed = (await rowsOf(sub)).map((r) => r.id)
    receiver.reply(path, { status: 200 })
    const before = webhookIds(path).length
    const script = fileURLToPath(new URL("../../../examples/recover/recover.mjs", import.meta.url))
    const child = spawn(process.execPath, [script, "--since", since, "--subscription", sub], {
      env: { ...process.env, API_URL: server.url, API_KEY: key },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout.on("data", (d) => (output += d))
    child.stderr.on("data", (d) => (output += d))
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve))
    expect(code, output).toBe(0)
    for (const id of failed) expect(output).toContain(`failed ${id} incident.created`)
    expect(output).toContain('HTTP 502 "upstream down"')
    expect(output).toContain("2 failed since")
    expect(output).toMatch(/recovery [0-9a-f-]{36}: 2 to send, 0 delivered already/)
    expect(output).toContain("recovery finished: 2 sent")
    expect(webhookIds(path).slice(before).sort()).toEqual([...failed].sort())
  })

  it("Idempotency-Key: the same body answers the first 201 with the secret; another body is a 409 and changes nothing", async () => {
    const post = (k: string, body: unknown, idem?: string) =>
      request(server.url, "/api/v1/hooks", {
        method: "POST",
        key: k,
        body: JSON.stringify(body),
        headers: idem === undefined ? {} : { "idempotency-key": idem }
      })
    const count = async () =>
      Number(
        (await db.sql`select count(*)::int as n from service.webhook_subscriptions where url like ${"%/idem/%"}`)[0]!.n
      )
    const body = { url: receiver.url("/idem/a"), event: "incident.created", rateLimit: 5 }
    const first = await post(key, body, "retry-1")
    expect(first.status, first.text).toBe(201)
    expect(first.json.secret).toMatch(/^whsec_/)
    expect(first.headers.get("cache-control")).toBe("no-store")
    checker.check("POST", "/api/v1/hooks", first)
    // The same body, its fields in another order: the first answer, secret included.
    const retry = await post(key, { rateLimit: 5, event: "incident.created", url: body.url }, "retry-1")
    expect(retry.status).toBe(201)
    expect(retry.json).toEqual(first.json)
    expect(retry.headers.get("cache-control")).toBe("no-store")
    // Changed meanwhile, a retry still answers what the first request answered.
    await db.sql`update service.webhook_subscriptions set rate_limit = 9 where id = ${first.json.id}`
    expect((await post(key, body, "retry-1")).json).toEqual(first.json)
    await db.sql`update service.webhook_subscriptions set rate_limit = 5 where id = ${first.json.id}`

    const different = await post(key, { ...body, url: receiver.url("/idem/b") }, "retry-1")
    expect(different.status).toBe(409)
    expect(Object.keys(different.json)).toEqual(["error"])
    expect(different.json.error).toMatch(/Idempotency-Key was used in the last 24 hours with another request body/)
    checker.check("POST", "/api/v1/hooks", different)
    expect(await count()).toBe(1)

    // Another key's Idempotency-Key is its own.
    const theirs = await post(stranger, { ...body, url: receiver.url("/idem/c") }, "retry-1")
    expect(theirs.status).toBe(201)
    expect(theirs.json.secret).not.toBe(first.json.secret)
    expect(await count()).toBe(2)

    // Sent five times at once: one subscription, one answer.
    const racing = await Promise.all(
      Array.from({ length: 5 }, () => post(key, { url: receiver.url("/idem/d"), event: "incident.created" }, "race-1"))
    )
    expect(racing.map((a) => a.status)).toEqual([201, 201, 201, 201, 201])
    expect(new Set(racing.map((a) => a.json.id)).size).toBe(1)
    expect(await count()).toBe(3)

    // A refused request stores nothing: the same Idempotency-Key works once it is right.
    const refused = await post(key, { url: "http://127.0.0.1/x", event: "incident.created" }, "fix-1")
    expect(refused.status).toBe(400)
    const fixed = await post(key, { url: receiver.url("/idem/e"), event: "incident.created" }, "fix-1")
    expect(fixed.status).toBe(201)

    for (const bad of ["", "x".repeat(256), "with space"]) {
      const a = await post(key, { url: receiver.url("/idem/f"), event: "incident.created" }, bad)
      expect(a.status, JSON.stringify(bad)).toBe(400)
      expect(a.json.error).toMatch(/Idempotency-Key must be 1 to 255 visible ASCII characters/)
    }
    expect(await count()).toBe(4)
    // Kept 24 hours: an older answer is gone, and the key makes a new request.
    await db.sql`update service.api_idempotency set created_at = now() - interval '25 hours' where idempotency_key = 'retry-1'`
    const later = await post(key, { ...body, url: receiver.url("/idem/g") }, "retry-1")
    expect(later.status).toBe(201)
    expect(later.json.id).not.toBe(first.json.id)

    // A key's store is bounded: with 1000 kept, a new answer pushes out the oldest.
    await db.sql`
      insert into service.api_idempotency (key_id, idempotency_key, request_hash, status, response, created_at)
      select ${keyId}, 'filler-' || n, 'x', 201, '{}'::jsonb, now() - interval '1 hour' - n * interval '1 second'
      from generate_series(1, 1000) as n`
    const kept = async () =>
      db.sql<{ idempotency_key: string }[]>`
        select idempotency_key from service.api_idempotency where key_id = ${keyId} order by created_at`
    expect((await post(key, { url: receiver.url("/idem/h"), event: "incident.created" }, "bounded-1")).status).toBe(201)
    const after = (await kept()).map((r) => r.idempotency_key)
    expect(after).toHaveLength(1000)
    expect(after.at(-1)).toBe("bounded-1")
    expect(after).not.toContain("filler-1000")
    expect(after).toContain("filler-1")
  })
})
