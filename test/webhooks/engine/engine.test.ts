// End to end: a row inserted into the app's tables becomes a signed webhook at a real HTTPS
// receiver, through real capture, the outbox, fan-out and the engine.
import { Effect } from "effect"
import Stripe from "stripe"
import { describe, expect, it } from "vitest"
import { USER_AGENT } from "../../../src/webhooks/net/sender.ts"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertAction, insertIncident } from "../../support/app.ts"
import { view } from "../../support/capture.ts"
import {
  addEndpoint,
  ADMIN,
  at,
  attemptsOf,
  deliveries,
  deliveriesTo,
  useEngine,
  useWorld,
  waitFor
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"

describe("delivery engine: the request", () => {
  const w = useWorld()
  const engine = useEngine(w)

  it("delivers an inserted incident with every header, the view's record and a Stripe-verifiable signature", async () => {
    const { id: endpointId, secret } = await addEndpoint(w, "/incidents", {
      name: "Receiver",
      events: ["incident.created", "corrective_action.created"]
    })
    const incidentId = await insertIncident(w.db.sql, w.company.id, { title: "Guard rail — réparé ✓" })
    const [req] = await waitFor(
      () => (at(w.receiver, "/incidents").length > 0 ? at(w.receiver, "/incidents") : null),
      "the webhook"
    )
    const raw = req!.body
    const body = JSON.parse(raw.toString("utf8")) as {
      id: string
      event: string
      createdAt: string
      data: Record<string, unknown>
    }

    expect(req!.method).toBe("POST")
    expect(req!.headers["content-type"]).toBe("application/json")
    expect(req!.headers["user-agent"]).toBe(USER_AGENT)
    expect(req!.headers["service-event"]).toBe("incident.created")
    expect(req!.headers["service-delivery"]).toBe(body.id)
    expect(req!.headers["service-signature"]).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)

    // An independent verifier (Stripe's) accepts the signature over the raw bytes.
    const verified = Stripe.webhooks.constructEvent(
      raw,
      String(req!.headers["service-signature"]),
      secret
    ) as unknown as typeof body
    expect(verified.id).toBe(body.id)
    expect(() =>
      Stripe.webhooks.constructEvent(raw, String(req!.headers["service-signature"]), "whsec_wrong")
    ).toThrow()

    // The body: this delivery's id, the event, its commit time, and the record as GET returns it.
    const [ev] = await w.db.sql<
      { payload: string; created_at: Date }[]
    >`select ${w.db.sql.unsafe(eventPayload("e"))} as payload, created_at from service.events e where record_id = ${incidentId}`
    expect(body.event).toBe("incident.created")
    expect(body.createdAt).toBe(ev!.created_at.toISOString())
    expect(body.data).toEqual(await view(w.db.sql, "incidents", incidentId))
    expect(body.data.title).toBe("Guard rail — réparé ✓")
    // data is the stored payload byte for byte, not a re-serialisation of it.
    expect(raw.toString("utf8")).toBe(
      `{"id":"${body.id}","event":"incident.created","createdAt":"${body.createdAt}","data":${ev!.payload}}`
    )

    // The row is written with the attempt's outcome, just after the answer.
    const d = await waitFor(
      async () => (await deliveries(w.db.sql)).find((x) => x.endpoint_id === endpointId),
      "the delivery row"
    )
    expect(d.id).toBe(body.id)
    await waitFor(
      async () => (await deliveries(w.db.sql)).find((x) => x.id === body.id && x.state === "succeeded"),
      "success recorded"
    )
    const attempts = await attemptsOf(w.db.sql, body.id)
    expect(attempts.map((a) => [a.number, a.status, a.error])).toEqual([[1, 200, null]])
  })

  it("sends only the events an endpoint chose, once each", async () => {
    const { id: endpointId } = await runSql(
      w.deps.sql,
      createEndpoint(w.deps, ADMIN, {
        companyId: w.company.id,
        name: "Actions only",
        url: w.receiver.url("/actions"),
        events: "corrective_action.created"
      })
    )
    await insertIncident(w.db.sql, w.company.id)
    const actionId = await insertAction(w.db.sql, w.company.id)
    await waitFor(() => at(w.receiver, "/actions").length > 0, "the action webhook")
    await w.cap.settle()
    await Effect.runPromise(engine.wake)
    await new Promise((r) => setTimeout(r, 300))
    const got = at(w.receiver, "/actions").map(
      (r) => JSON.parse(r.body.toString()) as { event: string; data: { id: string } }
    )
    expect(got.map((g) => [g.event, g.data.id])).toEqual([["corrective_action.created", actionId]])
    expect(await deliveriesTo(w.db.sql, endpointId)).toHaveLength(1)
  })
})
