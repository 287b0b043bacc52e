// Deliveries the engine has claimed but not started wait in memory for a send slot, seconds
// behind a slow receiver. A change to their destination made meanwhile applies to them at
// once: a rotated secret signs them, a deleted endpoint, a revoked key or a turned-off
// subscription gets none of them.
import { Effect } from "effect"
import Stripe from "stripe"
import { describe, expect, it } from "vitest"
import { deleteEndpoint, rotateEndpointSecret, updateEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { disableSubscription } from "../../../src/webhooks/subscriptions/subscriptions.ts"
import { insertAction, insertIncident } from "../../support/app.ts"
import { PRIVACY_CASE_FIELDS } from "../../../src/domain/records/incidents.ts"
import {
  addEndpoint,
  addHook,
  ADMIN,
  arrived,
  at,
  deliveredTo,
  deliveries,
  sleep,
  startEngine,
  useEngineWorld,
  waitFor
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const s = useEngineWorld()

const SLOW = 1_000 // each answer takes this long; one at a time per receiver
/**
 * The engine keeps in memory what a receiver can take within writeAfterMs, once the receiver
 * has answered (before, two): long enough here for all three, after one answer from it.
 */
const slowEngine = async () => {
  const engine = await startEngine(s.w.deps, { perOrigin: 1, writeAfterMs: 10_000 })
  s.w.receiver.reply("/warm", { status: 200 })
  const warm = await addEndpoint(s.w, "/warm", { name: "warm", events: ["corrective_action.created"] })
  const before = at(s.w.receiver, "/warm").length
  await insertAction(s.w.db.sql, s.w.company.id)
  await waitFor(() => at(s.w.receiver, "/warm").length > before, "the receiver's first answer")
  await runSql(s.w.deps.sql, deleteEndpoint(ADMIN, { id: warm.id }))
  return engine
}

/** The two deliveries that waited in memory, once handed back, claimed again and held. */
const twoHeld = (of: (d: Awaited<ReturnType<typeof deliveries>>[number]) => boolean) =>
  waitFor(async () => {
    const ds = (await deliveries(s.w.db.sql)).filter((d) => of(d) && d.state === "held")
    return ds.length === 2 ? ds : null
  }, "the two waiting deliveries held")

/** Three incidents whose deliveries are all claimed: one sending, two waiting in memory. */
const threeQueued = async (path: string) => {
  for (let i = 0; i < 3; i++) await insertIncident(s.w.db.sql, s.w.company.id, { title: `queued ${i}` })
  await arrived(s.w.receiver, path, 1, "the first request")
  // The other two wait in the engine's memory for the send slot, not merely about to be
  // fanned out (a first attempt's row is written with its outcome).
  await waitFor(
    async () => (await Effect.runPromise(s.engine!.stats)).queued === 2,
    "the other two waiting for a send slot"
  )
  expect(at(s.w.receiver, path)).toHaveLength(1)
}

describe("a destination that changes while its deliveries wait for a send slot", () => {
  it("a rotated secret signs every request that starts after the rotation", async () => {
    s.w.receiver.reply("/rotate", { status: 200, delayMs: SLOW })
    const e = await addEndpoint(s.w, "/rotate", { name: "rotate" })
    s.engine = await slowEngine()
    await threeQueued("/rotate")
    const rotated = await runSql(s.w.deps.sql, rotateEndpointSecret(s.w.deps, ADMIN, { id: e.id, overlap: "0" })) // no overlap: the old secret stops at once
    const [first, ...later] = await arrived(s.w.receiver, "/rotate", 3, "all three")
    const verify = (r: typeof first, secret: string) =>
      Stripe.webhooks.constructEvent(r!.body, String(r!.headers["service-signature"]), secret)
    expect(() => verify(first, e.secret)).not.toThrow() // sent before the rotation
    for (const r of later) {
      expect(() => verify(r, rotated.secret)).not.toThrow()
      expect(() => verify(r, e.secret)).toThrow()
    }
    await deliveredTo(s.w.db.sql, e.id, 3, "three recorded")
  })

  it("a changed address gets the waiting requests; a deleted endpoint gets none", async () => {
    s.w.receiver.reply("/old", { status: 200, delayMs: SLOW })
    s.w.receiver.reply("/new", { status: 200 })
    const e = await addEndpoint(s.w, "/old", { name: "moved" })
    s.engine = await slowEngine()
    await threeQueued("/old")
    await runSql(s.w.deps.sql, updateEndpoint(s.w.deps, ADMIN, { id: e.id, url: s.w.receiver.url("/new") }))
    await arrived(s.w.receiver, "/new", 2, "the two waiting, at the new address")
    expect(at(s.w.receiver, "/old")).toHaveLength(1)

    s.w.receiver.reply("/gone", { status: 200, delayMs: SLOW })
    const g = await addEndpoint(s.w, "/gone", { name: "deleted" })
    await s.w.db.sql`delete from service.webhook_endpoints where id = ${e.id}`
    await threeQueued("/gone")
    await runSql(s.w.deps.sql, deleteEndpoint(ADMIN, { id: g.id }))
    await sleep(3 * SLOW)
    expect(at(s.w.receiver, "/gone")).toHaveLength(1)
  })

  it("an event the endpoint no longer takes is not sent: its waiting deliveries are held, saying why", async () => {
    s.w.receiver.reply("/narrowed", { status: 200, delayMs: SLOW })
    const e = await addEndpoint(s.w, "/narrowed", {
      name: "narrowed",
      events: ["incident.created", "observation.created"]
    })
    s.engine = await slowEngine()
    await threeQueued("/narrowed")
    await runSql(s.w.deps.sql, updateEndpoint(s.w.deps, ADMIN, { id: e.id, events: ["observation.created"] }))
    const held = await twoHeld((d) => d.endpoint_id === e.id)
    expect(held.every((d) => d.held_reason === "the endpoint no longer takes incident.created")).toBe(true)
    await sleep(SLOW)
    expect(at(s.w.receiver, "/narrowed")).toHaveLength(1)
  })

  it("an incident that becomes a privacy case: its waiting deliveries go without the person's details", async () => {
    // Slow enough that capture applies the update while the first is on its way, even on a busy machine.
    s.w.receiver.reply("/private", { status: 200, delayMs: 4 * SLOW })
    await addEndpoint(s.w, "/private", { name: "private" })
    s.engine = await slowEngine()
    await threeQueued("/private")
    await s.w.db
      .sql`update app.incidents set privacy_case = true where company_id = ${s.w.company.id} and title like 'queued %'`
    await s.w.cap.settle()
    const [first, ...waiting] = (await arrived(s.w.receiver, "/private", 3, "all three", 60_000)).map(
      (r) => JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> }
    )
    expect(first!.data.description).toBe("Worker slipped near the loading bay") // it was on its way already
    for (const body of waiting) for (const field of PRIVACY_CASE_FIELDS) expect(body.data[field], field).toBeNull()
  })

  it("incidents deleted meanwhile: their waiting deliveries go with their identifiers only", async () => {
    s.w.receiver.reply("/deleted", { status: 200, delayMs: 4 * SLOW })
    await addEndpoint(s.w, "/deleted", { name: "deleted" })
    // The waiting deliveries stay in memory (not written back after 2 s): only the capture's
    // notice makes the engine hand them back and read them again.
    s.engine = await startEngine(s.w.deps, { perOrigin: 1, writeAfterMs: 60_000 })
    await threeQueued("/deleted")
    await s.w.db.sql`delete from app.incidents where company_id = ${s.w.company.id} and title like 'queued %'`
    await s.w.cap.settle()
    const [first, ...waiting] = (await arrived(s.w.receiver, "/deleted", 3, "all three", 60_000)).map(
      (r) => JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> }
    )
    expect(first!.data.title).toMatch(/^queued /) // it was on its way already
    for (const body of waiting) {
      expect(body.data.id).toEqual(expect.any(String))
      for (const [field, value] of Object.entries(body.data))
        if (!["id", "companyId", "reference"].includes(field)) expect(value, field).toBeNull()
    }
  })

  it("a revoked key's and a turned-off subscription's waiting deliveries are not sent", async () => {
    s.w.receiver.reply("/revoked", { status: 200, delayMs: SLOW })
    const { keyId } = await addHook(s.w, "/revoked", { key: { scopes: ["incidents"], webhooks: true } })
    s.engine = await slowEngine()
    await threeQueued("/revoked")
    await s.w.db.sql`update service.api_keys set revoked_at = now() where id = ${keyId}` // as keys revoke does
    await sleep(3 * SLOW)
    expect(at(s.w.receiver, "/revoked")).toHaveLength(1)

    s.w.receiver.reply("/off", { status: 200, delayMs: SLOW })
    const { subscription } = await addHook(s.w, "/off", { key: { scopes: ["incidents"], webhooks: true } })
    await threeQueued("/off")
    await runSql(s.w.deps.sql, disableSubscription(ADMIN, { id: subscription.id }))
    // handed back, claimed again and held there, unsent
    const held = await twoHeld((d) => d.subscription_id === subscription.id)
    expect(held.every((d) => d.held_reason === "the subscription is turned off")).toBe(true)
    await sleep(SLOW)
    expect(at(s.w.receiver, "/off")).toHaveLength(1)
  })
})
