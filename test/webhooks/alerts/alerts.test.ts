// Failure alerts (docs/events.md#failure-alerts, #alerts-by-e-mail) end to end: a real engine,
// a real HTTPS receiver, a real SMTP server on loopback. An endpoint that fails until it is
// switched off tells a second endpoint once per change of state, signed like every delivery,
// and the company's admins get one mail for each; a key's alert names only its own subscriptions.
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { verify } from "../../../src/webhooks/net/signature.ts"
import { enableEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { disableSubscription } from "../../../src/webhooks/subscriptions/subscriptions.ts"
import { makeMailer, smtpSender } from "../../../src/webhooks/alerts/mail.ts"
import { Sql as SqlService } from "../../../src/platform/db/Sql.ts"
import { insertIncident } from "../../support/app.ts"
import { runSql } from "../../support/sql.ts"
import { startSmtpServer, type SmtpServer } from "../../support/smtp.ts"
import { ADMIN, addEndpoint, addHook, at, makeKey, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"

const ADMIN_EMAIL = "safety.admin@example.test"

type Body = { id: string; event: string; data: { destination: { kind: string; id: string }; [k: string]: unknown } }
const bodies = (requests: ReadonlyArray<{ body: Buffer }>) => requests.map((r) => JSON.parse(r.body.toString()) as Body)

describe("failure alerts", () => {
  const state = useEngineWorld()
  let smtp: SmtpServer
  const mailerScope = Effect.runSync(Scope.make())

  beforeAll(async () => {
    const { w } = state
    smtp = await startSmtpServer()
    await w.db.sql`insert into app.users (company_id, name, email, role) values (${w.company.id}, 'Sam Admin', ${ADMIN_EMAIL}, 'admin')`
    await w.cap.settle()
    await Effect.runPromise(
      Scope.provide(mailerScope)(
        makeMailer({ send: smtpSender(smtp.url), from: "alerts@service.test", pollMs: 200, retryMs: 200 }).pipe(
          Effect.provide(SqlService.fromPool(w.deps.sql))
        )
      )
    )
  })
  afterAll(async () => {
    await Effect.runPromise(Scope.close(mailerScope, Exit.void))
    await smtp.close()
  })

  it("an endpoint failing until switched off: another endpoint hears failing once, switched_off once, recovered once after Turn On and a success; the admins get a mail for each", async () => {
    const { w } = state
    w.receiver.reply("/alerts/down", { status: 503 })
    const down = await addEndpoint(w, "/alerts/down")
    const watcher = await addEndpoint(w, "/alerts/watch", {
      events: ["webhook.failing", "webhook.recovered", "webhook.switched_off"]
    })
    state.engine = await startEngine(w.deps, { alertMail: true })
    for (let i = 0; i < 15; i++) await insertIncident(w.db.sql, w.company.id)
    await waitFor(async () => {
      const [e] = await w.db.sql<{ enabled: boolean }[]>`select enabled from service.webhook_endpoints where id = ${down.id}`
      return e?.enabled === false
    }, "the endpoint switched off")
    const heard = await waitFor(() => {
      const got = bodies(at(w.receiver, "/alerts/watch"))
      return got.some((b) => b.event === "webhook.switched_off") ? got : null
    }, "the switch-off alert")
    expect(heard.map((b) => b.event)).toEqual(["webhook.failing", "webhook.switched_off"])
    for (const b of heard) expect(b.data.destination).toMatchObject({ kind: "endpoint", id: down.id })
    const off = heard[1]!.data
    expect(off).toMatchObject({ failedDeliveries: 15, lastError: "http 503", switchedOffBy: "service" })
    expect(typeof off.switchedOffAt).toBe("string")
    // Signed with the watcher's own secret, like every delivery.
    const req = at(w.receiver, "/alerts/watch")[0]!
    expect(verify(String(req.headers["service-signature"]), req.body, watcher.secret).ok).toBe(true)
    expect(at(w.receiver, "/alerts/down").every((r) => !JSON.parse(r.body.toString()).event.startsWith("webhook."))).toBe(true)

    // Fixed and turned on: the next success is its recovery, told once.
    w.receiver.reply("/alerts/down", { status: 200 })
    await runSql(w.deps.sql, enableEndpoint(ADMIN, { id: down.id }))
    await insertIncident(w.db.sql, w.company.id)
    await insertIncident(w.db.sql, w.company.id)
    await waitFor(() => bodies(at(w.receiver, "/alerts/watch")).some((b) => b.event === "webhook.recovered"), "recovered")
    await new Promise((r) => setTimeout(r, 500))
    expect(bodies(at(w.receiver, "/alerts/watch")).map((b) => b.event)).toEqual([
      "webhook.failing",
      "webhook.switched_off",
      "webhook.recovered"
    ])

    // One mail per change, to the company's admins.
    const mails = await waitFor(() => (smtp.mails.length >= 3 ? smtp.mails : null), "three mails")
    expect(mails.map((m) => m.subject)).toEqual([
      '[Safety Records] The webhook endpoint "/alerts/down" is failing',
      '[Safety Records] The webhook endpoint "/alerts/down" is switched off',
      '[Safety Records] The webhook endpoint "/alerts/down" has recovered'
    ])
    for (const m of mails) expect(m.to).toEqual([ADMIN_EMAIL])
  })

  it("a key's subscription alert names only that key's own subscriptions, and an admin turning one off is a switch-off by that admin", async () => {
    const { w } = state
    w.receiver.reply("/k1/in", { status: 500 })
    const k1 = await makeKey(w.db.sql, w.company.id)
    const k2 = await makeKey(w.db.sql, w.company.id)
    const failing = await addHook(w, "/k1/in", { keyId: k1 })
    const mine = await addHook(w, "/k1/alerts", { keyId: k1, event: "webhook.failing" })
    await addHook(w, "/k2/alerts", { keyId: k2, event: "webhook.failing" })
    const offAlerts = await addHook(w, "/k1/off", { keyId: k1, event: "webhook.switched_off" })
    state.engine = await startEngine(w.deps, { alertMail: true })
    await insertIncident(w.db.sql, w.company.id)
    const got = await waitFor(() => {
      const b = bodies(at(w.receiver, "/k1/alerts"))
      return b.length > 0 ? b : null
    }, "the key's alert")
    expect(got.map((b) => [b.event, b.data.destination.kind, b.data.destination.id])).toEqual([
      ["webhook.failing", "subscription", failing.subscription.id]
    ])
    expect(got[0]!.data.destination).toMatchObject({ url: w.receiver.url("/k1/in"), events: ["incident.created"] })
    expect(mine.subscription.id).not.toBe(failing.subscription.id)
    await new Promise((r) => setTimeout(r, 500))
    expect(at(w.receiver, "/k2/alerts")).toHaveLength(0)

    await runSql(w.deps.sql, disableSubscription(ADMIN, { id: failing.subscription.id }))
    const off = await waitFor(() => {
      const b = bodies(at(w.receiver, "/k1/off"))
      return b.length > 0 ? b : null
    }, "the switch-off")
    expect(off[0]!.data).toMatchObject({ switchedOffBy: ADMIN.email, destination: { id: failing.subscription.id } })
    expect(offAlerts.subscription.id).toBeDefined()
  })
})
