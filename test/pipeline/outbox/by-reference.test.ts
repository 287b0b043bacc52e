// An event keeps no copy of its record while the record's view still holds the event's body
// (docs/design.md#design-decisions): the copy is made when the view changes
// or goes, so every reader still gets the record as it was at the event's commit.
import { describe, expect, it } from "vitest"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"
import { insertAction } from "../../support/app.ts"
import { useCaptureWorld, view } from "../../support/capture.ts"

describe("an event points at its record's view", () => {
  const { db, cap, company } = useCaptureWorld()

  /** A record's events: the stored copy (null: none) and the payload as readers read it. */
  const eventsOf = (id: string) =>
    db.sql<{ event: string; stored: string | null; payload: string }[]>`
      select e.event, e.payload as stored, ${db.sql.unsafe(eventPayload("e"))} as payload
      from service.events e where e.record_id = ${id} order by e.commit_lsn, e.seq`
  const title = (payload: string) => (JSON.parse(payload) as { title: string }).title

  it("stores the body only once the view moves on, and each event keeps its commit's body", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Fence the pit" })
    await cap.settle()
    let events = await eventsOf(id)
    expect(events.map((e) => [e.event, e.stored])).toEqual([["corrective_action.created", null]])
    expect(JSON.parse(events[0]!.payload)).toEqual(await view(db.sql, "corrective-actions", id))

    // A change that fires no event: the view moves on, the created event keeps the old body.
    await db.sql`update app.corrective_actions set title = 'Fence and light the pit' where id = ${id}`
    await cap.settle()
    events = await eventsOf(id)
    expect(events[0]!.stored).not.toBeNull()
    expect(title(events[0]!.payload)).toBe("Fence the pit")

    // Closed: the new event points at the view; the created one is unchanged.
    await db.sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${id}`
    await cap.settle()
    events = await eventsOf(id)
    expect(events.map((e) => [e.event, e.stored === null])).toEqual([
      ["corrective_action.created", false],
      ["corrective_action.closed", true]
    ])
    expect(events.map((e) => title(e.payload))).toEqual(["Fence the pit", "Fence and light the pit"])
    expect(JSON.parse(events[1]!.payload)).toEqual(await view(db.sql, "corrective-actions", id))
  })

  it("a view written again with the same body copies nothing; one that goes leaves its body in its events", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Replace the ladder" })
    await cap.settle()
    const before = await view(db.sql, "corrective-actions", id)
    // The same body written again (as a rebuild does): the event still points at the view.
    await db.sql`update service.views set body = body where resource = 'corrective-actions' and id = ${id}`
    expect((await eventsOf(id)).map((e) => e.stored)).toEqual([null])
    // The view goes (here by hand, not by a delete in the app, which would scrub the copy to
    // identifiers): the event keeps the body it pointed at.
    await db.sql`delete from service.views where resource = 'corrective-actions' and id = ${id}`
    const [e] = await eventsOf(id)
    expect(e!.stored).not.toBeNull()
    expect(JSON.parse(e!.stored!)).toEqual(before)
  })

  it("a view's resource and id cannot be changed: the events pointing at it and the row it stands for keep it", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Tie down the load" })
    await cap.settle()
    const other = "00000000-0000-4000-8000-00000000abcd"
    await expect(
      db.sql`update service.views set id = ${other} where resource = 'corrective-actions' and id = ${id}`
    ).rejects.toThrow("a view's resource and id never change")
    await expect(
      db.sql`update service.views set resource = 'observations' where resource = 'corrective-actions' and id = ${id}`
    ).rejects.toThrow("a view's resource and id never change")
    // Nothing changed: the event still reads its record through the view, which reads as before.
    const [e] = await eventsOf(id)
    expect(e!.stored).toBeNull()
    expect(title(e!.payload)).toBe("Tie down the load")
    expect((await view(db.sql, "corrective-actions", id))?.title).toBe("Tie down the load")
    // Other columns are written as before.
    await db.sql`update service.views set changed_at = changed_at where resource = 'corrective-actions' and id = ${id}`
  })

  it("emptying the views table first copies every body still pointed at", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Sweep the yard" })
    await cap.settle()
    expect((await eventsOf(id)).map((e) => e.stored)).toEqual([null])
    const before = await view(db.sql, "corrective-actions", id)
    await db.sql
      .begin(async (tx) => {
        await tx`truncate service.views`
        const [e] = await tx<
          { stored: string | null }[]
        >`select payload as stored from service.events where record_id = ${id}`
        expect(JSON.parse(e!.stored!)).toEqual(before)
        throw new Rollback()
      })
      .catch((err) => {
        if (!(err instanceof Rollback)) throw err
      })
  })
})

class Rollback extends Error {}
