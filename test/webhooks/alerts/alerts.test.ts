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
import { ALERT_KINDS } from "../../../src/domain/event-kinds.ts"
import { raiseAlerts } from "../../../src/webhooks/alerts/raise.ts"
import { makeCompany } from "../../support/app.ts"
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
    await w.db
      .sql`insert into app.users (company_id, name, email, role) values (${w.company.id}, 'Sam Admin', ${ADMIN_EMAIL}, 'admin')`
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
    // It takes the alerts too: it is never told about itself.
    const down = await addEndpoint(w, "/alerts/down", { events: ["incident.created", ...ALERT_KINDS] })
    const watcher = await addEndpoint(w, "/alerts/watch", {
      events: ["webhook.failing", "webhook.recovered", "webhook.switched_off"]
    })
    state.engine = await startEngine(w.deps, { alertMail: true })
    for (let i = 0; i < 15; i++) await insertIncident(w.db.sql, w.company.id)
    await waitFor(async () => {
      const [e] = await w.db.sql<
        { enabled: boolean }[]
      >`select enabled from service.webhook_endpoints where id = ${down.id}`
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
    expect(
      at(w.receiver, "/alerts/down").every((r) => !JSON.parse(r.body.toString()).event.startsWith("webhook."))
    ).toBe(true)

    // Fixed and turned on: the next success is its recovery, told once.
    w.receiver.reply("/alerts/down", { status: 200 })
    await runSql(w.deps.sql, enableEndpoint(ADMIN, { id: down.id }))
    await insertIncident(w.db.sql, w.company.id)
    await insertIncident(w.db.sql, w.company.id)
    await waitFor(
      () => bodies(at(w.receiver, "/alerts/watch")).some((b) => b.event === "webhook.recovered"),
      "recovered"
    )
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
    // The admin who made the key is mailed about its subscriptions (not the company's admins).
    await w.db.sql`update service.api_keys set created_by_email = 'maker@example.test' where id = ${k1}`
    const mailsBefore = smtp.mails.length
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
    const mail = await waitFor(
      () => smtp.mails.slice(mailsBefore).find((m) => m.subject.includes("is failing")),
      "the mail"
    )
    expect(mail.to).toEqual(["maker@example.test"])
    expect(mail.subject).toBe(`[Safety Records] The webhook subscription to ${w.receiver.url("/k1/in")} is failing`)
    expect(smtp.mails.slice(mailsBefore).filter((m) => m.to.includes(ADMIN_EMAIL))).toHaveLength(0)

    await runSql(w.deps.sql, disableSubscription(ADMIN, { id: failing.subscription.id }))
    const off = await waitFor(() => {
      const b = bodies(at(w.receiver, "/k1/off"))
      return b.length > 0 ? b : null
    }, "the switch-off")
    expect(off[0]!.data).toMatchObject({
      switchedOffBy: "admin@example.test",
      destination: { id: failing.subscription.id }
    })
    expect(offAlerts.subscription.id).toBeDefined()
  })

  it("an alert's own delivery that fails makes no further alert, and opens no alert by its circuit", async () => {
    const { w } = state
    w.receiver.reply("/a2/down", { status: 500 })
    w.receiver.reply("/a2/deaf", { status: 500 })
    const down = await addEndpoint(w, "/a2/down")
    // Takes the alerts and fails every one of them.
    const deaf = await addEndpoint(w, "/a2/deaf", { events: [...ALERT_KINDS] })
    await addEndpoint(w, "/a2/watch", { events: [...ALERT_KINDS] })
    state.engine = await startEngine(w.deps)
    await insertIncident(w.db.sql, w.company.id)
    await waitFor(
      () => bodies(at(w.receiver, "/a2/watch")).some((b) => b.event === "webhook.failing"),
      "the failing of the first endpoint"
    )
    // The deaf endpoint's alert delivery fails every attempt (5 retries 100 ms apart).
    await waitFor(async () => {
      const [d] = await w.db.sql<{ state: string }[]>`
        select state from service.webhook_deliveries where endpoint_id = ${deaf.id} and event = 'webhook.failing'`
      return d?.state === "failed"
    }, "the alert's delivery to fail for good")
    await new Promise((r) => setTimeout(r, 700))
    const heard = bodies(at(w.receiver, "/a2/watch"))
    expect(heard.map((b) => [b.event, b.data.destination.id])).toEqual([["webhook.failing", down.id]])
    const [n] = await w.db.sql<{ n: number; failing: boolean }[]>`
      select (select count(*)::int from service.webhook_alerts where endpoint_id = ${deaf.id}) as n,
        (select failing_since is not null from service.webhook_endpoints where id = ${deaf.id}) as failing`
    expect(n).toEqual({ n: 0, failing: false })
  })

  it("at most 20 mails a company an hour: the rest go later as one summary", async () => {
    const { w } = state
    const company = await makeCompany(w.db.sql)
    await w.db
      .sql`insert into app.users (company_id, name, email, role) values (${company.id}, 'Ann Admin', 'ann@example.test', 'admin')`
    await w.cap.settle()
    const before = smtp.mails.length
    const ids: Array<string> = []
    for (let i = 0; i < 25; i++)
      ids.push(
        (await addEndpoint({ ...w, company }, `/limit/${i}`, { name: `Endpoint ${String(i).padStart(2, "0")}` })).id
      )
    // All 25 in one transaction, their ids crossing to one more digit (91–115, or 991–1015): the
    // sender's one pass sees them all, and must take them by the ids' numbers, not as text.
    // Ten below the next power of ten past what earlier tests used (91 from 0, 991 from 500).
    await w.db.sql`
      select setval(pg_get_serial_sequence('service.alert_mails', 'id'),
        power(10, ceil(log(greatest((select coalesce(max(id), 0) from service.alert_mails) + 11, 100))))::bigint - 10)`
    await w.db.sql.begin((tx) =>
      raiseAlerts(
        tx,
        ids.map((id) => ({
          kind: "webhook.switched_off" as const,
          endpointId: id,
          subscriptionId: null,
          lastError: null,
          lastAttemptAt: null,
          by: ADMIN_EMAIL
        })),
        { mail: true }
      )
    )
    const first = await waitFor(() => {
      const got = smtp.mails.slice(before).filter((m) => m.to.includes("ann@example.test"))
      return got.length >= 20 ? got : null
    }, "20 mails")
    await new Promise((r) => setTimeout(r, 800))
    expect(smtp.mails.slice(before).filter((m) => m.to.includes("ann@example.test"))).toHaveLength(20)
    // The first 20 by the order they were raised (the server may log arrivals out of order).
    expect(first.map((m) => m.subject).sort()).toEqual(
      Array.from(
        { length: 20 },
        (_, i) => `[Safety Records] The webhook endpoint "Endpoint ${String(i).padStart(2, "0")}" is switched off`
      )
    )
    const [held] = await w.db.sql<{ n: number }[]>`
      select count(*)::int as n from service.alert_mails where company_id = ${company.id} and state = 'pending' and held_back`
    expect(held!.n).toBe(5)
    // An hour later (moved back, not waited for): one summary of the five.
    await w.db
      .sql`update service.alert_mails set sent_at = sent_at - interval '61 minutes' where company_id = ${company.id} and state = 'sent'`
    await w.db
      .sql`update service.alert_mails set next_attempt_at = now() where company_id = ${company.id} and state = 'pending'`
    await w.db.sql`select pg_notify('service_alert_mails', '')`
    const summary = await waitFor(
      () => smtp.mails.slice(before).filter((m) => m.to.includes("ann@example.test"))[20],
      "the summary"
    )
    expect(summary.subject).toBe("[Safety Records] 5 more webhook alerts")
    for (let i = 20; i < 25; i++) expect(summary.text).toContain(`"Endpoint ${i}" is switched off`)
    // Marked summarized once the summary is sent: none left to send.
    await waitFor(async () => {
      const [left] = await w.db.sql<{ n: number }[]>`
        select count(*)::int as n from service.alert_mails where company_id = ${company.id} and state = 'pending'`
      return left!.n === 0
    }, "the held-back mails marked as summed up")
  })

  it("a mail server that is down delays no delivery and loses no alert: the mail goes once it is back", async () => {
    const { w } = state
    const port = smtp.port
    await smtp.close()
    w.receiver.reply("/m/down", { status: 500 })
    const down = await addEndpoint(w, "/m/down")
    await addEndpoint(w, "/m/watch", { events: [...ALERT_KINDS] })
    state.engine = await startEngine(w.deps, { alertMail: true })
    await insertIncident(w.db.sql, w.company.id)
    // The alert is delivered while no mail can go.
    await waitFor(() => bodies(at(w.receiver, "/m/watch")).some((b) => b.event === "webhook.failing"), "the alert")
    const failed = await waitFor(async () => {
      const [m] = await w.db.sql<{ attempts: number; last_error: string | null; state: string }[]>`
        select m.attempts, m.last_error, m.state from service.alert_mails m join service.webhook_alerts a on a.event_id = m.event_id
        where a.endpoint_id = ${down.id}`
      return m !== undefined && m.attempts >= 1 ? m : null
    }, "a failed send")
    expect(failed.state).toBe("pending")
    expect(failed.last_error).toMatch(/ECONNREFUSED|connect/i)
    smtp = await startSmtpServer(port)
    const mail = await waitFor(
      () => smtp.mails.find((m) => m.subject.includes('"/m/down" is failing')),
      "the mail once the server is back",
      15_000
    )
    expect(mail.to).toEqual([ADMIN_EMAIL])
    expect(mail.text).toContain("Last error: http 500")
  })
})
