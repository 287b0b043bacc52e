// Recording a batch of attempts: the writer takes whatever outcomes finished together, so one
// batch can hold the 15th fully failed delivery in a row and, after it, a success.
import { randomUUID } from "node:crypto"
import { describe, expect, it } from "vitest"
import { fanoutRows } from "../../../src/webhooks/engine/fanout-queries.ts"
import { recordOutcomes } from "../../../src/webhooks/engine/record-queries.ts"
import type { Outcome } from "../../../src/webhooks/engine/item.ts"
import { createEndpoint, getEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident } from "../../support/app.ts"
import { ADMIN, deliveries, deliveriesTo, useWorld } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const w = useWorld()

/** n deliveries to a new endpoint (no engine runs), leased to `owner` as a claim would. */
const leased = async (n: number, owner: string) => {
  const e = await runSql(
    w.deps.sql,
    createEndpoint(w.deps, ADMIN, {
      companyId: w.company.id,
      name: `batch ${randomUUID()}`,
      url: w.receiver.url("/batch"),
      events: ["incident.created"]
    })
  )
  for (let i = 0; i < n; i++) await insertIncident(w.db.sql, w.company.id)
  await w.cap.settle()
  await fanoutRows(w.db.sql, 1_000, new Date())
  await w.db
    .sql`update service.webhook_deliveries set leased_by = ${owner}, lease_until = now() + interval '1 minute' where endpoint_id = ${e.id}`
  const ds = await deliveriesTo(w.db.sql, e.id)
  expect(ds).toHaveLength(n)
  return { endpoint: e, ids: ds.map((d) => d.id) }
}

const outcome = (id: string, endpointId: string, ok: boolean): Outcome => ({
  id,
  before: 0,
  state: ok ? "succeeded" : "failed",
  nextAt: null,
  startedAt: new Date(),
  durationMs: 3,
  status: ok ? 200 : 500,
  error: ok ? null : "http 500",
  errorKind: ok ? null : "http",
  snippet: "",
  endpointId,
  subscriptionId: null,
  health: ok ? "reset" : "fail",
  gone: false,
  orderingKey: null,
  alert: ok ? "ok" : "fail"
})

describe("recording a batch of outcomes", () => {
  it("switches an endpoint off when its 15th fully failed delivery in a row is followed by a success in the same batch", async () => {
    const owner = randomUUID()
    const { endpoint, ids } = await leased(16, owner)
    const outcomes = ids.map((id, i) => outcome(id, endpoint.id, i === 15))
    const r = await recordOutcomes(w.db.sql, { owner, outcomes, switchOffAfter: 15 })
    expect(r.applied.size).toBe(16)
    expect(r.switchedOff).toEqual([endpoint.id])
    const after = await runSql(w.deps.sql, getEndpoint({ id: endpoint.id }))
    expect(after.enabled).toBe(false)
    expect(after.consecutiveFailures).toBe(0) // the success ended the run
    expect(after.disabledReason).toMatch(/^15 deliveries in a row failed every attempt; last error: http 500$/)
  })

  it("what a switched-off endpoint still had scheduled is held at once, with the reason", async () => {
    const owner = randomUUID()
    const { endpoint, ids } = await leased(17, owner)
    const waiting = ids.slice(15)
    await w.db.sql`update service.webhook_deliveries set leased_by = null, lease_until = null, attempts = 1,
      next_attempt_at = now() + interval '1 hour' where id = any(${waiting}::uuid[])`
    const r = await recordOutcomes(w.db.sql, {
      owner,
      outcomes: ids.slice(0, 15).map((id) => outcome(id, endpoint.id, false)),
      switchOffAfter: 15
    })
    expect(r.switchedOff).toEqual([endpoint.id])
    const rows = (await deliveries(w.db.sql)).filter((d) => waiting.includes(d.id))
    expect(rows.map((d) => [d.state, d.held_reason])).toEqual([
      ["held", "the endpoint is switched off"],
      ["held", "the endpoint is switched off"]
    ])
  })

  it("adds the failures before a success to the stored count, and leaves an endpoint on below the threshold", async () => {
    const owner = randomUUID()
    const { endpoint, ids } = await leased(8, owner)
    await w.db.sql`update service.webhook_endpoints set consecutive_failures = 10 where id = ${endpoint.id}`
    // 10 stored + 4 failures = 14, a success, then 3 failures: on, count 3.
    const pattern = [false, false, false, false, true, false, false, false]
    const r = await recordOutcomes(w.db.sql, {
      owner,
      outcomes: ids.map((id, i) => outcome(id, endpoint.id, pattern[i]!)),
      switchOffAfter: 15
    })
    expect(r.switchedOff).toEqual([])
    const after = await runSql(w.deps.sql, getEndpoint({ id: endpoint.id }))
    expect([after.enabled, after.consecutiveFailures]).toEqual([true, 3])
  })

  it("counts the stored run into the failures before the first success", async () => {
    const owner = randomUUID()
    const { endpoint, ids } = await leased(3, owner)
    await w.db.sql`update service.webhook_endpoints set consecutive_failures = 13 where id = ${endpoint.id}`
    // 13 stored + 2 failures = 15: off, although a success follows.
    const r = await recordOutcomes(w.db.sql, {
      owner,
      outcomes: ids.map((id, i) => outcome(id, endpoint.id, i === 2)),
      switchOffAfter: 15
    })
    expect(r.switchedOff).toEqual([endpoint.id])
    const after = await runSql(w.deps.sql, getEndpoint({ id: endpoint.id }))
    expect([after.enabled, after.consecutiveFailures]).toEqual([false, 0])
  })
})
