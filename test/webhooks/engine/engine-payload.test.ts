// A delivery carries its record as it was at the event's commit, however the record changed
// since: an event that pointed at its record's view gets the old body copied in when the view
// changes (docs/design.md#design-decisions, "An event points at its record's view"), and a retry
// after that change sends the old body, byte for byte what the first attempt sent.
import { describe, expect, it } from "vitest"
import { insertAction } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { view } from "../../support/capture.ts"
import { addEndpoint, at, deliveredTo, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"

const s = useEngineWorld()

const data = (r: RecordedRequest) => (JSON.parse(r.body.toString("utf8")) as { data: Record<string, unknown> }).data

describe("a delivery's payload", () => {
  it("is the record at the event's commit, on a retry after the record changed", async () => {
    const path = "/changing"
    let changed = false
    s.w.receiver.reply(path, () => ({ status: changed ? 200 : 500 }))
    const e = await addEndpoint(s.w, path, { name: "changing", events: ["corrective_action.created"] })
    s.engine = await startEngine(s.w.deps, { retrySchedule: "1s,1s,1s,1s,1s" })
    const id = await insertAction(s.w.db.sql, s.w.company.id, { title: "Fence the pit" })
    await waitFor(() => at(s.w.receiver, path).length >= 1, "the first attempt")
    const first = await view(s.w.db.sql, "corrective-actions", id)

    // The record changes (no event for it): the event's stored copy is made from the old view.
    await s.w.db.sql`update app.corrective_actions set title = 'Fence and light the pit' where id = ${id}`
    await waitFor(async () => {
      const [ev] = await s.w.db.sql<{ stored: string | null }[]>`
        select payload as stored from service.events where record_id = ${id}`
      return ev?.stored != null
    }, "the old body kept in the event")
    expect((await view(s.w.db.sql, "corrective-actions", id))!.title).toBe("Fence and light the pit")
    changed = true

    await deliveredTo(s.w.db.sql, e.id, 1, "the retry to succeed")
    const sent = at(s.w.receiver, path)
    expect(sent.length).toBeGreaterThanOrEqual(2)
    // Every attempt, before and after the change, carried the record as it was created.
    for (const r of sent) expect(data(r)).toEqual(first)
    expect(new Set(sent.map((r) => JSON.stringify(data(r)))).size).toBe(1)
  })
})
