// A record whose view reads back as exactly its row keeps no row in service.rows: the mirror
// reads it from the view (docs/design.md, "A view that stands for its mirror row"). Capture's
// rules still see every row as it was: each change below fires what it fires with a stored row.
import { describe, expect, it } from "vitest"
import { rebuildViews } from "../../../src/pipeline/capture/rebuild.ts"
import { insertAction, insertIncident, makeCompany, outOfLineText } from "../../support/app.ts"
import { outbox, useCapture, useCaptureWorld, view } from "../../support/capture.ts"
import { useDatabase, useResource } from "../../support/fixtures.ts"
import { mirrorRows } from "../../support/mirror.ts"
import { runSql } from "../../support/sql.ts"
import type { Sql } from "postgres"
import { waitFor } from "../../support/wait.ts"

/** Whether service.rows stores the row (rather than its view standing for it). */
const stored = async (sql: Sql, tbl: string, id: string) => {
  const [r] = await sql<{ n: number }[]>`select count(*)::int as n from service.rows where tbl = ${tbl} and key = ${id}`
  return r!.n === 1
}
const mirrored = async (sql: Sql, tbl: string, id: string) =>
  (await mirrorRows(sql, tbl)).find((r) => r.key === id)?.data
const eventsOf = async (sql: Sql, id: string) =>
  (await outbox(sql)).filter((e) => e.record_id === id).map((e) => e.event)

describe("a view stands for its mirror row", () => {
  const { db, cap, company } = useCaptureWorld()

  it("a corrective action keeps no stored row, and its changes fire by the row its view gives back", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Fence the pit" })
    await cap.settle()
    expect(await stored(db.sql, "corrective_actions", id)).toBe(false)
    expect(await mirrored(db.sql, "corrective_actions", id)).toMatchObject({
      id,
      company_id: company.id,
      title: "Fence the pit",
      status: "open",
      owner: "Sam"
    })
    await db.sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${id}`
    await cap.settle()
    // A change that leaves the status as it was fires nothing: the status before it was read back right.
    await db.sql`update app.corrective_actions set title = 'Fence and light the pit' where id = ${id}`
    await cap.settle()
    expect(await eventsOf(db.sql, id)).toEqual(["corrective_action.created", "corrective_action.closed"])
    expect(await stored(db.sql, "corrective_actions", id)).toBe(false)
    expect((await view(db.sql, "corrective-actions", id))?.title).toBe("Fence and light the pit")
  })

  it("a privacy case keeps no person's details in the mirror either; they come back with the change that ends it", async () => {
    const id = await insertIncident(db.sql, company.id, { person_name: "Alex Doe" })
    await cap.settle()
    expect(await stored(db.sql, "incidents", id)).toBe(false)
    await db.sql`update app.incidents set privacy_case = true where id = ${id}`
    await cap.settle()
    expect((await view(db.sql, "incidents", id))?.personName).toBeNull()
    // Its row, without the details, is what its view shows: the view stands for it.
    expect(await stored(db.sql, "incidents", id)).toBe(false)
    expect((await mirrored(db.sql, "incidents", id))?.person_name).toBeNull()
    await db.sql`update app.incidents set privacy_case = false where id = ${id}`
    await cap.settle()
    expect(await stored(db.sql, "incidents", id)).toBe(false)
    expect((await view(db.sql, "incidents", id))?.personName).toBe("Alex Doe")
  })

  it("a detail PostgreSQL sends as unchanged (TOAST) when a privacy case ends is read again from the app", async () => {
    const long = outOfLineText()
    const id = await insertIncident(db.sql, company.id, {
      person_name: "Sam Roe",
      description: long,
      privacy_case: true
    })
    await cap.settle()
    expect((await view(db.sql, "incidents", id))?.description).toBeNull()
    await db.sql`update app.incidents set privacy_case = false where id = ${id}`
    await waitFor(
      async () => (await view(db.sql, "incidents", id))?.description === long,
      "the description read again from the app"
    )
    expect((await view(db.sql, "incidents", id))?.personName).toBe("Sam Roe")
  })

  it("a deleted record leaves neither view nor row", async () => {
    const id = await insertAction(db.sql, company.id)
    await cap.settle()
    await db.sql`delete from app.corrective_actions where id = ${id}`
    await cap.settle()
    expect(await view(db.sql, "corrective-actions", id)).toBeUndefined()
    expect(await mirrored(db.sql, "corrective_actions", id)).toBeUndefined()
    expect(await eventsOf(db.sql, id)).toEqual(["corrective_action.created"])
  })

  it("a view changed by another writer keeps its old row in the mirror; rebuild-views gives it back to the view", async () => {
    const id = await insertAction(db.sql, company.id, { title: "Rope off the stairs" })
    await cap.settle()
    const row = await mirrored(db.sql, "corrective_actions", id)
    await db.sql`update service.views set body = '{"stale":true}' where resource = 'corrective-actions' and id = ${id}`
    expect(await stored(db.sql, "corrective_actions", id)).toBe(true)
    expect(await mirrored(db.sql, "corrective_actions", id)).toEqual(row)
    await runSql(db.sql, rebuildViews())
    expect((await view(db.sql, "corrective-actions", id))?.title).toBe("Rope off the stairs")
    expect(await stored(db.sql, "corrective_actions", id)).toBe(false)
    expect(await mirrored(db.sql, "corrective_actions", id)).toEqual(row)
  })
})

describe("a large transaction's new records", () => {
  const db = useDatabase()
  const company = useResource(
    "the company",
    () => makeCompany(db.sql),
    async () => {}
  )
  const cap = useCapture(db, { largeTransaction: 50 })

  it("are not stored; the transactions after them read them back from their views", async () => {
    const ids = await db.sql.begin(async (tx) => {
      const out: string[] = []
      for (let i = 0; i < 120; i++)
        out.push(await insertAction(tx as unknown as Sql, company.id, { title: `Import ${i}` }))
      // changed and deleted in the same transaction: the deleted one is not found through a view
      await tx`update app.corrective_actions set status = 'in_progress' where id = ${out[0]!}`
      await tx`delete from app.corrective_actions where id = ${out[1]!}`
      return out
    })
    await cap.settle()
    const [kept] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.rows where tbl = 'corrective_actions' and key = any(${ids}::text[])`
    expect(kept!.n).toBe(0)
    expect(await view(db.sql, "corrective-actions", ids[1]!)).toBeUndefined()
    expect((await view(db.sql, "corrective-actions", ids[0]!))?.status).toBe("in_progress")
    expect((await mirrored(db.sql, "corrective_actions", ids[2]!))?.title).toBe("Import 2")
    // Another large transaction: each closes once, read back from its view.
    await db.sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = any(${ids.slice(2, 80)}::uuid[])`
    await cap.settle()
    await db.sql`update app.corrective_actions set title = title || '.' where id = any(${ids.slice(2, 80)}::uuid[])`
    await cap.settle()
    const events = (await outbox(db.sql)).filter((e) => ids.includes(e.record_id))
    const closed = events.filter((e) => e.event === "corrective_action.closed").map((e) => e.record_id)
    expect(closed.sort()).toEqual(ids.slice(2, 80).sort())
    expect(events.filter((e) => e.event === "corrective_action.created")).toHaveLength(119)
    const [after] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.rows where tbl = 'corrective_actions' and key = any(${ids}::text[])`
    expect(after!.n).toBe(0)
  })
})
