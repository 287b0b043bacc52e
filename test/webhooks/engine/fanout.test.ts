// Who gets an event (docs/events.md#destinations): endpoints that chose it and are on;
// subscriptions whose key is active and can still read the record, whose module is on and
// whose company's API is on; nothing at all for a company that is not on the Company tier.
import { beforeAll, beforeEach, describe, expect, it } from "vitest"
import { disableSubscription, enableSubscription } from "../../../src/webhooks/subscriptions/subscriptions.ts"
import { insertIncident } from "../../support/app.ts"
import {
  addEndpoint,
  addHook,
  ADMIN,
  at,
  deliveries,
  fanoutNow,
  makeKey,
  startEngine,
  useWorld,
  waitFor
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const w = useWorld()
let endpointId: string
let keyId: string
let subscriptionId: string
beforeAll(async () => {
  endpointId = (await addEndpoint(w, "/ep", { name: "ep" })).id
})
beforeEach(async () => {
  // A fresh key and subscription per test; app state back to normal.
  await w.db.sql`update app.companies set tier = 'company', api_enabled = true where id = ${w.company.id}`
  await w.db.sql`update app.company_modules set enabled = true where company_id = ${w.company.id}`
  await w.cap.settle()
  keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"] })
  subscriptionId = (await addHook(w, "/sub", { keyId })).subscription.id
})

/** Commits an incident, lets capture write its event, fans it out, and returns who got it. */
const deliver = async (): Promise<{ endpoint: boolean; subscription: boolean }> => {
  const incident = await insertIncident(w.db.sql, w.company.id)
  await w.cap.settle()
  await fanoutNow(w.db.sql)
  const rows = await w.db.sql<{ endpoint_id: string | null; subscription_id: string | null }[]>`
    select d.endpoint_id::text, d.subscription_id::text from service.webhook_deliveries d
    join service.events e on e.id = d.event_id where e.record_id = ${incident}`
  return {
    endpoint: rows.some((r) => r.endpoint_id === endpointId),
    subscription: rows.some((r) => r.subscription_id === subscriptionId)
  }
}

describe("fan-out", () => {
  it("an event goes to the endpoint and to the active subscription, once each", async () => {
    expect(await deliver()).toEqual({ endpoint: true, subscription: true })
    // Fanning out again changes nothing: the cursor moved, and (event, destination) is unique.
    await w.db.sql`update service.webhook_fanout_parts set commit_lsn = '0/0', seq = 0`
    await fanoutNow(w.db.sql)
    const [dupes] = await w.db.sql<
      { n: number }[]
    >`select count(*)::int as n from (select event_id from service.webhook_deliveries
      group by event_id, endpoint_id, subscription_id having count(*) > 1) x`
    expect(dupes!.n).toBe(0)
  })

  it("nothing for a company that is not on the Company tier", async () => {
    await w.db.sql`update app.companies set tier = 'team' where id = ${w.company.id}`
    await w.cap.settle()
    expect(await deliver()).toEqual({ endpoint: false, subscription: false })
  })

  it("nothing when the record's module was turned off before fan-out", async () => {
    const incident = await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    await w.db
      .sql`update app.company_modules set enabled = false where company_id = ${w.company.id} and module = 'incidents'`
    await w.cap.settle()
    await fanoutNow(w.db.sql)
    const rows = await w.db
      .sql`select 1 from service.webhook_deliveries d join service.events e on e.id = d.event_id where e.record_id = ${incident}`
    expect(rows).toHaveLength(0)
  })

  it("subscriptions rest while the company's API is off; endpoints still get events", async () => {
    await w.db.sql`update app.companies set api_enabled = false where id = ${w.company.id}`
    await w.cap.settle()
    expect(await deliver()).toEqual({ endpoint: true, subscription: false })
  })

  it("revoking the key deletes its subscriptions and logs it", async () => {
    await w.db
      .sql`update service.api_keys set revoked_at = now(), revoked_by_email = 'boss@example.test' where id = ${keyId}`
    expect(await w.db.sql`select 1 from service.webhook_subscriptions where key_id = ${keyId}`).toHaveLength(0)
    const [log] = await w.db.sql<{ actor_email: string; details: { reason: string } }[]>`
      select actor_email, details from service.activity where kind = 'subscription.deleted' and subject_id = ${subscriptionId}`
    expect(log).toEqual({
      actor_email: "boss@example.test",
      details: expect.objectContaining({ reason: "key revoked", keyId })
    })
    expect((await deliver()).endpoint).toBe(true)
  })

  it("an expired key's subscriptions stop receiving", async () => {
    await w.db.sql`update service.api_keys set expires_at = now() - interval '1 second' where id = ${keyId}`
    expect(await deliver()).toEqual({ endpoint: true, subscription: false })
  })

  it("a key that can no longer read the record type stops receiving those events", async () => {
    await w.db.sql`update service.api_keys set scopes = '{corrective-actions}' where id = ${keyId}`
    expect(await deliver()).toEqual({ endpoint: true, subscription: false })
  })

  it("a subscription an admin turned off gets nothing until turned on", async () => {
    await runSql(w.deps.sql, disableSubscription(ADMIN, { id: subscriptionId, companyId: w.company.id }))
    expect(await deliver()).toEqual({ endpoint: true, subscription: false })
    await runSql(w.deps.sql, enableSubscription(ADMIN, { id: subscriptionId }))
    expect(await deliver()).toEqual({ endpoint: true, subscription: true })
  })

  it("a switched-off endpoint gets nothing", async () => {
    await w.db.sql`update service.webhook_endpoints set enabled = false where id = ${endpointId}`
    try {
      expect(await deliver()).toEqual({ endpoint: false, subscription: true })
    } finally {
      await w.db.sql`update service.webhook_endpoints set enabled = true where id = ${endpointId}`
    }
  })

  it("an endpoint made after an event does not get that event", async () => {
    const incident = await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    const late = await addEndpoint(w, "/late", { name: "late" })
    await fanoutNow(w.db.sql)
    const rows = await w.db.sql`select 1 from service.webhook_deliveries d join service.events e on e.id = d.event_id
      where e.record_id = ${incident} and d.endpoint_id = ${late.id}`
    expect(rows).toHaveLength(0)
    await w.db.sql`delete from service.webhook_endpoints where id = ${late.id}`
  })
})

describe("deliveries whose destination turns off before they are sent", () => {
  it("rest as held with the reason, and go out once the destination is back", async () => {
    await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    await fanoutNow(w.db.sql)
    const [pending] = (await deliveries(w.db.sql)).filter((d) => d.subscription_id === subscriptionId)
    await w.db.sql`update app.companies set api_enabled = false where id = ${w.company.id}`
    await w.cap.settle()
    const before = at(w.receiver, "/sub").length
    const engine = await startEngine(w.deps, { pollMs: 200 })
    try {
      const held = await waitFor(
        async () => (await deliveries(w.db.sql)).find((d) => d.id === pending!.id && d.state === "held"),
        "held"
      )
      expect(held.held_reason).toBe("the API is turned off for the company")
      await w.db.sql`update app.companies set api_enabled = true where id = ${w.company.id}`
      await w.cap.settle()
      await waitFor(
        async () => (await deliveries(w.db.sql)).find((d) => d.id === pending!.id && d.state === "succeeded"),
        "released and sent"
      )
      expect(
        at(w.receiver, "/sub")
          .slice(before)
          .map((r) => r.headers["service-delivery"])
      ).toContain(pending!.id)
    } finally {
      await engine.stop()
    }
  })
})
