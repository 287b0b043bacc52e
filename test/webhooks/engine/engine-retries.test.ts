// Failures, the retry schedule, switching an endpoint off after 15 fully failed deliveries,
// Turn On, Send Again, secret rotation and 410 Gone — against a real HTTPS receiver.
import { createServer } from "node:net"
import Stripe from "stripe"
import { describe, expect, it } from "vitest"
import { getDelivery, resendDelivery } from "../../../src/webhooks/deliveries/deliveries.ts"
import {
  createEndpoint,
  enableEndpoint,
  getEndpoint,
  rotateEndpointSecret
} from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident } from "../../support/app.ts"
import { startHttpsReceiver } from "../../support/https-receiver.ts"
import {
  addHook,
  ADMIN,
  at,
  attemptsOf,
  deliveriesTo,
  dnsTable,
  failure,
  makeKey,
  sleep,
  startEngine,
  useEngineWorld,
  waitFor,
  type Answered,
  type DeliveryRow
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const dns = dnsTable({ "gone.test": ["127.0.0.1"] })
// Each test owns its destinations and its engine (s.engine, stopped after it).
const s = useEngineWorld({ lookup: dns.lookup })

const endpoint = (url: string, events: ReadonlyArray<string> = ["incident.created"]) =>
  runSql(s.w.deps.sql, createEndpoint(s.w.deps, ADMIN, { companyId: s.w.company.id, name: url, url, events }))

const deliveryOf = (endpointId: string) => deliveriesTo(s.w.db.sql, endpointId)

const ids = (reqs: ReadonlyArray<{ headers: Record<string, unknown> }>) =>
  reqs.map((r) => String(r.headers["service-delivery"]))

const incident = () => insertIncident(s.w.db.sql, s.w.company.id)

/** An endpoint at `path` on the receiver, answering `status`; an engine on `retrySchedule`; one incident. */
const sendTo = async (path: string, status: number, retrySchedule: string) => {
  s.w.receiver.reply(path, { status })
  const e = await endpoint(s.w.receiver.url(path))
  s.engine = await startEngine(s.w.deps, { retrySchedule })
  await incident()
  return e
}

/** Waits until the endpoint's first delivery passes `ready`, and returns it. */
const firstDelivery = (endpointId: string, ready: (d: DeliveryRow) => boolean, what: string) =>
  waitFor(async () => {
    const [d] = await deliveryOf(endpointId)
    return d !== undefined && ready(d) ? d : null
  }, what)

const endpointNow = (id: string) => runSql(s.w.deps.sql, getEndpoint({ id }))

const failuresReach = (id: string, n: number, what: string) =>
  waitFor(async () => (await endpointNow(id)).consecutiveFailures === n, what)

const resend = (id: string) => resendDelivery(ADMIN, { id, companyId: s.w.company.id })

const logged = (kind: string, subjectId: string) =>
  s.w.db.sql`select 1 from service.activity where kind = ${kind} and subject_id = ${subjectId}`

const incidentsModuleInService = async () => {
  const [c] = await s.w.db.sql<
    { modules: string[] }[]
  >`select modules from service.companies where id = ${s.w.company.id}`
  return c!.modules.includes("incidents")
}

describe("each kind of failure is recorded and retried", () => {
  it("classifies http, redirect, timeout, refused connection, reset, TLS and DNS failures", async () => {
    const rogue = await startHttpsReceiver({ certs: "untrusted" })
    const closedPort = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port
        s.close(() => resolve(p))
      })
    })
    try {
      s.w.receiver.reply("/f500", { status: 500, body: "boom" })
      s.w.receiver.reply("/f302", { redirect: s.w.receiver.url("/target") })
      s.w.receiver.reply("/fhang", { hang: true })
      s.w.receiver.reply("/freset", { destroy: true })
      s.w.receiver.reply("/f410", { status: 410 })
      const cases: ReadonlyArray<readonly [string, string, RegExp, number | null]> = [
        [s.w.receiver.url("/f500"), "http", /^http 500$/, 500],
        [
          s.w.receiver.url("/f302"),
          "redirect",
          /^redirect 302 to https:\/\/127\.0\.0\.1:\d+\/target \(not followed\)$/,
          302
        ],
        [s.w.receiver.url("/fhang"), "timeout", /^timeout: /, null],
        [s.w.receiver.url("/freset"), "connection", /^connection/, null],
        [`https://127.0.0.1:${closedPort}/x`, "connection", /^connection refused/, null],
        [rogue.url("/tls"), "tls", /^tls: /, null],
        [s.w.receiver.url("/dns", "gone.test"), "dns", /^dns: gone\.test does not resolve/, null],
        // An endpoint (not a subscription) answered 410: just a failure.
        [s.w.receiver.url("/f410"), "http", /^http 410$/, 410]
      ]
      const made: Array<{ id: string }> = []
      for (const [url] of cases) made.push(await endpoint(url))
      delete dns.table["gone.test"] // the name stops resolving after creation
      s.engine = await startEngine(s.w.deps, { retrySchedule: "1h", timeoutMs: 4_000 })
      await incident()
      for (const [i, [, kind, error, status]] of cases.entries()) {
        const d = await firstDelivery(made[i]!.id, (d) => d.attempts === 1, `attempt for ${kind}`)
        // One attempt so far, the next in an hour.
        expect(d.state).toBe("pending")
        const [a] = await attemptsOf(s.w.db.sql, d.id)
        expect([a!.error_kind, a!.status]).toEqual([kind, status])
        expect(a!.error).toMatch(error)
        const full = await runSql(s.w.deps.sql, getDelivery({ id: d.id }))
        expect(Date.parse(full.nextAttemptAt!) - Date.parse(full.lastAttemptAt!)).toBeGreaterThan(3_590_000)
        expect(full.attemptLog[0]!.error).toMatch(error)
      }
      expect(at(s.w.receiver, "/f500")).toHaveLength(1)
      expect(at(s.w.receiver, "/target")).toHaveLength(0) // the redirect was never followed
      expect(rogue.requests).toHaveLength(0)
      const [snippet] = await s.w.db.sql<{ response_snippet: string }[]>`
        select a.response_snippet from service.webhook_attempts a join service.webhook_deliveries d on d.id = a.delivery_id
        where d.endpoint_id = ${made[0]!.id}`
      expect(snippet!.response_snippet).toBe("boom")
    } finally {
      await rogue.close()
      dns.table["gone.test"] = ["127.0.0.1"]
    }
  })
})

describe("the retry schedule", () => {
  it("makes 6 attempts with the scheduled waits, then gives up", async () => {
    const e = await sendTo("/always500", 500, "200ms,300ms,200ms,300ms,200ms")
    const d = await firstDelivery(e.id, (d) => d.state === "failed", "the delivery to fail")
    const reqs = at(s.w.receiver, "/always500")
    expect(reqs).toHaveLength(6)
    expect(new Set(ids(reqs))).toEqual(new Set([d.id])) // one delivery id over every attempt
    const gaps = reqs.slice(1).map((r, i) => r.arrivedAt - reqs[i]!.arrivedAt)
    const waits = [200, 300, 200, 300, 200]
    for (const [i, g] of gaps.entries()) expect(g).toBeGreaterThanOrEqual(waits[i]! - 10)
    expect((await attemptsOf(s.w.db.sql, d.id)).map((a) => a.number)).toEqual([1, 2, 3, 4, 5, 6])
    expect(d.attempts).toBe(6)
    expect((await endpointNow(e.id)).consecutiveFailures).toBe(1)
    await sleep(700)
    expect(at(s.w.receiver, "/always500")).toHaveLength(6) // nothing after the last attempt
  })

  it("stops at the first success", async () => {
    let n = 0
    const path = "/flaky"
    const e = await sendTo(path, 503, "100ms,100ms,100ms,100ms,100ms")
    await waitFor(() => (n = at(s.w.receiver, path).length) >= 2, "two failures")
    s.w.receiver.reply(path, { status: 202 })
    const d = await firstDelivery(e.id, (d) => d.state === "succeeded", "success")
    expect(d.attempts).toBe(at(s.w.receiver, path).length)
    expect(d.attempts).toBeGreaterThanOrEqual(n + 1)
    expect(d.last_status).toBe(202)
    expect((await endpointNow(e.id)).consecutiveFailures).toBe(0)
  })
})

describe("switching off and Turn On", () => {
  it("switches an endpoint off after 15 deliveries in a row fail every attempt, and Turn On brings it back", async () => {
    s.w.receiver.reply("/down", { status: 500, body: "still down" })
    const e = await endpoint(s.w.receiver.url("/down"))
    s.engine = await startEngine(s.w.deps, { retrySchedule: "20ms" })
    for (let i = 0; i < 14; i++) await incident()
    await failuresReach(e.id, 14, "14 failures")
    expect((await endpointNow(e.id)).enabled).toBe(true)
    await incident()
    const off = await waitFor(async () => {
      const ep = await endpointNow(e.id)
      return ep.enabled ? null : ep
    }, "switch-off")
    expect(off.consecutiveFailures).toBe(15)
    expect(off.disabledReason).toBe("15 deliveries in a row failed every attempt; last error: http 500")
    expect(off.disabledAt).not.toBeNull()
    // Each of the 15 deliveries (one per incident) was attempted exactly twice.
    const sent = ids(at(s.w.receiver, "/down"))
    const ds = await deliveryOf(e.id)
    expect(ds.map((d) => [d.state, d.attempts, sent.filter((s) => s === d.id).length])).toEqual(
      ds.map(() => ["failed", 2, 2])
    )
    expect(sent).toHaveLength(2 * ds.length)
    expect(ds).toHaveLength(15)
    const [log] = await s.w.db.sql<{ details: { reason: string } }[]>`
      select details from service.activity where kind = 'endpoint.switched_off' and subject_id = ${e.id}`
    expect(log!.details.reason).toBe(off.disabledReason)

    // While off, new events are not delivered to it.
    await incident()
    await s.w.cap.settle()
    await sleep(300)
    expect(await deliveryOf(e.id)).toHaveLength(15)

    // The receiver is fixed; Turn On.
    s.w.receiver.reply("/down", { status: 200 })
    const on = await runSql(s.w.deps.sql, enableEndpoint(ADMIN, { id: e.id, companyId: s.w.company.id }))
    expect([on.enabled, on.disabledReason, on.consecutiveFailures]).toEqual([true, null, 0])
    const incidentId = await incident()
    await waitFor(async () => (await deliveryOf(e.id)).some((d) => d.state === "succeeded"), "delivery after Turn On")
    const last = at(s.w.receiver, "/down").at(-1)!
    expect((JSON.parse(last.body.toString()) as { data: { id: string } }).data.id).toBe(incidentId)
    const [enabled] = await s.w.db.sql<{ actor_email: string; details: { previousReason: string } }[]>`
      select actor_email, details from service.activity where kind = 'endpoint.enabled' and subject_id = ${e.id}`
    expect(enabled!.actor_email).toBe(ADMIN.kind === "user" ? ADMIN.email : "")
    expect(enabled!.details.previousReason).toBe(off.disabledReason)
  })

  it("a success in between starts the count again", async () => {
    s.w.receiver.reply("/sometimes", { status: 500 })
    const e = await endpoint(s.w.receiver.url("/sometimes"))
    s.engine = await startEngine(s.w.deps, { retrySchedule: "20ms" })
    for (let i = 0; i < 3; i++) await incident()
    await failuresReach(e.id, 3, "3 failures")
    s.w.receiver.reply("/sometimes", { status: 200 })
    await incident()
    await failuresReach(e.id, 0, "the reset")
    s.w.receiver.reply("/sometimes", { status: 500 })
    await incident()
    await failuresReach(e.id, 1, "1 failure")
  })
})

describe("Send Again", () => {
  it("tries a failed delivery again at once with the same delivery id", async () => {
    const e = await sendTo("/again", 500, "20ms")
    const d = await firstDelivery(e.id, (d) => d.state === "failed", "failure")
    s.w.receiver.reply("/again", { status: 200 })
    const before = at(s.w.receiver, "/again")
    const resent = await runSql(s.w.deps.sql, resend(d.id))
    expect([resent.id, resent.state]).toEqual([d.id, "pending"])
    await firstDelivery(e.id, (d) => d.state === "succeeded", "the resend")
    const after = at(s.w.receiver, "/again")
    expect(after).toHaveLength(3)
    expect(ids(after)).toEqual([d.id, d.id, d.id])
    const bodies = after.map((r) => r.body.toString())
    expect(new Set(bodies).size).toBe(1) // the same body bytes; only the signature is fresh
    expect(JSON.parse(bodies[0]!).id).toBe(d.id)
    expect(before).toHaveLength(2)
    expect((await deliveryOf(e.id))[0]!.attempts).toBe(3)
    // A failed Send Again does not count twice toward switching off.
    expect((await endpointNow(e.id)).consecutiveFailures).toBe(0)
    expect((await logged("delivery.resent", d.id))[0]).toBeDefined()
  })
})

describe("Send Again of a delivery that had succeeded", () => {
  it("is one attempt: failing, it ends failed without a new schedule and does not count toward switching off", async () => {
    const e = await sendTo("/again-ok", 200, "20ms,20ms,20ms")
    const d = await firstDelivery(e.id, (d) => d.state === "succeeded", "success")
    s.w.receiver.reply("/again-ok", { status: 500 })
    await runSql(s.w.deps.sql, resend(d.id))
    await firstDelivery(e.id, (d) => d.state === "failed", "the failed resend")
    await sleep(300) // a schedule of 20 ms waits would have tried again by now
    expect(at(s.w.receiver, "/again-ok")).toHaveLength(2)
    expect((await attemptsOf(s.w.db.sql, d.id)).map((a) => a.status)).toEqual([200, 500])
    expect((await deliveryOf(e.id))[0]).toMatchObject({ state: "failed", attempts: 2 })
    expect((await endpointNow(e.id)).consecutiveFailures).toBe(0)
  })

  it("a delivery still in its schedule is tried now and keeps the rest of its schedule", async () => {
    const e = await sendTo("/again-mid", 500, "1h,20ms")
    const d = await firstDelivery(e.id, (d) => d.attempts === 1, "the first attempt")
    expect(d.state).toBe("pending") // next in an hour
    await runSql(s.w.deps.sql, resend(d.id))
    // the resend (attempt 2) fails; the schedule's last wait (20 ms) brings attempt 3
    await firstDelivery(e.id, (d) => d.state === "failed", "the schedule to run out")
    expect(at(s.w.receiver, "/again-mid")).toHaveLength(3)
    expect((await endpointNow(e.id)).consecutiveFailures).toBe(1)
  })
})

describe("Send Again and what stops a destination", () => {
  it("is refused (409, nothing changes) while the record's module is off, and allowed for a switched-off endpoint", async () => {
    const e = await sendTo("/again-rules", 500, "20ms")
    const d = await firstDelivery(e.id, (d) => d.state === "failed", "failure")
    s.w.receiver.reply("/again-rules", { status: 200 })
    const sent = at(s.w.receiver, "/again-rules").length

    await s.w.db
      .sql`update app.company_modules set enabled = false where company_id = ${s.w.company.id} and module = 'incidents'`
    let refused: Answered | null
    try {
      await waitFor(async () => !(await incidentsModuleInService()), "the module off in the service")
      refused = await failure(runSql(s.w.deps.sql, resend(d.id)))
    } finally {
      await s.w.db
        .sql`update app.company_modules set enabled = true where company_id = ${s.w.company.id} and module = 'incidents'`
    }
    expect(refused?.status).toBe(409)
    expect(refused?.message).toMatch(/incidents module is turned off/)
    expect((await deliveryOf(e.id))[0]?.state).toBe("failed")

    // Module back on, endpoint switched off by an admin: Send Again still tries the receiver.
    await waitFor(incidentsModuleInService, "the module on in the service")
    await s.w.db.sql`update service.webhook_endpoints set enabled = false where id = ${e.id}`
    await runSql(s.w.deps.sql, resend(d.id))
    await firstDelivery(e.id, (d) => d.state === "succeeded", "the resend to the switched-off endpoint")
    expect(at(s.w.receiver, "/again-rules").length).toBe(sent + 1)
  })
})

describe("secret rotation", () => {
  it("signs every later attempt with the new secret at once, retries of older deliveries included", async () => {
    const e = await sendTo("/rot", 500, "400ms")
    await waitFor(() => at(s.w.receiver, "/rot").length === 1, "first attempt")
    const rotated = await runSql(s.w.deps.sql, rotateEndpointSecret(s.w.deps, ADMIN, { id: e.id, overlap: "0" })) // no overlap: the old secret stops at once
    expect(rotated.secret).toMatch(/^whsec_/)
    expect(rotated.secret).not.toBe(e.secret)
    s.w.receiver.reply("/rot", { status: 200 })
    await waitFor(() => at(s.w.receiver, "/rot").length === 2, "the retry")
    const [first, retry] = at(s.w.receiver, "/rot")
    const sig = (r: typeof first) => String(r!.headers["service-signature"])
    expect(() => Stripe.webhooks.constructEvent(first!.body, sig(first), e.secret)).not.toThrow()
    expect(() => Stripe.webhooks.constructEvent(retry!.body, sig(retry), rotated.secret)).not.toThrow()
    expect(() => Stripe.webhooks.constructEvent(retry!.body, sig(retry), e.secret)).toThrow()
    expect((await logged("endpoint.secret_rotated", e.id))[0]).toBeDefined()
  })
})

describe("410 Gone", () => {
  it("deletes a subscription whose receiver answers 410, and sends it nothing more", async () => {
    const keyId = await makeKey(s.w.db.sql, s.w.company.id)
    s.w.receiver.reply("/gone", { status: 410 })
    const { subscription } = await addHook(s.w, "/gone", { keyId })
    s.engine = await startEngine(s.w.deps)
    await incident()
    await waitFor(
      async () =>
        (await s.w.db.sql`select 1 from service.webhook_subscriptions where id = ${subscription.id}`).length === 0,
      "the deletion"
    )
    expect(at(s.w.receiver, "/gone")).toHaveLength(1) // no retry after 410
    const [log] = await s.w.db.sql<{ details: { reason: string; keyId: string } }[]>`
      select details from service.activity where kind = 'subscription.deleted' and subject_id = ${subscription.id}`
    expect(log!.details.reason).toBe("the receiver answered 410 Gone")
    expect(log!.details.keyId).toBe(keyId)
    await incident()
    await s.w.cap.settle()
    await sleep(300)
    expect(at(s.w.receiver, "/gone")).toHaveLength(1)
  })
})
