// Content filters and thin payloads (docs/events.md#content-filters, #thin-payloads) with a real
// engine and a real HTTPS receiver: a filtered subscription gets the matching events and only
// they; a thin one gets the record's id, company and address and nothing else of it; a replay
// and Send Again send a filtered, thin destination what it would have got live.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Sql } from "../../../src/platform/db/Sql.ts"
import { startReplay } from "../../../src/webhooks/replay/manage.ts"
import { replayFailed, resendDelivery } from "../../../src/webhooks/deliveries/deliveries.ts"
import { updateEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { listHooks } from "../../../src/webhooks/subscriptions/hooks.ts"
import { verify } from "../../../src/webhooks/net/signature.ts"
import { insertIncident } from "../../support/app.ts"
import { runSql } from "../../support/sql.ts"
import {
  ADMIN,
  addEndpoint,
  addHook,
  arrived,
  at,
  deliveredTo,
  failure,
  makeKey,
  sleep,
  startEngine,
  useEngineWorld,
  waitFor
} from "../../support/world.ts"

type Body = { id: string; event: string; createdAt: string; data: Record<string, unknown> & { id: string } }
const bodies = (requests: ReadonlyArray<{ body: Buffer }>) => requests.map((r) => JSON.parse(r.body.toString()) as Body)

const SEVERITIES = ["minor", "serious", "moderate", "critical", "serious"] as const

describe("content filters and thin payloads", () => {
  const state = useEngineWorld()

  it('{"severity": {"$in": ["serious"]}} on incident.created: of 20 incidents, the serious ones and only they are delivered', async () => {
    const { w } = state
    const filtered = await addHook(w, "/filtered", { more: { filter: { severity: { $in: ["serious"] } } } })
    // Unfiltered, on the same key: every incident, so the test knows when all 20 went out.
    await addHook(w, "/all", { keyId: filtered.keyId })
    state.engine = await startEngine(w.deps)
    const serious: Array<string> = []
    for (let i = 0; i < 20; i++) {
      const severity = SEVERITIES[i % SEVERITIES.length]!
      const id = await insertIncident(w.db.sql, w.company.id, { severity })
      if (severity === "serious") serious.push(id)
    }
    expect(serious).toHaveLength(8)
    await arrived(w.receiver, "/all", 20, "every incident to the unfiltered subscription")
    await sleep(300)
    const got = bodies(at(w.receiver, "/filtered"))
    expect(got.map((b) => b.data.id).sort()).toEqual([...serious].sort())
    expect(got.every((b) => b.data.severity === "serious")).toBe(true)
    // No delivery at all for the others: not made, not skipped.
    const [n] = await w.db.sql<{ n: number }[]>`
      select count(*)::int as n from service.webhook_deliveries where subscription_id = ${filtered.subscription.id}`
    expect(n!.n).toBe(8)
    // GET shows it; subscribing again with another filter replaces it.
    const key = { keyId: filtered.keyId, companyId: w.company.id }
    const listed = await runSql(w.deps.sql, listHooks(key))
    const shown = listed.data.find((d) => d.id === filtered.subscription.id)
    expect(shown?.filter).toEqual({ severity: { $in: ["serious"] } })
    expect(shown).not.toHaveProperty("payload")
    const again = await addHook(w, "/filtered", {
      keyId: filtered.keyId,
      more: { filter: { severity: "critical" }, payload: "thin" }
    })
    expect(again.subscription.id).toBe(filtered.subscription.id)
    const [row] = await w.db.sql<{ filter: unknown; payload: string }[]>`
      select filter, payload from service.webhook_subscriptions where id = ${filtered.subscription.id}`
    expect(row).toEqual({ filter: { severity: "critical" }, payload: "thin" })
  })

  it("a filter on a withheld or never-sent field, an unknown field or operator is a 400 naming it, and nothing is saved", async () => {
    const { w } = state
    const keyId = await makeKey(w.db.sql, w.company.id)
    for (const [filter, message] of [
      [{ personName: "Sam" }, 'filter: "personName" is withheld from privacy cases: a filter may not read it'],
      [{ photos: { $exists: true } }, 'filter: "photos" is never sent: a filter may not read it'],
      [{ severty: "serious" }, 'filter: unknown field "severty" of incident.created'],
      [
        { severity: { $like: "ser%" } },
        'filter: unknown operator "$like" on "severity"; operators: $eq $ne $in $nin $gt $gte $lt $lte $exists'
      ]
    ] as const) {
      const e = await failure(addHook(w, "/refused", { keyId, more: { filter } }))
      expect(e.status).toBe(400)
      expect(e.message).toBe(message)
      const e2 = await failure(addEndpoint(w, "/refused", { filter }))
      expect(e2.status).toBe(400)
      expect(e2.message).toBe(message)
    }
    expect((await failure(addHook(w, "/refused", { keyId, more: { payload: "slim" } }))).message).toMatch(/payload/)
    const [n] = await w.db.sql<{ n: number }[]>`
      select (select count(*) from service.webhook_subscriptions where key_id = ${keyId})::int
        + (select count(*) from service.webhook_endpoints where url like '%/refused')::int as n`
    expect(n!.n).toBe(0)
  })

  it("a thin subscription's bodies hold no field of the record but its id, company and URL, signed the same way", async () => {
    const { w } = state
    const thin = await addHook(w, "/thin", { more: { payload: "thin" } })
    state.engine = await startEngine(w.deps)
    const id = await insertIncident(w.db.sql, w.company.id, { severity: "critical", title: "Fell from a ladder" })
    const [req] = await arrived(w.receiver, "/thin", 1, "the thin delivery")
    const raw = req!.body.toString()
    expect(Object.keys(JSON.parse(raw))).toEqual(["id", "event", "createdAt", "data"])
    expect(JSON.parse(raw).data).toEqual({ id, companyId: w.company.id, url: `/api/v1/incidents/${id}` })
    expect(raw).not.toContain("critical")
    expect(raw).not.toContain("ladder")
    expect(verify(String(req!.headers["service-signature"]), req!.body, thin.subscription.secret).ok).toBe(true)
  })

  it("a replay sends a filtered, thin endpoint only the matching events, thin; Send Again sends it as it stands then", async () => {
    const { w } = state
    // After the other tests' incidents: only this test's are replayed.
    await sleep(50)
    const since = new Date()
    // Events the endpoint never got: committed before it existed.
    const serious: Array<string> = []
    for (let i = 0; i < 6; i++) {
      const severity = i % 2 === 0 ? "serious" : "minor"
      const id = await insertIncident(w.db.sql, w.company.id, { severity })
      if (severity === "serious") serious.push(id)
    }
    await w.cap.settle()
    const e = await addEndpoint(w, "/replayed", { filter: { severity: "serious" }, payload: "thin" })
    state.engine = await startEngine(w.deps)
    const started = await Effect.runPromise(
      startReplay(ADMIN, w.company.id, "api", { endpointId: e.id, since: since.toISOString() }).pipe(
        Effect.provide(Sql.fromPool(w.deps.sql))
      )
    )
    if (!("replay" in started)) throw new Error("expected a replay")
    expect(started.replay.progress.queued).toBe(3)
    const got = await arrived(w.receiver, "/replayed", 3, "the replayed matching events")
    await sleep(300)
    expect(at(w.receiver, "/replayed")).toHaveLength(3)
    const data = bodies(got).map((b) => b.data)
    expect(data.map((d) => d.id).sort()).toEqual([...serious].sort())
    for (const d of data) expect(Object.keys(d)).toEqual(["id", "companyId", "url"])

    // Send Again of one of them, after the endpoint went back to full bodies: the body is made
    // as the destination now stands.
    await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, payload: "full" }))
    const [first] = await deliveredTo(w.db.sql, e.id, 3, "three delivered")
    await runSql(w.deps.sql, resendDelivery(ADMIN, { id: first!.id }))
    const again = await waitFor(
      () => (at(w.receiver, "/replayed").length === 4 ? at(w.receiver, "/replayed")[3] : null),
      "Send Again"
    )
    const body = JSON.parse(again!.body.toString()) as Body
    expect(body.id).toBe(first!.id)
    expect(body.data.severity).toBe("serious")
    expect(body.data.title).toBeDefined()
  })

  it("replaying an endpoint's failed deliveries sends again only those its filter takes now", async () => {
    const { w } = state
    w.receiver.reply("/refiltered", { status: 500 })
    const e = await addEndpoint(w, "/refiltered", { filter: { severity: "serious" } })
    state.engine = await startEngine(w.deps)
    const since = new Date(Date.now() - 1000)
    await insertIncident(w.db.sql, w.company.id, { severity: "serious" })
    const [failed] = await deliveredTo(w.db.sql, e.id, 1, "the delivery to fail for good", "failed")
    const tries = at(w.receiver, "/refiltered").length
    w.receiver.reply("/refiltered", { status: 200 })
    // The filter now takes critical incidents only: the failed serious one is not sent again.
    await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, filter: { severity: "critical" } }))
    expect(await runSql(w.deps.sql, replayFailed(ADMIN, { endpointId: e.id, since }))).toEqual({ count: 0 })
    await sleep(500)
    expect(at(w.receiver, "/refiltered")).toHaveLength(tries)
    // Taken again: it is.
    await runSql(w.deps.sql, updateEndpoint(w.deps, ADMIN, { id: e.id, filter: { severity: { $ne: "minor" } } }))
    expect(await runSql(w.deps.sql, replayFailed(ADMIN, { endpointId: e.id, since }))).toEqual({ count: 1 })
    const again = await waitFor(
      () => (at(w.receiver, "/refiltered").length > tries ? at(w.receiver, "/refiltered").at(-1) : null),
      "the replayed delivery"
    )
    expect((JSON.parse(again!.body.toString()) as Body).id).toBe(failed!.id)
  })
})
