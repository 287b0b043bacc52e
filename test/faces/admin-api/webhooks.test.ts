// The admin HTTP API's webhooks group (/admin/v1: endpoints, deliveries, API-made
// subscriptions, activity) through real HTTP to the real server, as the CLI twin in
// webhooks-cli.test.ts does it from the command line. Capture turns app rows into events, a
// delivery engine (sharing the server's secrets key) sends them to a real HTTPS receiver on
// loopback, which is allowed through the allowed networks and trusted through the test CA.
// Every answer is checked against /admin/v1/openapi.json (or /api/v1/openapi.json).
//
// The engine retries a failed delivery once, after 3 s (instead of the default 5 retries over
// a day: docs/events.md#retries): switching off still takes 15 deliveries in a row that failed every attempt.
import { randomBytes } from "node:crypto"
import Stripe from "stripe"
import { afterEach, beforeAll, describe, expect, it } from "vitest"
import { parseAllowedNetworksOrThrow } from "../../../src/webhooks/net/address-guard.ts"
import {
  keyCaller,
  makeKey,
  makeToken,
  openApiChecker,
  request,
  type OpenApiChecker,
  caller
} from "../../support/http.ts"
import { insertIncident } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { startServer } from "../../support/server.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { at, fannedOut, sleep, useServiceWorld, waitFor } from "../../support/world.ts"
import { useResource } from "../../support/fixtures.ts"

const NO_SUCH = "00000000-0000-4000-8000-000000000000"
const RETRY_AFTER_MS = 3_000

/** Every operation of the group, with ids filled in by `ids`. */
const OPERATIONS = (ids: { endpoint: string; delivery: string; subscription: string }) =>
  [
    ["GET", "/admin/v1/endpoints"],
    ["POST", "/admin/v1/endpoints"],
    ["GET", `/admin/v1/endpoints/${ids.endpoint}`],
    ["PATCH", `/admin/v1/endpoints/${ids.endpoint}`],
    ["POST", `/admin/v1/endpoints/${ids.endpoint}/rotate-secret`],
    ["DELETE", `/admin/v1/endpoints/${ids.endpoint}`],
    ["POST", `/admin/v1/endpoints/${ids.endpoint}/enable`],
    ["POST", `/admin/v1/endpoints/${ids.endpoint}/test`],
    ["GET", `/admin/v1/endpoints/${ids.endpoint}/deliveries`],
    ["GET", `/admin/v1/deliveries/${ids.delivery}`],
    ["POST", `/admin/v1/deliveries/${ids.delivery}/resend`],
    ["GET", "/admin/v1/subscriptions"],
    ["POST", `/admin/v1/subscriptions/${ids.subscription}/disable`],
    ["POST", `/admin/v1/subscriptions/${ids.subscription}/enable`],
    ["DELETE", `/admin/v1/subscriptions/${ids.subscription}`],
    ["GET", "/admin/v1/activity"]
  ] as const

type Delivered = {
  readonly id: string
  readonly event: string
  readonly createdAt: string
  readonly data: { readonly id: string } & Record<string, unknown>
}

describe("admin HTTP API: webhooks", () => {
  let acme: TestCompany
  let other: TestCompany
  const { db, cap, receiver, deps, server } = useServiceWorld({
    // In app.* only: capture mirrors them into service.* as it would in production.
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Safety", mirrored: false })
      other = await createCompany(sql, { name: "Other Works", mirrored: false })
    },
    engine: { retrySchedule: `${RETRY_AFTER_MS}ms` }
  })
  // The production default: no allowed networks.
  const strict = useResource(
    "the strict server",
    () => {
      const { sql: _sql, ...webhooks } = deps
      return startServer(db.url, {}, { webhooks: { ...webhooks, allowed: parseAllowedNetworksOrThrow("") } })
    },
    (s) => s.close()
  )
  let checker: OpenApiChecker
  let apiChecker: OpenApiChecker
  let token: string
  let otherToken: string
  /** [kind, subjectId, actorEmail] of every change the tests made, for the activity test. */
  const changes: Array<readonly [string, string, string | null]> = []

  const call = caller(server, () => checker)
  /** As the acme admin. */
  const admin = (method: string, path: string, body?: unknown) => call(method, path, { token, body })
  /** As the admin of another company. */
  const foreign = (method: string, path: string, body?: unknown) => call(method, path, { token: otherToken, body })
  const hooks = keyCaller(server, () => apiChecker)

  const newToken = async (company: TestCompany) => (await makeToken(db, company, "webhooks test")).token

  const createEndpoint = async (name: string, path: string, events: ReadonlyArray<string> = ["incident.created"]) => {
    const a = await admin("POST", "/admin/v1/endpoints", { name, url: receiver.url(path), events })
    expect(a.status, a.text).toBe(201)
    changes.push(["endpoint.created", a.json.id, acme.adminEmail])
    return { id: a.json.id as string, secret: a.json.secret as string }
  }

  /** The body, after checking the Service-Signature with the secret as a Stripe-style receiver would. */
  const verified = (req: RecordedRequest, secret: string): Delivered =>
    Stripe.webhooks.constructEvent(req.body, String(req.headers["service-signature"]), secret) as unknown as Delivered

  const signedWith = (req: RecordedRequest, secret: string): boolean => {
    try {
      verified(req, secret)
      return true
    } catch {
      return false
    }
  }

  /** Waits for the nth request (1-based) at a path. */
  const nth = (path: string, n: number, what: string, timeoutMs?: number) =>
    waitFor(
      () => at(receiver, path)[n - 1],
      `${what} (request ${n} at ${path}; got ${at(receiver, path).length})`,
      timeoutMs
    )

  /** Everything committed so far is captured and fanned out into deliveries. */
  const settled = async () => {
    await cap.settle()
    await fannedOut(db.sql)
  }

  beforeAll(async () => {
    checker = await openApiChecker((await request(server.url, "/admin/v1/openapi.json")).json)
    apiChecker = await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json)
    token = await newToken(acme)
    otherToken = await newToken(other)
  })
  afterEach(async () => {
    // Each test owns its destinations; leftovers would receive the next test's events.
    await db.sql`delete from service.webhook_endpoints`
    await db.sql`delete from service.webhook_subscriptions`
  })

  it("documents every operation, and answers 401 without an admin token or with a wrong one", async () => {
    const ids = { endpoint: NO_SUCH, delivery: NO_SUCH, subscription: NO_SUCH }
    for (const [method, path] of OPERATIONS(ids)) {
      const template = path.replaceAll(NO_SUCH, "{id}")
      expect(
        checker.document.paths[template]?.[method.toLowerCase()],
        `${method} ${template} in the document`
      ).toBeDefined()
      for (const t of [undefined, "mat_nope", `mk_${"a".repeat(43)}`]) {
        const a = await call(method, path, {
          token: t,
          ...(method === "POST" || method === "PATCH" ? { body: {} } : {})
        })
        expect(a.status, `${method} ${path} with ${t ?? "no token"}`).toBe(401)
        expect(a.headers.get("www-authenticate")).toMatch(/^Bearer/)
      }
    }
  })

  it("create: 201 with the whsec_ secret, shown this once; GET and the list never show it", async () => {
    const a = await admin("POST", "/admin/v1/endpoints", {
      name: "Ops",
      url: receiver.url("/ops"),
      events: ["incident.created", "permit.approved"]
    })
    expect(a.status).toBe(201)
    expect(a.json.id).toMatch(/^[0-9a-f-]{36}$/)
    expect(a.json.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(a.json.endpoint).toMatchObject({
      id: a.json.id,
      companyId: acme.id,
      name: "Ops",
      url: receiver.url("/ops"),
      events: ["incident.created", "permit.approved"],
      enabled: true,
      disabledReason: null,
      disabledAt: null,
      consecutiveFailures: 0,
      createdBy: acme.adminEmail,
      secretRotatedAt: null
    })
    changes.push(["endpoint.created", a.json.id, acme.adminEmail])
    const one = await admin("GET", `/admin/v1/endpoints/${a.json.id}`)
    expect(one.status).toBe(200)
    expect(one.json).toEqual(a.json.endpoint)
    const list = await admin("GET", "/admin/v1/endpoints")
    expect(list.status).toBe(200)
    expect(list.json.data).toEqual([a.json.endpoint])
    for (const answer of [one, list]) {
      expect(answer.text).not.toContain(a.json.secret)
      expect(answer.text).not.toContain("whsec_")
    }
    // The other company's admin sees none of it.
    expect((await foreign("GET", "/admin/v1/endpoints")).json).toEqual({ data: [] })
    expect((await foreign("GET", `/admin/v1/endpoints/${a.json.id}`)).status).toBe(404)
  })

  it("create refuses bad input with 400 and a JSON error naming the problem; nothing is made", async () => {
    const good = { name: "X", url: receiver.url("/x"), events: ["incident.created"] }
    const cases: ReadonlyArray<readonly [string, unknown, RegExp]> = [
      ["http://", { ...good, url: "http://127.0.0.1/x" }, /^url refused: only https/],
      [
        "a private address",
        { ...good, url: "https://10.0.0.1/x" },
        /^url refused: 10\.0\.0\.1 is not a public address/
      ],
      [
        "cloud metadata",
        { ...good, url: "https://169.254.169.254/latest" },
        /^url refused: 169\.254\.169\.254 .*metadata/
      ],
      ["IPv6 loopback, not in the allowed networks", { ...good, url: "https://[::1]/x" }, /^url refused: .*loopback/],
      ["not a URL", { ...good, url: "not a url" }, /^url /],
      [
        "an unknown event",
        { ...good, events: ["incident.created", "incident.deleted"] },
        /^unknown event "incident\.deleted"; known events: incident\.created, /
      ],
      ["no events", { ...good, events: [] }, /^choose at least one event/],
      ["events as text", { ...good, events: "incident.created" }, /^invalid request body: .*events/s],
      ["an empty name", { ...good, name: " " }, /^name is required$/],
      ["no name", { url: good.url, events: good.events }, /^invalid request body: .*name/s],
      ["no url", { name: "X", events: good.events }, /^invalid request body: .*url/s],
      ["no events field", { name: "X", url: good.url }, /^invalid request body: .*events/s],
      ["an unknown field", { ...good, secret: "whsec_mine" }, /^unknown field "secret" in the request body: it takes /],
      [
        "a misspelt field",
        { name: "X", url: good.url, event: ["incident.created"] },
        /^unknown field "event" in the request body: it takes name, url, events, /
      ],
      ["an array", [good], /^invalid request body/],
      ["malformed JSON", "{not json", /./]
    ]
    for (const [what, body, message] of cases) {
      const a = await admin("POST", "/admin/v1/endpoints", body)
      expect(a.status, `${what}: ${a.text}`).toBe(400)
      expect(a.json.error, what).toMatch(message)
    }
    // Without allowed networks (the production default) loopback is refused in every spelling,
    // the receiver's own address included.
    for (const url of ["https://[::ffff:127.0.0.1]/", "https://[::ffff:7f00:1]/x", receiver.url("/x")]) {
      const a = await call("POST", "/admin/v1/endpoints", { base: strict.url, token, body: { ...good, url } })
      expect(a.status, url).toBe(400)
      expect(a.json.error, url).toMatch(/^url refused: .*loopback/)
    }
    expect((await admin("GET", "/admin/v1/endpoints")).json.data).toEqual([])
    expect(await db.sql`select 1 from service.webhook_endpoints`).toHaveLength(0)
  })

  it("PATCH changes name, url and events; refuses bad input; 404 for another company's or an unknown id; 405 with Allow", async () => {
    const e = await createEndpoint("Before", "/patch")
    const renamed = await admin("PATCH", `/admin/v1/endpoints/${e.id}`, { name: "After" })
    expect(renamed.status).toBe(200)
    expect(renamed.json).toMatchObject({
      id: e.id,
      name: "After",
      url: receiver.url("/patch"),
      events: ["incident.created"]
    })
    changes.push(["endpoint.updated", e.id, acme.adminEmail])
    const moved = await admin("PATCH", `/admin/v1/endpoints/${e.id}`, {
      url: receiver.url("/patched"),
      events: ["corrective_action.created", "incident.created"]
    })
    expect(moved.status).toBe(200)
    expect(moved.json).toMatchObject({
      name: "After",
      url: receiver.url("/patched"),
      events: ["corrective_action.created", "incident.created"]
    })
    changes.push(["endpoint.updated", e.id, acme.adminEmail])
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}`)).json).toEqual(moved.json)

    for (const [body, message] of [
      [{}, /^nothing to change: give a name, url, events, rateLimit, ordering, filter or payload$/],
      [{ url: "http://127.0.0.1/x" }, /^url refused: only https/],
      [{ url: "https://192.168.1.1/x" }, /^url refused: 192\.168\.1\.1 is not a public address/],
      [{ events: ["nope"] }, /^unknown event "nope"/],
      [{ events: [] }, /^choose at least one event/],
      [{ name: "" }, /^name is required$/],
      [{ colour: "red" }, /^unknown field "colour" in the request body: it takes /],
      [{ name: "Y", enabled: false }, /^unknown field "enabled" in the request body: it takes /]
    ] as const) {
      const a = await admin("PATCH", `/admin/v1/endpoints/${e.id}`, body)
      expect(a.status, JSON.stringify(body)).toBe(400)
      expect(a.json.error, JSON.stringify(body)).toMatch(message)
    }
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}`)).json).toEqual(moved.json) // nothing changed

    // Another company's endpoint, an unknown id and a malformed one: 404 on every operation.
    const theirs = await foreign("POST", "/admin/v1/endpoints", {
      name: "Theirs",
      url: receiver.url("/theirs"),
      events: ["incident.created"]
    })
    expect(theirs.status).toBe(201)
    for (const id of [theirs.json.id, NO_SUCH, "nope"]) {
      for (const [method, path, body] of [
        ["GET", `/admin/v1/endpoints/${id}`, undefined],
        ["PATCH", `/admin/v1/endpoints/${id}`, { name: "Mine now" }],
        ["POST", `/admin/v1/endpoints/${id}/rotate-secret`, undefined],
        ["POST", `/admin/v1/endpoints/${id}/enable`, undefined],
        ["POST", `/admin/v1/endpoints/${id}/test`, undefined],
        ["GET", `/admin/v1/endpoints/${id}/deliveries`, undefined],
        ["DELETE", `/admin/v1/endpoints/${id}`, undefined]
      ] as const) {
        const a = await admin(method, path, body)
        expect(a.status, `${method} ${path}`).toBe(404)
        expect(a.json.error).toMatch(/^no endpoint/)
      }
    }
    expect((await foreign("GET", `/admin/v1/endpoints/${theirs.json.id}`)).json).toEqual(theirs.json.endpoint) // untouched
    expect(at(receiver, "/theirs")).toHaveLength(0) // no test ping went out
    expect((await foreign("GET", "/admin/v1/endpoints")).json.data.map((x: { id: string }) => x.id)).toEqual([
      theirs.json.id
    ])

    for (const [method, path, allow] of [
      ["PUT", `/admin/v1/endpoints/${e.id}`, "GET, HEAD, PATCH, DELETE"],
      ["POST", `/admin/v1/endpoints/${e.id}`, "GET, HEAD, PATCH, DELETE"],
      ["DELETE", "/admin/v1/endpoints", "GET, HEAD, POST"],
      ["GET", `/admin/v1/endpoints/${e.id}/rotate-secret`, "POST"],
      ["GET", `/admin/v1/endpoints/${e.id}/test`, "POST"],
      ["DELETE", `/admin/v1/endpoints/${e.id}/deliveries`, "GET, HEAD"],
      ["PATCH", `/admin/v1/deliveries/${NO_SUCH}`, "GET, HEAD"],
      ["GET", `/admin/v1/deliveries/${NO_SUCH}/resend`, "POST"],
      ["POST", "/admin/v1/subscriptions", "GET, HEAD"],
      ["GET", `/admin/v1/subscriptions/${NO_SUCH}`, "DELETE"],
      ["POST", "/admin/v1/activity", "GET, HEAD"]
    ] as const) {
      const a = await request(server.url, path, { method, headers: { authorization: `Bearer ${token}` } })
      expect(a.status, `${method} ${path}`).toBe(405)
      expect(a.headers.get("allow"), `${method} ${path}`).toBe(allow)
      expect(Object.keys(a.json)).toEqual(["error"])
      expect(a.json.error).toContain(`${method} is not allowed`)
    }
  })

  it("test endpoint sends a signed ping and shows the receiver's status, time and the start of its answer", async () => {
    receiver.reply("/ping", { status: 200, body: `pong ${"x".repeat(2_000)}` })
    const e = await createEndpoint("Ping", "/ping")
    const ok = await admin("POST", `/admin/v1/endpoints/${e.id}/test`)
    expect(ok.status).toBe(200)
    expect(ok.json).toMatchObject({ ok: true, status: 200, error: null })
    expect(ok.json.response).toBe(`pong ${"x".repeat(2_000)}`.slice(0, 500))
    expect(ok.json.durationMs).toBeGreaterThanOrEqual(0)
    expect(ok.json.durationMs).toBeLessThan(3_000)
    changes.push(["endpoint.tested", e.id, acme.adminEmail])
    const [req] = at(receiver, "/ping")
    expect(req!.headers["service-event"]).toBe("ping")
    expect(req!.headers["service-delivery"]).toBe(ok.json.deliveryId)
    const body = verified(req!, e.secret)
    expect([body.id, body.event, body.data["endpointId"]]).toEqual([ok.json.deliveryId, "ping", e.id])

    receiver.reply("/ping", { status: 503, body: "down for maintenance" })
    const down = await admin("POST", `/admin/v1/endpoints/${e.id}/test`)
    expect(down.status).toBe(200)
    expect(down.json).toMatchObject({ ok: false, status: 503, error: "http 503", response: "down for maintenance" })
    expect(down.json.deliveryId).not.toBe(ok.json.deliveryId)
    changes.push(["endpoint.tested", e.id, acme.adminEmail])
    expect(at(receiver, "/ping")).toHaveLength(2) // a ping is not retried
  })

  it("rotate-secret: the next delivery is signed with the new secret and, for the overlap (24h unless told), the old one; overlap 0 stops the old one at once; a bad overlap is refused", async () => {
    const e = await createEndpoint("Rotating", "/rot")
    await insertIncident(db.sql, acme.id)
    const first = await nth("/rot", 1, "the first delivery")
    expect(signedWith(first, e.secret)).toBe(true)

    // No body: the default overlap of 24 hours.
    const before = Date.now()
    const rotated = await admin("POST", `/admin/v1/endpoints/${e.id}/rotate-secret`)
    expect(rotated.status).toBe(200)
    expect(rotated.json).toEqual({
      id: e.id,
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      previousSecretExpiresAt: expect.any(String)
    })
    const until = Date.parse(rotated.json.previousSecretExpiresAt)
    expect(Math.abs(until - (before + 86_400_000))).toBeLessThan(60_000)
    expect(rotated.json.secret).not.toBe(e.secret)
    changes.push(["endpoint.secret_rotated", e.id, acme.adminEmail])
    const shown = await admin("GET", `/admin/v1/endpoints/${e.id}`)
    expect(shown.json.secretRotatedAt).not.toBeNull()
    expect(shown.json.previousSecretExpiresAt).toBe(rotated.json.previousSecretExpiresAt)
    expect(shown.text).not.toContain(rotated.json.secret)
    expect((await foreign("POST", `/admin/v1/endpoints/${e.id}/rotate-secret`)).status).toBe(404)

    const incident = await insertIncident(db.sql, acme.id)
    const second = await nth("/rot", 2, "the delivery after rotation")
    expect(verified(second, rotated.json.secret).data.id).toBe(incident)
    expect(verified(second, e.secret).data.id).toBe(incident) // the overlap
    expect(String(second.headers["service-signature"])).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
    expect(String(second.headers["webhook-signature"])).toMatch(/^v1,\S+ v1,\S+$/)
    expect(signedWith(second, `whsec_${randomBytes(32).toString("base64")}`)).toBe(false)
    // The test ping is signed with both too.
    const ping = await admin("POST", `/admin/v1/endpoints/${e.id}/test`)
    expect(ping.json.ok).toBe(true)
    changes.push(["endpoint.tested", e.id, acme.adminEmail])
    const pinged = await nth("/rot", 3, "the ping")
    expect([signedWith(pinged, rotated.json.secret), signedWith(pinged, e.secret)]).toEqual([true, true])

    // A bad overlap: 400 with why, and nothing changes (the old secret keeps signing).
    for (const [body, message] of [
      [{ overlap: "8d" }, /^overlap may be at most 7d \(168h\)/],
      [
        { overlap: "tomorrow" },
        /^overlap must be a duration such as 24h, 90m, 7d, 3600s or 1h30m, or 0 for none \(at most 7d\); got "tomorrow"$/
      ],
      [{ overlap: "" }, /^overlap must be a duration/],
      [{ overlap: 3600 }, /^invalid request body: .*overlap/s],
      [{ overlap: "1h", secret: "whsec_mine" }, /^unknown field "secret" in the request body: it takes overlap$/],
      ["[]", /^invalid request body/]
    ] as const) {
      const bad = await admin("POST", `/admin/v1/endpoints/${e.id}/rotate-secret`, body)
      expect(bad.status, JSON.stringify(body)).toBe(400)
      expect(bad.json.error, JSON.stringify(body)).toMatch(message)
    }
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}`)).json).toEqual(shown.json)

    // Overlap 0: the old secret stops signing at once.
    const cut = await admin("POST", `/admin/v1/endpoints/${e.id}/rotate-secret`, { overlap: "0" })
    expect(cut.status).toBe(200)
    expect(cut.json).toEqual({ id: e.id, secret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: null })
    changes.push(["endpoint.secret_rotated", e.id, acme.adminEmail])
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}`)).json.previousSecretExpiresAt).toBeNull()
    await insertIncident(db.sql, acme.id)
    const third = await nth("/rot", 4, "the delivery after a rotation without overlap")
    expect([
      signedWith(third, cut.json.secret),
      signedWith(third, rotated.json.secret),
      signedWith(third, e.secret)
    ]).toEqual([true, false, false])
    expect(() => verified(third, rotated.json.secret)).toThrow(/signature/i)
  })

  it("deliveries: the last 25 with status, attempts and times; one with its attempts; Send Again sends the same id", async () => {
    receiver.reply("/log", { status: 200, body: "got it" })
    const e = await createEndpoint("Log", "/log")
    for (let i = 0; i < 26; i++) await insertIncident(db.sql, acme.id)
    await nth("/log", 26, "26 deliveries")
    const sent = at(receiver, "/log").map((r) => String(r.headers["service-delivery"]))
    expect(new Set(sent).size).toBe(26)

    const log = await waitFor(async () => {
      const a = await admin("GET", `/admin/v1/endpoints/${e.id}/deliveries`)
      expect(a.status).toBe(200)
      // A delivery's row is written once its receiver has answered: wait for all 25 rows.
      return a.json.data.length === 25 && a.json.data.every((d: { state: string }) => d.state === "succeeded")
        ? (a.json.data as Array<Record<string, any>>)
        : undefined
    }, "the log to show every delivery succeeded")
    expect(log).toHaveLength(25) // the last 25 of 26
    for (const d of log) {
      expect(d).toMatchObject({
        event: "incident.created",
        endpointId: e.id,
        subscriptionId: null,
        state: "succeeded",
        attempts: 1,
        lastStatus: 200,
        lastError: null,
        heldReason: null,
        nextAttemptAt: null
      })
      expect(sent).toContain(d.id)
      for (const field of ["createdAt", "lastAttemptAt", "finishedAt"])
        expect(new Date(d[field]).toISOString()).toBe(d[field])
      expect(Date.parse(d.finishedAt)).toBeGreaterThanOrEqual(Date.parse(d.createdAt))
    }
    expect(new Set(log.map((d) => d.id)).size).toBe(25)
    const created = log.map((d) => d.createdAt as string)
    expect([...created].sort().reverse()).toEqual(created) // newest first
    // The one left out is not newer than any listed.
    const [missing] = await db.sql<{ created_at: Date }[]>`select created_at from service.webhook_deliveries
      where endpoint_id = ${e.id} and id <> all(${log.map((d) => d.id)}::uuid[])`
    expect(missing!.created_at.getTime()).toBeLessThanOrEqual(Date.parse(created.at(-1)!))

    const d = log[0]!
    const one = await admin("GET", `/admin/v1/deliveries/${d.id}`)
    expect(one.status).toBe(200)
    const { attemptLog, ...fields } = one.json
    expect(fields).toEqual(d)
    expect(attemptLog).toEqual([
      {
        number: 1,
        startedAt: d.lastAttemptAt,
        durationMs: expect.any(Number),
        status: 200,
        error: null,
        errorKind: null,
        response: "got it"
      }
    ])
    const original = at(receiver, "/log").find((r) => r.headers["service-delivery"] === d.id)!

    // Send Again: one more attempt at once, with the same delivery id in the header and the body.
    const resent = await admin("POST", `/admin/v1/deliveries/${d.id}/resend`)
    expect(resent.status).toBe(200)
    expect(resent.json).toMatchObject({ id: d.id, endpointId: e.id, state: "pending", attempts: 1 })
    changes.push(["delivery.resent", d.id, acme.adminEmail])
    const again = await nth("/log", 27, "the resent delivery")
    expect(again.headers["service-delivery"]).toBe(d.id)
    expect(again.headers["service-event"]).toBe("incident.created")
    const body = verified(again, e.secret)
    expect(body.id).toBe(d.id)
    expect(body.data.id).toBe(d.recordId)
    expect(again.body.equals(original.body)).toBe(true) // the same bytes; only the signature is fresh
    const after = await waitFor(async () => {
      const a = await admin("GET", `/admin/v1/deliveries/${d.id}`)
      return a.json.state === "succeeded" && a.json.attempts === 2 ? a.json : undefined
    }, "the resend to be recorded")
    expect(after.attemptLog.map((x: { number: number; status: number }) => [x.number, x.status])).toEqual([
      [1, 200],
      [2, 200]
    ])

    for (const id of [NO_SUCH, "nope"]) {
      expect((await admin("GET", `/admin/v1/deliveries/${id}`)).status).toBe(404)
      expect((await admin("POST", `/admin/v1/deliveries/${id}/resend`)).status).toBe(404)
    }
    for (const [method, path] of [
      ["GET", `/admin/v1/deliveries/${d.id}`],
      ["POST", `/admin/v1/deliveries/${d.id}/resend`],
      ["GET", `/admin/v1/endpoints/${e.id}/deliveries`]
    ] as const) {
      const a = await foreign(method, path)
      expect(a.status, `${method} ${path}`).toBe(404)
    }
    await sleep(200)
    expect(at(receiver, "/log")).toHaveLength(27) // the foreign resend sent nothing
  })

  it("a failing endpoint is switched off after 15 fully failed deliveries in a row; GET shows why; Turn On brings it back", async () => {
    receiver.reply("/down", { status: 500, body: "still down" })
    const e = await createEndpoint("Flaky", "/down")
    for (let i = 0; i < 15; i++) await insertIncident(db.sql, acme.id)
    const off = await waitFor(
      async () => {
        const a = await admin("GET", `/admin/v1/endpoints/${e.id}`)
        return a.json.enabled === false ? a.json : undefined
      },
      "the endpoint to be switched off",
      40_000
    )
    expect(off).toMatchObject({
      enabled: false,
      consecutiveFailures: 15,
      disabledReason: "15 deliveries in a row failed every attempt; last error: http 500"
    })
    expect(new Date(off.disabledAt).toISOString()).toBe(off.disabledAt)
    expect((await admin("GET", "/admin/v1/endpoints")).json.data).toEqual([off])
    changes.push(["endpoint.switched_off", e.id, null])

    const log = (await admin("GET", `/admin/v1/endpoints/${e.id}/deliveries`)).json.data as Array<
      Record<string, unknown>
    >
    expect(log).toHaveLength(15)
    for (const d of log)
      expect(d).toMatchObject({
        state: "failed",
        attempts: 2,
        lastStatus: 500,
        lastError: "http 500",
        nextAttemptAt: null
      })
    expect(at(receiver, "/down")).toHaveLength(30)

    // While off, new events are not sent to it.
    await insertIncident(db.sql, acme.id)
    await settled()
    await sleep(300)
    expect(at(receiver, "/down")).toHaveLength(30)
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}/deliveries`)).json.data).toHaveLength(15)

    expect((await foreign("POST", `/admin/v1/endpoints/${e.id}/enable`)).status).toBe(404)
    expect((await admin("GET", `/admin/v1/endpoints/${e.id}`)).json.enabled).toBe(false)

    // The receiver is fixed; Turn On.
    receiver.reply("/down", { status: 200 })
    const on = await admin("POST", `/admin/v1/endpoints/${e.id}/enable`)
    expect(on.status).toBe(200)
    expect(on.json).toMatchObject({
      id: e.id,
      enabled: true,
      disabledReason: null,
      disabledAt: null,
      consecutiveFailures: 0
    })
    changes.push(["endpoint.enabled", e.id, acme.adminEmail])
    // Turn On offers the replay of what failed while it was off: the streak and the event
    // that happened meanwhile, counted by a dry run of exactly that.
    const offer = on.json.replayWhatFailed
    expect(offer).toMatchObject({ endpointId: e.id, events: ["incident.created"], failedOnly: true })
    expect(Date.parse(offer.since)).toBeLessThan(Date.parse(off.disabledAt))
    const dry = await admin("POST", "/admin/v1/replays", {
      endpointId: e.id,
      since: offer.since,
      until: offer.until,
      failedOnly: true,
      dryRun: true
    })
    expect(dry.json).toMatchObject({ dryRun: true, resend: 15, create: 1, deliveries: 16 })
    expect((await admin("POST", `/admin/v1/endpoints/${e.id}/enable`)).json.replayWhatFailed).toBeNull() // on already: nothing to offer
    const incident = await insertIncident(db.sql, acme.id)
    const back = await nth("/down", 31, "a delivery after Turn On")
    expect(verified(back, e.secret).data.id).toBe(incident)
    await waitFor(async () => {
      const a = await admin("GET", `/admin/v1/endpoints/${e.id}/deliveries`)
      return a.json.data[0]?.state === "succeeded"
    }, "the success in the log")
  })

  it("delete: 204, then 404 everywhere; the endpoint's pending retry is never sent", async () => {
    receiver.reply("/doomed", { status: 500 })
    const e = await createEndpoint("Doomed", "/doomed")
    await insertIncident(db.sql, acme.id)
    await nth("/doomed", 1, "the first attempt")
    const [pending] = await waitFor(async () => {
      const a = await admin("GET", `/admin/v1/endpoints/${e.id}/deliveries`)
      return a.json.data[0]?.attempts === 1 ? (a.json.data as Array<Record<string, any>>) : undefined
    }, "the failed attempt in the log")
    expect(pending).toMatchObject({ state: "pending", attempts: 1, lastStatus: 500, lastError: "http 500" })
    expect(pending!.nextAttemptAt).not.toBeNull()

    expect((await foreign("DELETE", `/admin/v1/endpoints/${e.id}`)).status).toBe(404)
    const del = await admin("DELETE", `/admin/v1/endpoints/${e.id}`)
    expect(del.status).toBe(204)
    expect(del.text).toBe("")
    changes.push(["endpoint.deleted", e.id, acme.adminEmail])
    for (const [method, path] of [
      ["GET", `/admin/v1/endpoints/${e.id}`],
      ["DELETE", `/admin/v1/endpoints/${e.id}`],
      ["PATCH", `/admin/v1/endpoints/${e.id}`],
      ["POST", `/admin/v1/endpoints/${e.id}/test`],
      ["GET", `/admin/v1/endpoints/${e.id}/deliveries`],
      ["GET", `/admin/v1/deliveries/${pending!.id}`],
      ["POST", `/admin/v1/deliveries/${pending!.id}/resend`]
    ] as const) {
      const a = await admin(method, path, method === "PATCH" ? { name: "Back" } : undefined)
      expect(a.status, `${method} ${path}`).toBe(404)
    }
    expect((await admin("GET", "/admin/v1/endpoints")).json.data).toEqual([])
    // The retry was due RETRY_AFTER_MS after the first attempt: wait past it.
    const due = Date.parse(pending!.nextAttemptAt)
    await sleep(Math.max(0, due - Date.now()) + 1_000)
    expect(at(receiver, "/doomed")).toHaveLength(1)
  })

  it("subscriptions made through the API: listed, turned off (nothing sent), on again (sent again), deleted (gone for the key too)", async () => {
    const key = (await makeKey(db, acme, { webhooks: true, name: "Zapier" })).key
    const made = await hooks("POST", "/api/v1/hooks", key, { url: receiver.url("/sub"), event: "incident.created" })
    expect(made.status, made.text).toBe(201)
    const id = made.json.id as string
    const secret = made.json.secret as string
    changes.push(["subscription.created", id, null])

    const list = await admin("GET", "/admin/v1/subscriptions")
    expect(list.status).toBe(200)
    expect(list.json.data).toEqual([
      {
        id,
        companyId: acme.id,
        keyId: expect.any(String),
        keyName: "Zapier",
        url: receiver.url("/sub"),
        event: "incident.created",
        active: true,
        createdAt: made.json.createdAt,
        updatedAt: expect.any(String),
        rateLimit: null,
        ordering: "none",
        filter: null,
        payload: "full",
        circuit: { state: "closed", failures: 0, openedAt: null, nextProbeAt: null, probes: 0, lastError: null }
      }
    ])
    expect(list.text).not.toContain("whsec_")
    expect((await foreign("GET", "/admin/v1/subscriptions")).json).toEqual({ data: [] })
    for (const [method, path] of [
      ["POST", `/admin/v1/subscriptions/${id}/disable`],
      ["POST", `/admin/v1/subscriptions/${id}/enable`],
      ["DELETE", `/admin/v1/subscriptions/${id}`]
    ] as const) {
      expect((await foreign(method, path)).status, `${method} ${path}`).toBe(404)
    }

    const first = await insertIncident(db.sql, acme.id)
    expect(verified(await nth("/sub", 1, "a delivery to the subscription"), secret).data.id).toBe(first)

    /** Turns the subscription off or on as the admin; the key's API then shows it so. */
    const turn = async (to: "disable" | "enable") => {
      const a = await admin("POST", `/admin/v1/subscriptions/${id}/${to}`)
      expect(a.status).toBe(200)
      expect(a.json).toMatchObject({ id, active: to === "enable" })
      changes.push([`subscription.${to}d`, id, acme.adminEmail])
      expect((await hooks("GET", `/api/v1/hooks/${id}`, key)).json.active).toBe(to === "enable")
    }
    await turn("disable")
    // While off, its events are not delivered (no delivery is even made for them).
    const whileOff = await insertIncident(db.sql, acme.id)
    await settled()
    const deliveredRecords = () => db.sql<
      { record_id: string }[]
    >`select e.record_id::text from service.webhook_deliveries d
      join service.events e on e.id = d.event_id where d.subscription_id = ${id} order by d.created_at`
    expect((await deliveredRecords()).map((r) => r.record_id)).toEqual([first])
    await sleep(300)
    expect(at(receiver, "/sub")).toHaveLength(1)

    await turn("enable")
    const third = await insertIncident(db.sql, acme.id)
    const resumed = await nth("/sub", 2, "a delivery after turning it on")
    expect(verified(resumed, secret).data.id).toBe(third)
    expect((await deliveredRecords()).map((r) => r.record_id)).not.toContain(whileOff)

    const del = await admin("DELETE", `/admin/v1/subscriptions/${id}`)
    expect(del.status).toBe(204)
    expect(del.text).toBe("")
    changes.push(["subscription.deleted", id, acme.adminEmail])
    expect((await admin("GET", "/admin/v1/subscriptions")).json).toEqual({ data: [] })
    expect((await hooks("GET", `/api/v1/hooks/${id}`, key)).status).toBe(404)
    expect((await hooks("GET", "/api/v1/hooks", key)).json.data).toEqual([])
    for (const [method, path] of [
      ["DELETE", `/admin/v1/subscriptions/${id}`],
      ["POST", `/admin/v1/subscriptions/${id}/disable`],
      ["POST", `/admin/v1/subscriptions/${id}/enable`],
      ["POST", `/admin/v1/subscriptions/nope/disable`]
    ] as const) {
      const a = await admin(method, path)
      expect(a.status, `${method} ${path}`).toBe(404)
      expect(a.json.error).toMatch(/^no subscription/)
    }
    await insertIncident(db.sql, acme.id)
    await settled()
    await sleep(300)
    expect(at(receiver, "/sub")).toHaveLength(2)
  })

  it("activity: every change, newest first, with the admin's e-mail, kind and subject; filters by kind; 400 for a bad filter", async () => {
    const a = await admin("GET", "/admin/v1/activity")
    expect(a.status).toBe(200)
    const entries = a.json.data as Array<{
      id: string
      at: string
      kind: string
      subjectId: string | null
      actorEmail: string | null
      details: Record<string, unknown>
    }>
    const times = entries.map((e) => e.at)
    expect([...times].sort().reverse()).toEqual(times)
    // Each change made above, in the order made (the log is newest first).
    // (endpoint.failing, the warning at ten failures in a row, is left out: the switch-off
    // above records fifteen in one batch or a few, and a batch that also switches the
    // endpoint off logs the switch-off only; test/faces/pages/replays.test.ts covers it.)
    const webhookEntries = entries
      .filter((e) => /^(endpoint|subscription|delivery)\./.test(e.kind) && e.kind !== "endpoint.failing")
      .reverse()
    expect(webhookEntries.map((e) => [e.kind, e.subjectId, e.actorEmail])).toEqual(changes)
    const switched = entries.find((e) => e.kind === "endpoint.switched_off")!
    expect(switched.details).toMatchObject({
      by: "service",
      reason: expect.stringMatching(/^15 deliveries in a row failed every attempt/)
    })
    const created = entries.find((e) => e.kind === "subscription.created")!
    expect(created.details).toMatchObject({ byKey: expect.any(String), event: "incident.created" })
    const updates = entries.filter((e) => e.kind === "endpoint.updated").map((e) => e.details)
    expect(updates).toEqual([
      { url: receiver.url("/patched"), events: ["corrective_action.created", "incident.created"] },
      { name: "After" }
    ])
    expect(a.text).not.toContain("whsec_")

    for (const [kind, test] of [
      ["endpoint", (k: string) => k.startsWith("endpoint.")],
      ["subscription", (k: string) => k.startsWith("subscription.")],
      ["endpoint.secret_rotated", (k: string) => k === "endpoint.secret_rotated"],
      ["delivery", (k: string) => k === "delivery.resent"]
    ] as const) {
      const f = await admin("GET", `/admin/v1/activity?kind=${kind}`)
      expect(f.status).toBe(200)
      const kinds = f.json.data.map((e: { kind: string }) => e.kind)
      expect(kinds.length, kind).toBeGreaterThan(0)
      expect(kinds.every(test), `${kind}: ${kinds.join(",")}`).toBe(true)
      expect(f.json.data).toEqual(entries.filter((e) => test(e.kind)))
    }
    for (const kind of new Set(entries.map((e) => e.kind))) {
      const f = await admin("GET", `/admin/v1/activity?kind=${kind}`)
      expect(f.status, kind).toBe(200)
      expect(f.json.data.length, kind).toBeGreaterThan(0)
    }
    for (const [query, message] of [
      ["kind=nonsense", /^invalid query: Expected .*"endpoint\.created".* at \["kind"\]$/s],
      ["kind=endpoints", /^invalid query: .*at \["kind"\]$/s],
      ["kind=endpoint.exploded", /^invalid query: .*at \["kind"\]$/s],
      ["kinds=endpoint", /^invalid query: Expected no excess property at \["kinds"\]$/],
      ["limit=5", /^invalid query: Expected no excess property at \["limit"\]$/]
    ] as const) {
      const bad = await admin("GET", `/admin/v1/activity?${query}`)
      expect(bad.status, query).toBe(400)
      expect(bad.json.error, query).toMatch(message)
    }

    // The other company's admin sees none of it.
    const theirs = await foreign("GET", "/admin/v1/activity")
    expect(theirs.status).toBe(200)
    const ours = new Set(changes.map((c) => c[1]))
    expect(theirs.json.data.filter((e: { subjectId: string }) => ours.has(e.subjectId))).toEqual([])
    expect(theirs.text).not.toContain(acme.adminEmail)
  })
})
