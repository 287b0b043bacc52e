// One company's receivers that never answer slow no one else: they hold one send slot per
// receiver at most, and never the slots other companies need, while their attempts wait out
// the timeout. Real HTTPS receivers on loopback that take requests and never answer.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { startHttpsReceiver, type Receiver } from "../../support/https-receiver.ts"
import {
  addEndpoint,
  ADMIN,
  at,
  deliveredTo,
  deliveries,
  fanoutNow,
  startEngine,
  useWorld,
  waitFor
} from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const w = useWorld()
const hung: Array<Receiver> = []
beforeAll(async () => {
  // Six receivers, each its own origin (port): a company with six dead endpoints.
  for (let i = 0; i < 6; i++) {
    const r = await startHttpsReceiver()
    r.reply("/hook", { hang: true })
    hung.push(r)
  }
})
afterAll(async () => {
  for (const r of hung) await r.close()
})

describe("isolation between companies", () => {
  it("a company whose receivers hang holds one slot per receiver and leaves room: another company's deliveries go at once", async () => {
    const dead = await makeCompany(w.db.sql)
    await w.cap.settle()
    const deadEndpoints: Array<string> = []
    for (const [i, r] of hung.entries()) {
      const e = await runSql(
        w.deps.sql,
        createEndpoint(w.deps, ADMIN, {
          companyId: dead.id,
          name: `dead ${i}`,
          url: r.url("/hook"),
          events: ["incident.created"]
        })
      )
      deadEndpoints.push(e.id)
    }
    const fine = await addEndpoint(w, "/fine", { name: "fine" })
    // Four slots in all; two per receiver: without fairness the dead company would take all four.
    const engine = await startEngine(w.deps, {
      timeoutMs: 10_000,
      leaseMs: 30_000,
      concurrency: 4,
      perOrigin: 2,
      shutdownGraceMs: 100
    })
    try {
      // The dead company's backlog first: 12 events, 72 deliveries.
      for (let i = 0; i < 12; i++) await insertIncident(w.db.sql, dead.id)
      await waitFor(() => hung.reduce((n, r) => n + r.requests.length, 0) === 3, "the dead company's first attempts")
      for (let i = 0; i < 6; i++) await insertIncident(w.db.sql, w.company.id)
      // Every one of them arrives while the dead company's first attempts still wait for their
      // 10 s timeout: none of those has ended yet.
      await waitFor(() => at(w.receiver, "/fine").length === 6, "the healthy company's 6 deliveries", 9_000)
      const ds = await deliveries(w.db.sql)
      expect(ds.filter((d) => deadEndpoints.includes(d.endpoint_id!) && d.attempts > 0)).toEqual([])
      // The dead company holds one slot per receiver (none has answered yet) and leaves one of
      // the four free (the reserve): three requests in all, none twice to a receiver.
      expect(hung.map((r) => r.requests.length).sort()).toEqual([0, 0, 0, 1, 1, 1])
      await deliveredTo(w.db.sql, fine.id, 6, "6 recorded")
    } finally {
      await engine.stop()
    }
  })
})

describe("rows waiting for room", () => {
  it("a backlog of rows for a receiver new to the engine goes at once, not two per poll", async () => {
    const e = await addEndpoint(w, "/backlog", { name: "backlog" })
    for (let i = 0; i < 40; i++) await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    await fanoutNow(w.db.sql) // 40 rows due now, as after a restart
    // A poll a minute away: only claims that follow each other can take them all in time.
    const engine = await startEngine(w.deps, { pollMs: 60_000 })
    try {
      await waitFor(() => at(w.receiver, "/backlog").length === 40, "the 40 rows delivered", 20_000)
      await deliveredTo(w.db.sql, e.id, 40, "40 recorded")
    } finally {
      await engine.stop()
    }
  })
})
