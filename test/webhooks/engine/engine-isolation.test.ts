// A receiver that never answers holds at most its own per-origin slots: deliveries to
// others go on at full speed while its attempts wait for their timeout.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident } from "../../support/app.ts"
import { startHttpsReceiver, type Receiver } from "../../support/https-receiver.ts"
import { ADMIN, deliveries, startEngine, useWorld, waitFor } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const w = useWorld()
let hung: Receiver
beforeAll(async () => {
  hung = await startHttpsReceiver()
  hung.reply("/hook", { hang: true })
})
afterAll(async () => {
  await hung?.close()
})

describe("isolation", () => {
  it("a hung receiver does not delay deliveries to another", async () => {
    const slow = await runSql(
      w.deps.sql,
      createEndpoint(w.deps, ADMIN, {
        companyId: w.company.id,
        name: "hung",
        url: hung.url("/hook"),
        events: ["incident.created"]
      })
    )
    const fast = await runSql(
      w.deps.sql,
      createEndpoint(w.deps, ADMIN, {
        companyId: w.company.id,
        name: "fine",
        url: w.receiver.url("/fine"),
        events: ["incident.created"]
      })
    )
    // Few slots in all, so without the per-origin bound the hung receiver would take them all.
    const engine = await startEngine(w.deps, {
      timeoutMs: 10_000,
      leaseMs: 30_000,
      concurrency: 4,
      perOrigin: 2,
      shutdownGraceMs: 100
    })
    try {
      const started = Date.now()
      for (let i = 0; i < 12; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(() => w.receiver.requests.length === 12, "12 deliveries to the working receiver", 8_000)
      const elapsed = Date.now() - started
      expect(elapsed).toBeLessThan(6_000) // well inside the hung receiver's 10 s timeout
      // The hung receiver holds exactly its two slots; its other deliveries wait their turn.
      expect(hung.requests.length).toBe(2)
      await waitFor(
        async () =>
          (await deliveries(w.db.sql)).filter((d) => d.endpoint_id === fast.id && d.state === "succeeded").length ===
          12,
        "12 recorded"
      )
      // Those waiting (or hung) for a second are written as rows, still unattempted.
      await waitFor(
        async () =>
          (await deliveries(w.db.sql)).filter((d) => d.endpoint_id === slow.id && d.attempts === 0).length === 12,
        "12 waiting, written",
        5_000
      )
      expect(hung.requests.length).toBe(2)
    } finally {
      await engine.stop()
    }
  })
})
