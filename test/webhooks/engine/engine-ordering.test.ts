// Ordering per record, opt-in: events of one record reach a destination that asked for it in
// the order they happened; a later one waits while an earlier one of its record is retried,
// until it succeeds or runs out of attempts (then the next goes); other records go meanwhile.
import { describe, expect, it } from "vitest"
import { insertAction } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { addEndpoint, at, deliveriesTo, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"

const s = useEngineWorld()

type Body = {
  id: string
  event: string
  createdAt: string
  data: { id: string; title: string; status: string; closeOutNotes: string | null }
}
const body = (r: RecordedRequest) => JSON.parse(r.body.toString("utf8")) as Body

/** A record's requests, in arrival order: [event, status answered]. */
const ofRecord = (rs: ReadonlyArray<RecordedRequest>, title: string, answers: Map<RecordedRequest, number>) =>
  rs.filter((r) => body(r).data.title === title).map((r) => [body(r).event, answers.get(r)] as const)

describe("ordering by record", () => {
  it("keeps each record's events in order through retries and a delivery that runs out of attempts; other records go meanwhile", {
    timeout: 60_000
  }, async () => {
    const path = "/ordered"
    const answers = new Map<RecordedRequest, number>()
    const reply = (status: number, r: RecordedRequest) => {
      answers.set(r, status)
      return { status }
    }
    s.w.receiver.reply(path, (r) => {
      const b = body(r)
      // A's first event fails until B's last event has arrived, and at least once (B's may all
      // go before A's first attempt): B must not wait behind A.
      if (b.data.title === "A" && b.event === "corrective_action.created") {
        const bDone = at(s.w.receiver, path).some(
          (x) => body(x).data.title === "B" && body(x).event === "corrective_action.closed"
        )
        const failedOnce = [...answers].some(([x, st]) => st === 500 && body(x).data.title === "A")
        return reply(bDone && failedOnce ? 200 : 500, r)
      }
      // C's first event never gets through: after its last attempt, C's next goes.
      if (b.data.title === "C" && b.event === "corrective_action.created") return reply(503, r)
      return reply(200, r)
    })
    const e = await addEndpoint(s.w, path, {
      name: "ordered",
      events: ["corrective_action.created", "corrective_action.closed"],
      ordering: "record"
    })
    const ids: Record<string, string> = {}
    for (const title of ["A", "C"]) ids[title] = await insertAction(s.w.db.sql, s.w.company.id, { title })
    // Each change its own transaction, so its own event: A closed, reopened and closed again.
    await s.w.db
      .sql`update app.corrective_actions set status = 'completed', close_out_notes = 'first' where id = ${ids.A!}`
    await s.w.db.sql`update app.corrective_actions set status = 'open' where id = ${ids.A!}`
    await s.w.db
      .sql`update app.corrective_actions set status = 'completed', close_out_notes = 'second' where id = ${ids.A!}`
    await s.w.db.sql`update app.corrective_actions set status = 'completed' where id = ${ids.C!}`
    ids.B = await insertAction(s.w.db.sql, s.w.company.id, { title: "B" })
    await s.w.db.sql`update app.corrective_actions set status = 'completed' where id = ${ids.B}`
    // Every event captured before the engine starts: B's two deliveries then go at once beside A's
    // first attempts, so A's retries (5 s in all) do not run out before B's arrive however long
    // capture took. An attempt that hangs is cut at 2 s, not 10: two runs of ~20 s each saw A's
    // retries run out, as if one of B's attempts had waited out the 10 s timeout.
    const recordIds = Object.values(ids)
    await waitFor(async () => {
      const [r] = await s.w.db.sql<{ n: number }[]>`
        select count(*)::int as n from service.events where record_id::text = any(${recordIds})`
      return r?.n === 7
    }, "all seven events captured")
    s.engine = await startEngine(s.w.deps, { retrySchedule: "1s,1s,1s,1s,1s", timeoutMs: 2_000 })

    await waitFor(
      async () => {
        const ds = await deliveriesTo(s.w.db.sql, e.id)
        return ds.length === 7 && ds.every((d) => d.state === "succeeded" || d.state === "failed")
      },
      "every delivery finished",
      40_000
    )
    const rs = at(s.w.receiver, path)

    // A: its first event retried until it got through; only then the next, then the last.
    const a = ofRecord(rs, "A", answers)
    const firstOk = a.findIndex(([, st]) => st === 200)
    // On failure, what arrived and how each delivery ended, in arrival order.
    const seen = `arrived: ${JSON.stringify(rs.map((r) => [body(r).data.title, body(r).event, answers.get(r)]))}; deliveries: ${JSON.stringify((await deliveriesTo(s.w.db.sql, e.id)).map((d) => [d.state, d.attempts, d.last_status, d.last_error]))}`
    expect(
      a.slice(0, firstOk + 1).every(([ev]) => ev === "corrective_action.created"),
      seen
    ).toBe(true)
    expect(firstOk).toBeGreaterThan(0)
    expect(a.slice(firstOk + 1).map(([ev]) => ev)).toEqual(["corrective_action.closed", "corrective_action.closed"])
    const closed = rs.filter((r) => body(r).data.title === "A" && body(r).event === "corrective_action.closed")
    // In the order of their commits (two commits may share a millisecond: told apart by their notes).
    expect(closed.map((r) => body(r).data.closeOutNotes)).toEqual(["first", "second"])

    // B went while A's first event was still being retried.
    const bClosedAt = rs.findIndex((r) => body(r).data.title === "B" && body(r).event === "corrective_action.closed")
    const aOkAt = rs.findIndex((r) => body(r).data.title === "A" && answers.get(r) === 200)
    expect(bClosedAt).toBeLessThan(aOkAt)

    // C: its first event made all 6 attempts and failed; then its next went.
    expect(ofRecord(rs, "C", answers)).toEqual([
      ...Array.from({ length: 6 }, () => ["corrective_action.created", 503] as const),
      ["corrective_action.closed", 200]
    ])
    const states = (await deliveriesTo(s.w.db.sql, e.id)).map((d) => d.state)
    expect(states.sort()).toEqual([
      "failed",
      "succeeded",
      "succeeded",
      "succeeded",
      "succeeded",
      "succeeded",
      "succeeded"
    ])
  })
})
