// The record changes capture numbers in commit order (sql/052), for integrators who follow them:
// one row per record at its latest change, in the transaction that writes its view; a delete
// keeps its row as a tombstone does; starting points begin an epoch.
import { describe, expect, it } from "vitest"
import { insertAction, insertIncident } from "../../support/app.ts"
import { useCaptureWorld } from "../../support/capture.ts"

describe("record changes in commit order", () => {
  const { db, cap, company } = useCaptureWorld()

  const changes = () =>
    db.sql<{ resource: string; id: string; op: string; at: string }[]>`
      select resource, id::text, op, commit_lsn::text || '/' || ord as at from service.record_changes
      where company_id = ${company.id} order by commit_lsn, ord`

  it("numbers each record's latest change in the order the changes committed; a delete keeps its row", async () => {
    const a = await insertAction(db.sql, company.id)
    const b = await insertIncident(db.sql, company.id)
    // Shown once: its delete is a change a follower must hear of (one made and deleted between
    // two reads is none).
    await cap.settle()
    await db.sql`update app.corrective_actions set status = 'completed', completed_at = now() where id = ${a}`
    const c = await insertAction(db.sql, company.id, { title: "Third" })
    await db.sql`delete from app.incidents where id = ${b}`
    await cap.settle()
    const rows = await changes()
    // Commit order: the action closed before the third was made, the incident deleted last.
    expect(rows.map((r) => [r.id, r.op])).toEqual([
      [a, "upsert"],
      [c, "upsert"],
      [b, "delete"]
    ])
    // A change that leaves the view as it was (the same row written again) comes again, at its
    // commit: a record's place comes from its transaction alone, never from what the batch
    // before it had written (a batch written again in other cuts must place it the same).
    await db.sql`update app.corrective_actions set title = title where id = ${c}`
    await cap.settle()
    expect((await changes()).map((r) => [r.id, r.op])).toEqual([
      [a, "upsert"],
      [b, "delete"],
      [c, "upsert"]
    ])
  })

  it("places each record at the transaction that changed it, the same however capture cut the batches", async () => {
    const a = await insertAction(db.sql, company.id, { title: "One" })
    const b = await insertAction(db.sql, company.id, { title: "Two" })
    await cap.settle()
    const lsns = await db.sql<{ id: string; lsn: string; ord: number }[]>`
      select id::text, commit_lsn::text as lsn, ord from service.record_changes where id in (${a}, ${b}) order by commit_lsn`
    // Two transactions, two commit LSNs (not one batch's), each record first in its own.
    expect(lsns.map((r) => r.id)).toEqual([a, b])
    expect(lsns[0]!.lsn).not.toBe(lsns[1]!.lsn)
    expect(lsns.map((r) => r.ord)).toEqual([0, 0])
  })

  it("the first start began an epoch: changes numbered before it were not one by one", async () => {
    const epochs = await db.sql<{ reason: string }[]>`select reason from service.stream_epochs`
    expect(epochs.map((e) => e.reason)).toEqual(["the service's first start"])
  })
})
