// Admin operations on endpoints, deliveries and API-made subscriptions, with the activity
// log, the test ping, the delivery log and retention.
import Stripe from "stripe"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { endpointSecretContext } from "../../../src/platform/db/channels.ts"
import { purgeOld } from "../../../src/webhooks/engine/housekeeping-queries.ts"
import { decryptSecret } from "../../../src/platform/secrets/secrets-key.ts"
import { listActivity } from "../../../src/access/activity.ts"
import { runSql } from "../../support/sql.ts"
import { transaction } from "../../../src/platform/db/Sql.ts"
import { getDelivery, listEndpointDeliveries, replayFailed } from "../../../src/webhooks/deliveries/deliveries.ts"
import {
  createEndpoint,
  deleteEndpoint,
  enableEndpoint,
  getEndpoint,
  listEndpoints,
  updateEndpoint
} from "../../../src/webhooks/endpoints/endpoints.ts"
import { testEndpoint } from "../../../src/webhooks/endpoints/ping.ts"
import {
  deleteSubscription,
  disableSubscription,
  enableSubscription,
  listSubscriptions
} from "../../../src/webhooks/subscriptions/subscriptions.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import {
  addHook,
  ADMIN,
  at,
  deliveredTo,
  deliveries,
  deliveriesTo,
  failure,
  makeKey,
  sleep,
  startEngine,
  useWorld,
  waitFor,
  withEngine
} from "../../support/world.ts"

const w = useWorld()

const create = (
  fields: Partial<{ companyId: string; name: string; url: string; events: ReadonlyArray<string> | string }> = {}
) =>
  runSql(
    w.deps.sql,
    createEndpoint(w.deps, ADMIN, {
      companyId: w.company.id,
      name: "Receiver",
      url: w.receiver.url("/e"),
      events: ["incident.created"],
      ...fields
    })
  )

describe("create", () => {
  it("returns the secret once; lists never show it; it is stored encrypted and bound to the endpoint", async () => {
    const made = await create({ events: "incident.created,corrective_action.closed,incident.created" })
    expect(made.id).toMatch(/^[0-9a-f-]{36}$/)
    expect(made.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(made.endpoint).toMatchObject({
      name: "Receiver",
      events: ["incident.created", "corrective_action.closed"],
      enabled: true,
      createdBy: "admin@example.test"
    })
    expect(JSON.stringify(await runSql(w.deps.sql, listEndpoints({ companyId: w.company.id })))).not.toContain(
      made.secret
    )
    expect(JSON.stringify(await runSql(w.deps.sql, getEndpoint({ id: made.id })))).not.toContain(made.secret)
    const [row] = await w.db.sql<
      { secret: Buffer }[]
    >`select secret from service.webhook_endpoints where id = ${made.id}`
    expect(row!.secret.toString("latin1")).not.toContain(made.secret.slice(6, 20))
    expect(decryptSecret(w.deps.secretsKey, row!.secret, endpointSecretContext(made.id))).toBe(made.secret)
    expect(() => decryptSecret(w.deps.secretsKey, row!.secret, endpointSecretContext("another"))).toThrow()
    const [log] = await w.db.sql<{ actor_email: string; details: { url: string } }[]>`
      select actor_email, details from service.activity where kind = 'endpoint.created' and subject_id = ${made.id}`
    expect(log).toMatchObject({ actor_email: "admin@example.test", details: { url: w.receiver.url("/e") } })
    expect(JSON.stringify(log)).not.toContain(made.secret)
  })

  it.each([
    ["an empty name", { name: " " }, 400, "name is required"],
    ["no events", { events: [] }, 400, /^choose at least one event/],
    ["an unknown event", { events: ["incident.created", "nope"] }, 400, /^unknown event "nope"/],
    ["http://", { url: "http://example.com/x" }, 400, /^url refused: only https/],
    [
      "a private address",
      { url: "https://192.168.0.10/x" },
      400,
      /^url refused: 192\.168\.0\.10 is not a public address/
    ],
    ["a malformed company id", { companyId: "acme" }, 400, "company must be a company id (a UUID)"],
    [
      "an unknown company",
      { companyId: "3f1d1e0e-0000-4000-8000-000000000000" },
      404,
      "no company 3f1d1e0e-0000-4000-8000-000000000000"
    ]
  ])("refuses %s", async (_, fields, status, message) => {
    const e = await failure(create(fields))
    expect(e.status).toBe(status)
    if (typeof message === "string") expect(e.message).toBe(message)
    else expect(e.message).toMatch(message)
  })

  it("refuses companies off the Company tier, and events of modules that are off", async () => {
    const team = await makeCompany(w.db.sql, { tier: "team" })
    const few = await makeCompany(w.db.sql, { modules: ["incidents"] })
    await w.cap.settle()
    const t = await failure(create({ companyId: team.id }))
    expect([t.status, t.message]).toEqual([
      403,
      "webhooks belong to the Company tier; this company is on the team tier"
    ])
    const m = await failure(create({ companyId: few.id, events: ["incident.created", "permit.approved"] }))
    expect([m.status, m.message]).toEqual([403, "the permits module is turned off for this company (permit.approved)"])
  })
})

describe("update and delete", () => {
  it("changes name, url and events, checks the new url, and logs what changed", async () => {
    const e = await create()
    const updated = await runSql(
      w.deps.sql,
      updateEndpoint(w.deps, ADMIN, {
        id: e.id,
        companyId: w.company.id,
        name: "Renamed",
        url: w.receiver.url("/new"),
        events: ["permit.closed"]
      })
    )
    expect(updated).toMatchObject({ name: "Renamed", url: w.receiver.url("/new"), events: ["permit.closed"] })
    expect(
      (await failure(runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, url: "https://169.254.169.254/" }))))
        .status
    ).toBe(400)
    expect((await failure(runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id })))).message).toBe(
      "nothing to change: give a name, url, events, rateLimit, ordering, filter or payload"
    )
    const [log] = await w.db.sql<{ details: Record<string, unknown> }[]>`
      select details from service.activity where kind = 'endpoint.updated' and subject_id = ${e.id}`
    expect(log!.details).toEqual({ name: "Renamed", url: w.receiver.url("/new"), events: ["permit.closed"] })
  })

  it("two changes of different fields at once both stand: an update writes only what it was given", async () => {
    const e = await create({ name: "Before", url: w.receiver.url("/before") })
    // Another change holds the row: it moves the address while this rename waits for it.
    let renamed: Promise<unknown> | undefined
    await w.db.sql.begin(async (tx) => {
      await tx`select 1 from service.webhook_endpoints where id = ${e.id} for update`
      renamed = runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, name: "After" }))
      await sleep(300) // the rename has read the endpoint and now waits for the lock
      await tx`update service.webhook_endpoints set url = ${w.receiver.url("/moved")} where id = ${e.id}`
    })
    await renamed
    const [row] = await w.db.sql<
      { name: string; url: string }[]
    >`select name, url from service.webhook_endpoints where id = ${e.id}`
    expect(row).toEqual({ name: "After", url: w.receiver.url("/moved") })
  })

  it("scopes every id to the admin's company: another company's endpoint is 404", async () => {
    const e = await create()
    const other = await makeCompany(w.db.sql)
    expect((await failure(runSql(w.deps.sql, getEndpoint({ id: e.id, companyId: other.id })))).status).toBe(404)
    expect((await failure(runSql(w.deps.sql, deleteEndpoint(ADMIN, { id: e.id, companyId: other.id })))).status).toBe(
      404
    )
    expect((await failure(runSql(w.deps.sql, getEndpoint({ id: "nope" })))).status).toBe(404)
  })

  it("delete removes the endpoint and its deliveries, and logs it", async () => {
    const e = await create({ url: w.receiver.url("/del") })
    await insertIncident(w.db.sql, w.company.id)
    const engine = await startEngine(w.deps)
    try {
      await waitFor(() => at(w.receiver, "/del").length === 1, "a delivery")
    } finally {
      await engine.stop()
    }
    await runSql(w.deps.sql, deleteEndpoint(ADMIN, { id: e.id, companyId: w.company.id }))
    expect((await failure(runSql(w.deps.sql, getEndpoint({ id: e.id })))).status).toBe(404)
    expect(await deliveriesTo(w.db.sql, e.id)).toEqual([])
    const kinds = (await runSql(w.deps.sql, listActivity({ companyId: w.company.id })))
      .filter((a) => a.subjectId === e.id)
      .map((a) => a.kind)
    expect(kinds).toEqual(["endpoint.deleted", "endpoint.created"]) // newest first
    await w.db.sql`delete from service.webhook_endpoints`
  })

  it("run in a caller's transaction, a change and its activity entry commit or roll back with it", async () => {
    const e = await create({ url: w.receiver.url("/joined") })
    const logged = async () =>
      (await w.db.sql`select 1 from service.activity where kind = 'endpoint.deleted' and subject_id = ${e.id}`).length
    const undone = await runSql(
      w.db.sql,
      Effect.result(
        transaction(Effect.andThen(deleteEndpoint(ADMIN, { id: e.id }), Effect.fail("the caller's next step fails")))
      )
    )
    expect(undone._tag).toBe("Failure")
    expect((await runSql(w.deps.sql, getEndpoint({ id: e.id }))).id).toBe(e.id)
    expect(await logged()).toBe(0)
    await runSql(w.db.sql, transaction(deleteEndpoint(ADMIN, { id: e.id })))
    expect((await failure(runSql(w.deps.sql, getEndpoint({ id: e.id })))).status).toBe(404)
    expect(await logged()).toBe(1)
  })
})

describe("the activity log", () => {
  it("logs changes only: turning off what is off, on what is on, changes nothing and logs nothing", async () => {
    const e = await create({ name: "Twice" })
    const before = (await runSql(w.deps.sql, listActivity({ companyId: w.company.id, limit: 500 }))).length
    const on = await runSql(w.deps.sql, enableEndpoint(ADMIN, { id: e.id }))
    expect(on.enabled).toBe(true)
    const keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"], webhooks: true })
    const { subscription } = await addHook(w, "/twice", { keyId })
    const afterCreate = (await runSql(w.deps.sql, listActivity({ companyId: w.company.id, limit: 500 }))).length
    expect(afterCreate).toBe(before + 1) // the subscription.created, not an endpoint.enabled
    for (let i = 0; i < 2; i++)
      expect((await runSql(w.deps.sql, disableSubscription(ADMIN, { id: subscription.id }))).active).toBe(false)
    for (let i = 0; i < 2; i++)
      expect((await runSql(w.deps.sql, enableSubscription(ADMIN, { id: subscription.id }))).active).toBe(true)
    const kinds = (await runSql(w.deps.sql, listActivity({ companyId: w.company.id, limit: 500 })))
      .slice(0, 3)
      .map((a) => a.kind)
    expect(kinds).toEqual(["subscription.enabled", "subscription.disabled", "subscription.created"])
  })

  it("finds entries of a kind however many newer entries of other kinds there are", async () => {
    const c = await makeCompany(w.db.sql)
    await w.db
      .sql`insert into service.activity (company_id, kind, subject_id, details) values (${c.id}, 'key.created', 'old-key', '{}')`
    await w.db.sql`
      insert into service.activity (company_id, kind, subject_id, details)
      select ${c.id}, case when g % 2 = 0 then 'subscription.disabled' else 'subscription.enabled' end, 's', '{}'
      from generate_series(1, 600) g`
    expect(
      (await runSql(w.deps.sql, listActivity({ companyId: c.id, kind: "key.created" }))).map((e) => e.subjectId)
    ).toEqual(["old-key"])
    expect((await runSql(w.deps.sql, listActivity({ companyId: c.id, kind: "key" }))).map((e) => e.subjectId)).toEqual([
      "old-key"
    ])
    expect(await runSql(w.deps.sql, listActivity({ companyId: c.id, kind: "subscription", limit: 500 }))).toHaveLength(
      500
    )
    expect(
      await runSql(w.deps.sql, listActivity({ companyId: c.id, kind: "subscription.disabled", limit: 500 }))
    ).toHaveLength(300)
    // A family is a whole word: "sub" is no family.
    expect(await runSql(w.deps.sql, listActivity({ companyId: c.id, kind: "sub" }))).toHaveLength(0)
  })
})

describe("send test event", () => {
  it("pings now, signed with the endpoint's secret, and shows the receiver's status, time and answer", async () => {
    w.receiver.reply("/ping", { status: 200, body: `pong ${"x".repeat(2_000)}` })
    const e = await create({ url: w.receiver.url("/ping") })
    const r = await runSql(w.deps.sql, testEndpoint(w.deps, ADMIN, { id: e.id, companyId: w.company.id }))
    expect(r).toMatchObject({ ok: true, status: 200, error: null })
    expect(r.response.startsWith("pong xxx")).toBe(true)
    expect(r.response.length).toBe(500)
    expect(r.durationMs).toBeGreaterThanOrEqual(0)
    const [req] = at(w.receiver, "/ping")
    expect(req!.headers["service-event"]).toBe("ping")
    const body = Stripe.webhooks.constructEvent(
      req!.body,
      String(req!.headers["service-signature"]),
      e.secret
    ) as unknown as { id: string; event: string; data: { endpointId: string } }
    expect([body.id, body.event, body.data.endpointId]).toEqual([r.deliveryId, "ping", e.id])

    w.receiver.reply("/ping", { status: 500, body: "down" })
    const bad = await runSql(w.deps.sql, testEndpoint(w.deps, ADMIN, { id: e.id }))
    expect(bad).toMatchObject({ ok: false, status: 500, error: "http 500", response: "down" })
    const logs = await w.db.sql<{ details: { ok: boolean; status: number } }[]>`
      select details from service.activity where kind = 'endpoint.tested' and subject_id = ${e.id} order by id`
    expect(logs.map((l) => [l.details.ok, l.details.status])).toEqual([
      [true, 200],
      [false, 500]
    ])
    await w.db.sql`delete from service.webhook_endpoints`
  })
})

describe("the delivery log", () => {
  it("lists an endpoint's last 25 deliveries, newest first, with status or error; replay sends failures again", async () => {
    w.receiver.reply("/log", { status: 200 })
    const e = await create({ url: w.receiver.url("/log") })
    const engine = await startEngine(w.deps, { retrySchedule: "" }) // one attempt each
    const mine = async (state: string) =>
      (await deliveries(w.db.sql)).filter((d) => d.endpoint_id === e.id && d.state === state)
    try {
      for (let i = 0; i < 20; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(async () => (await mine("succeeded")).length === 20, "20 successes")
      w.receiver.reply("/log", { status: 500 })
      for (let i = 0; i < 7; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(async () => (await mine("failed")).length === 7, "7 failures")
      const log = await runSql(
        w.deps.sql,
        listEndpointDeliveries({ endpointId: e.id, companyId: w.company.id, limit: 100 })
      )
      expect(log).toHaveLength(25)
      expect(
        log
          .slice(0, 7)
          .every((d) => d.state === "failed" && d.lastStatus === 500 && d.lastError === "http 500" && d.attempts === 1)
      ).toBe(true)
      expect(log.slice(7).every((d) => d.state === "succeeded" && d.lastStatus === 200 && d.lastError === null)).toBe(
        true
      )
      const times = log.map((d) => d.createdAt)
      expect([...times].sort().reverse()).toEqual(times)
      const one = await runSql(w.deps.sql, getDelivery({ id: log[0]!.id }))
      expect(one.attemptLog).toMatchObject([{ number: 1, status: 500, error: "http 500", errorKind: "http" }])
      expect(one.event).toBe("incident.created")

      w.receiver.reply("/log", { status: 200 })
      const { count } = await runSql(
        w.deps.sql,
        replayFailed(ADMIN, { endpointId: e.id, since: new Date(Date.now() - 60_000) })
      )
      expect(count).toBe(7)
      await waitFor(async () => (await mine("succeeded")).length === 27, "the replay")
      const failedIds = log.slice(0, 7).map((d) => d.id)
      const sent = at(w.receiver, "/log").map((r) => String(r.headers["service-delivery"]))
      expect(sent).toHaveLength(34)
      for (const id of failedIds) expect(sent.filter((s) => s === id)).toHaveLength(2) // the same id again
    } finally {
      await engine.stop()
      await w.db.sql`delete from service.webhook_endpoints`
    }
  })
})

describe("subscriptions on the webhooks page", () => {
  it("lists keys' subscriptions, turns one off, deletes one, and logs each change", async () => {
    const keyId = await makeKey(w.db.sql, w.company.id)
    const a = (await addHook(w, "/sa", { keyId })).subscription
    const b = (await addHook(w, "/sb", { keyId })).subscription
    const list = await runSql(w.deps.sql, listSubscriptions({ companyId: w.company.id, keyId }))
    expect(list.map((s) => [s.id, s.keyName, s.active])).toEqual([
      [b.id, "integration", true],
      [a.id, "integration", true]
    ])
    const off = await runSql(w.deps.sql, disableSubscription(ADMIN, { id: a.id, companyId: w.company.id }))
    expect(off.active).toBe(false)
    await runSql(w.deps.sql, deleteSubscription(ADMIN, { id: b.id }))
    expect((await runSql(w.deps.sql, listSubscriptions({ companyId: w.company.id, keyId }))).map((s) => s.id)).toEqual([
      a.id
    ])
    const logs = await w.db.sql<{ kind: string; subject_id: string; actor_email: string | null }[]>`
      select kind, subject_id, actor_email from service.activity where subject_id in (${a.id}, ${b.id}) order by id`
    expect(logs.map((l) => [l.kind, l.subject_id, l.actor_email])).toEqual([
      ["subscription.created", a.id, null],
      ["subscription.created", b.id, null],
      ["subscription.disabled", a.id, "admin@example.test"],
      ["subscription.deleted", b.id, "admin@example.test"]
    ])
  })
})

describe("retention", () => {
  /** An endpoint at `path` with three deliveries made to it, by an engine run for them. */
  const threeDelivered = async (path: string) => {
    const e = await create({ url: w.receiver.url(path) })
    await withEngine(w.deps, {}, async () => {
      for (let i = 0; i < 3; i++) await insertIncident(w.db.sql, w.company.id)
      await deliveredTo(w.db.sql, e.id, 3, "3 deliveries")
    })
    return e
  }

  it("purges deliveries and attempts older than 30 days, and the engine runs it by itself", async () => {
    const e = await threeDelivered("/old")
    const ids = (await deliveriesTo(w.db.sql, e.id)).map((d) => d.id)
    await w.db.sql`update service.webhook_deliveries set created_at = now() - interval '31 days' where id = ${ids[0]!}`
    // An attempt made 31 days ago, before the one the row holds (a delivery's latest attempt lives in its row).
    await w.db.sql`update service.webhook_deliveries set attempts = 2 where id = ${ids[1]!}`
    await w.db
      .sql`insert into service.webhook_earlier_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind)
      values (${ids[1]!}, 1, now() - interval '31 days', 5, 500, 'http 500', 'http')`
    const r = await purgeOld(w.db.sql, new Date(Date.now() - 30 * 86_400_000))
    expect(r).toEqual({ deliveries: 1, attempts: 1, events: 0 })
    const left = await w.db.sql<
      { id: string; n: number }[]
    >`select d.id::text, (select count(*)::int from service.webhook_attempts a where a.delivery_id = d.id) as n
      from service.webhook_deliveries d where d.endpoint_id = ${e.id} order by d.id`
    expect(left.map((l) => l.id).sort()).toEqual([ids[1]!, ids[2]!].sort())
    expect(left.find((l) => l.id === ids[2])!.n).toBe(1)

    await w.db.sql`update service.webhook_deliveries set created_at = now() - interval '40 days' where id = ${ids[2]!}`
    const purging = await startEngine(w.deps, { purgeEveryMs: 100 })
    try {
      await waitFor(
        async () => (await w.db.sql`select 1 from service.webhook_deliveries where id = ${ids[2]!}`).length === 0,
        "the engine's purge"
      )
    } finally {
      await purging.stop()
    }
  })

  it("purges outbox events older than 30 days once fan-out has passed them, keeping those a newer delivery points at", async () => {
    const e = await threeDelivered("/old-events")
    const rows = await w.db.sql<{ id: string; event_id: string }[]>`
      select id::text, event_id::text from service.webhook_deliveries where endpoint_id = ${e.id} order by created_at`
    const [old, replayed, recent] = rows.map((r) => r.event_id)
    // Two events 31 days old: one's delivery is old too, the other was replayed yesterday.
    await w.db
      .sql`update service.events set created_at = now() - interval '31 days' where id = any(${[old!, replayed!]}::uuid[])`
    await w.db
      .sql`update service.webhook_deliveries set created_at = now() - interval '31 days' where event_id = ${old!}`
    // An old event fan-out has not reached yet stays, whatever its age.
    const [ahead] = await w.db.sql<{ id: string }[]>`
      insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
      values (gen_random_uuid(), ${w.company.id}, 'incident.created', 'incidents', gen_random_uuid(), 'FFFFFFFF/FFFFFFFF', 0, '{}', now() - interval '40 days')
      returning id::text`
    try {
      const r = await purgeOld(w.db.sql, new Date(Date.now() - 30 * 86_400_000))
      expect(r.events).toBe(1)
      const left = new Set((await w.db.sql<{ id: string }[]>`select id::text from service.events`).map((x) => x.id))
      expect(left.has(old!)).toBe(false)
      expect(left.has(replayed!)).toBe(true)
      expect(left.has(recent!)).toBe(true)
      expect(left.has(ahead!.id)).toBe(true)
    } finally {
      await w.db.sql`delete from service.events where id = ${ahead!.id}`
    }
  })
})
