// Deleted means gone: when a record is deleted, the copies of it its stored events carry keep
// only its identifiers, so a retry, Send Again, a replay and the events feed never send its data
// again; the deletions feed still lists it, and no event is added or lost.
import { beforeAll, describe, expect, it } from "vitest"
import { resendDelivery } from "../../src/webhooks/deliveries/deliveries.ts"
import { createEndpoint } from "../../src/webhooks/endpoints/endpoints.ts"
import { replay } from "../../src/webhooks/replay/select.ts"
import { insertIncident } from "../support/app.ts"
import { outbox, startCapture } from "../support/capture.ts"
import { checkedClient, makeKey, openApiChecker, request, type CheckedClient } from "../support/http.ts"
import { runSql } from "../support/sql.ts"
import { createCompany, NEVER_MARK, type TestCompany } from "../support/views.ts"
import { ADMIN, at, deliveries, useServiceWorld, waitFor } from "../support/world.ts"
import { eventPayload } from "../../src/pipeline/outbox/events.ts"

/** What an incident keeps of itself once deleted. */
const KEPT = ["id", "companyId", "reference"]

/** Every field of a deleted incident's copy but its identifiers is null, its key in place. */
const onlyIdentifiers = (data: Record<string, unknown>, id: string) => {
  expect(data.id).toBe(id)
  expect(Object.keys(data)).toContain("title")
  for (const [field, value] of Object.entries(data)) if (!KEPT.includes(field)) expect(value, field).toBeNull()
}

describe("a deleted record's events keep only its identifiers", () => {
  let company: TestCompany
  const world = useServiceWorld({
    seed: async (sql) => {
      company = await createCompany(sql, { name: "Deleted Means Gone", mirrored: false })
    },
    // Retries 2 s apart: the record is deleted while its delivery waits for one.
    engine: { retrySchedule: "2s,2s,2s,2s,2s" }
  })
  const { db, receiver, deps, server } = world
  let api: CheckedClient
  let key: string

  beforeAll(async () => {
    const checker = await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json)
    api = checkedClient(server.url, checker, NEVER_MARK)
    key = (await makeKey(db, company)).key
  })

  it("a retry, Send Again, a replay and the events feed carry no field of it beyond its identifiers; the deletions feed lists it", {
    timeout: 90_000
  }, async () => {
    receiver.reply("/gone", { status: 500 })
    const endpoint = await runSql(
      deps.sql,
      createEndpoint(deps, ADMIN, {
        companyId: company.id,
        name: "gone",
        url: receiver.url("/gone"),
        events: ["incident.created"]
      })
    )
    const id = await insertIncident(db.sql, company.id, {
      title: "Crushed finger at the press",
      description: "Left hand caught between the dies",
      person_name: "Rosa Timmer",
      location: "Hall 3"
    })
    const kept = await insertIncident(db.sql, company.id, { title: "Not deleted" })
    // The first attempt fails: the delivery waits for its retry.
    await waitFor(() => at(receiver, "/gone").length === 2, "the first attempts")
    const first = at(receiver, "/gone").map(
      (r) => JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> }
    )
    expect(first.find((b) => b.data.id === id)!.data).toMatchObject({ personName: "Rosa Timmer" })

    await db.sql`delete from app.incidents where id = ${id}`
    await world.cap.settle()
    receiver.reply("/gone", { status: 200 })

    // The retry: its identifiers only.
    const bodies = () =>
      at(receiver, "/gone")
        .slice(2)
        .map((r) => JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> })
    await waitFor(() => bodies().some((b) => b.data.id === id), "the retry", 60_000)
    const retried = bodies().find((b) => b.data.id === id)!
    onlyIdentifiers(retried.data, id)
    expect(retried.data.companyId).toBe(company.id)
    expect(typeof retried.data.reference).toBe("string")
    // The other record's retry carries it whole.
    await waitFor(() => bodies().some((b) => b.data.id === kept), "the other retry", 60_000)
    expect(bodies().find((b) => b.data.id === kept)!.data).toMatchObject({ title: "Not deleted" })

    // Send Again
    const delivery = (
      await db.sql<{ id: string }[]>`
      select d.id::text from service.webhook_deliveries d join service.events e on e.id = d.event_id
      where e.record_id = ${id} and d.endpoint_id = ${endpoint.id}`
    )[0]!
    await waitFor(
      async () => (await deliveries(db.sql)).find((d) => d.id === delivery.id)?.state === "succeeded",
      "the delivery done"
    )
    const before = at(receiver, "/gone").length
    await runSql(deps.sql, resendDelivery(ADMIN, { id: delivery.id, companyId: company.id }))
    await waitFor(() => at(receiver, "/gone").length > before, "Send Again")
    onlyIdentifiers(
      (JSON.parse(at(receiver, "/gone").at(-1)!.body.toString("utf8")) as { data: Record<string, unknown> }).data,
      id
    )

    // A replay of the endpoint's events. Send Again's answer is recorded after it arrives; until
    // then its delivery is in flight, which a replay leaves alone.
    await waitFor(
      async () =>
        (
          await db.sql`select 1 from service.webhook_deliveries where id = ${delivery.id} and leased_by is null and state = 'succeeded'`
        ).length === 1,
      "Send Again's answer recorded"
    )
    const replayed = at(receiver, "/gone").length
    await runSql(db.sql, replay({ endpointId: endpoint.id, failedOnly: false, dryRun: false, actor: ADMIN }))
    await waitFor(() => at(receiver, "/gone").length >= replayed + 2, "the replay", 60_000)
    const again = at(receiver, "/gone")
      .slice(replayed)
      .map((r) => JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> })
    onlyIdentifiers(again.find((b) => b.data.id === id)!.data, id)
    expect(again.find((b) => b.data.id === kept)!.data).toMatchObject({ title: "Not deleted" })

    // The events feed (checked against the OpenAPI document), and the deletions feed
    const feed = await api.get("/api/v1/events?type=incident.created", { key })
    expect(feed.status).toBe(200)
    const events = feed.json.data as Array<{ data: Record<string, unknown> }>
    onlyIdentifiers(events.find((e) => e.data.id === id)!.data, id)
    expect(events.find((e) => e.data.id === kept)!.data).toMatchObject({ title: "Not deleted" })
    const deletions = await api.get("/api/v1/deletions?resource=incidents", { key })
    expect(deletions.status).toBe(200)
    expect((deletions.json.data as Array<{ id: string }>).map((d) => d.id)).toContain(id)
    expect((await api.get(`/api/v1/incidents/${id}`, { key })).status).toBe(404)

    // Nothing of it is stored anywhere the service sends from; and its event is there, once.
    const stored = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.events e cross join lateral (select ${db.sql.unsafe(eventPayload("e"))} as payload) p
      where p.payload like '%Rosa Timmer%' or p.payload like '%Left hand%'`
    expect(stored[0]!.n).toBe(0)
    expect((await outbox(db.sql)).filter((e) => e.record_id === id).map((e) => e.event)).toEqual(["incident.created"])
  })

  it("a record created and deleted while capture was away: its event is stored with its identifiers only", {
    timeout: 90_000
  }, async () => {
    await world.cap.stop()
    const id = await insertIncident(db.sql, company.id, { title: "Here and gone", person_name: "Bo Brink" })
    await db.sql`update app.incidents set status = 'investigating' where id = ${id}`
    await db.sql`delete from app.incidents where id = ${id}`
    const cap = startCapture(db)
    try {
      await cap.settle()
      const events = (await outbox(db.sql)).filter((e) => e.record_id === id)
      expect(events.map((e) => e.event)).toEqual(["incident.created"])
      onlyIdentifiers(events[0]!.data, id)
    } finally {
      await cap.stop()
    }
  })
})
