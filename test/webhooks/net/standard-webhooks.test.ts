// Deliveries verified as receivers verify them (docs/events.md#signing): real capture, engine and
// HTTPS receiver; each request checked by the Standard Webhooks libraries (standardwebhooks
// and svix, on webhook-id, webhook-timestamp and webhook-signature) and by Stripe's
// (on Service-Signature), for an admin's endpoint, a key's subscription, a retry and a ping.
import type { IncomingHttpHeaders } from "node:http"
import { Webhook as StandardWebhook } from "standardwebhooks"
import Stripe from "stripe"
import { Webhook as SvixWebhook } from "svix"
import { describe, expect, it } from "vitest"
import { newSecret } from "../../../src/webhooks/net/signature.ts"
import { testEndpoint } from "../../../src/webhooks/endpoints/ping.ts"
import { insertIncident } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { addEndpoint, addHook, ADMIN, arrived, at, startEngine, useEngineWorld } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const state = useEngineWorld()

const headersOf = (h: IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(Object.entries(h).flatMap(([k, v]) => (typeof v === "string" ? [[k, v]] : [])))

/** Every verifier accepts the request as it arrived, and refuses it changed or under another secret. */
const verifiedByAll = (req: RecordedRequest, secret: string) => {
  const body = req.body.toString("utf8")
  const headers = headersOf(req.headers)
  const parsed = JSON.parse(body) as { id: string; event: string }
  expect(headers["webhook-id"]).toBe(parsed.id)
  expect(headers["webhook-id"]).toBe(headers["service-delivery"])
  expect(headers["webhook-timestamp"]).toMatch(/^\d+$/)
  expect(headers["webhook-timestamp"]).toBe(/^t=(\d+),/.exec(headers["service-signature"]!)![1])
  expect(headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)

  expect(new StandardWebhook(secret.slice("whsec_".length)).verify(body, headers)).toEqual(parsed)
  expect(() => new SvixWebhook(secret).verify(body, headers)).not.toThrow()
  expect(Stripe.webhooks.constructEvent(req.body, headers["service-signature"]!, secret)).toEqual(parsed)

  const other = newSecret()
  const changed = body.replace(parsed.event, `${parsed.event}x`)
  expect(() => new StandardWebhook(secret.slice("whsec_".length)).verify(changed, headers)).toThrow()
  expect(() => new StandardWebhook(other.slice("whsec_".length)).verify(body, headers)).toThrow()
  expect(() => new SvixWebhook(secret).verify(changed, headers)).toThrow()
  expect(() => new SvixWebhook(other).verify(body, headers)).toThrow()
  expect(() => new SvixWebhook(secret).verify(body, { ...headers, "webhook-id": "another-id" })).toThrow()
  expect(() => Stripe.webhooks.constructEvent(Buffer.from(changed), headers["service-signature"]!, secret)).toThrow()
  return parsed
}

describe("Standard Webhooks", () => {
  it("an endpoint's and a subscription's deliveries verify with standardwebhooks, svix and Stripe", async () => {
    const endpoint = await addEndpoint(state.w, "/standard/endpoint", { name: "Standard" })
    const hook = await addHook(state.w, "/standard/hook", { key: { webhooks: true } })
    state.engine = await startEngine(state.w.deps)
    const incidentId = await insertIncident(state.w.db.sql, state.w.company.id, { title: "Ladder — unsafe ✓" })
    const [toEndpoint] = await arrived(state.w.receiver, "/standard/endpoint", 1, "the endpoint's delivery")
    const [toHook] = await arrived(state.w.receiver, "/standard/hook", 1, "the subscription's delivery")
    const a = verifiedByAll(toEndpoint!, endpoint.secret) as unknown as { data: { id: string } }
    const b = verifiedByAll(toHook!, hook.subscription.secret) as unknown as { data: { id: string } }
    expect([a.data.id, b.data.id]).toEqual([incidentId, incidentId])
    expect(endpoint.secret).not.toBe(hook.subscription.secret)
  })

  it("a retry keeps its webhook-id, with a fresh timestamp and signature that verify", async () => {
    const endpoint = await addEndpoint(state.w, "/standard/flaky", { name: "Flaky" })
    state.w.receiver.reply("/standard/flaky", { status: 503 })
    state.engine = await startEngine(state.w.deps, { retrySchedule: "1s" })
    await insertIncident(state.w.db.sql, state.w.company.id)
    await arrived(state.w.receiver, "/standard/flaky", 1, "the first attempt")
    state.w.receiver.reply("/standard/flaky", { status: 200 })
    const [first, second] = await arrived(state.w.receiver, "/standard/flaky", 2, "the retry")
    expect(second!.headers["webhook-id"]).toBe(first!.headers["webhook-id"])
    expect(Number(second!.headers["webhook-timestamp"])).toBeGreaterThan(Number(first!.headers["webhook-timestamp"]))
    expect(second!.headers["webhook-signature"]).not.toBe(first!.headers["webhook-signature"])
    verifiedByAll(first!, endpoint.secret)
    verifiedByAll(second!, endpoint.secret)
  })

  it("a test event (ping) verifies too", async () => {
    const endpoint = await addEndpoint(state.w, "/standard/ping", { name: "Ping" })
    const r = await runSql(state.w.deps.sql, testEndpoint(state.w.deps, ADMIN, { id: endpoint.id }))
    expect(r.ok).toBe(true)
    const [req] = at(state.w.receiver, "/standard/ping")
    expect(verifiedByAll(req!, endpoint.secret)).toMatchObject({ id: r.deliveryId, event: "ping" })
  })
})
