// The record changes capture numbers in commit order (sql/052), for integrators who follow them:
// one row per record at its latest change, in the transaction that writes its view; a delete
// keeps its row as a tombstone does; starting points begin an epoch.
import { describe, expect, it } from "vitest"
import { insertAction, insertIncident } from "../../support/app.ts"
import { catchUp, useCaptureWorld } from "../../support/capture.ts"
import { useDemoDatabase } from "../../support/fixtures.ts"
import { parseLsn } from "../../../src/platform/db/lsn.ts"
import { QUARANTINE_PREFIX } from "../../../src/pipeline/capture/quarantine/markers.ts"
import { setMirrorValue } from "../../support/mirror.ts"

describe("record changes in commit order", () => {
  const { db, cap, company } = useCaptureWorld()

  const changes = () =>
    db.sql<{ resource: string; id: string; op: string; at: string }[]>`
      select resource, id::text, op, commit_lsn::text || '/' || ord as at from service.record_changes
      where company_id = ${company.id} order by commit_lsn, ord`

  it("numbers each record's latest change in the order the changes committed; a delete keeps its row", async () => {
    const a = await insertAction(db.sql, company.id)
    const b = await insertIncident(db.sql, company.id)
    // Shown once: its delete is a change a follower must hear of.
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

/**
 * Capture caught up on a demo database, then stopped: what is written next is drained in one
 * batch by `drain()` (a batch the service's database lost is written again that way).
 */
const stopped = async (db: ReturnType<typeof useDemoDatabase>) => {
  const slot = `slot_${db.name}`
  const drain = () => catchUp(db, { slot })
  await drain()
  const [acme] = await db.sql<{ id: string }[]>`select id::text from app.companies where host = 'acme.localhost'`
  return { drain, acme: acme!.id }
}

describe("an inspection a batch changed itself, then reached by a site's rename in the same batch", () => {
  const db = useDemoDatabase()

  it("is placed at the rename's commit, after the changes it made itself", { timeout: 120_000 }, async () => {
    const { drain, acme } = await stopped(db)
    const [site] = await db.sql<{ id: string }[]>`
      insert into app.job_sites (company_id, name) values (${acme}, 'North yard') returning id::text`
    const [equipment] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, job_site_id) values (${acme}, 'Crane', ${site!.id}) returning id::text`
    const [inspection] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, performed_at, outcome)
      values (${acme}, ${equipment!.id}, now(), 'pass') returning id::text`
    await drain()
    // Written while capture is stopped: drained together, the edit and then the rename.
    await db.sql`update app.inspections set outcome = 'fail' where id = ${inspection!.id}`
    const [edited] = await db.sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`
    await db.sql`update app.job_sites set name = 'South yard' where id = ${site!.id}`
    await drain()
    const [r] = await db.sql<{ lsn: string; ord: number }[]>`
      select commit_lsn::text as lsn, ord from service.record_changes where resource = 'inspections' and id = ${inspection!.id}`
    // Past the edit's commit, after every record a transaction changed itself (ord 2^30).
    expect(parseLsn(r!.lsn)).toBeGreaterThan(parseLsn(edited!.lsn))
    expect(r!.ord).toBe(2 ** 30)
    const [v] = await db.sql<
      { body: string }[]
    >`select body from service.views where resource = 'inspections' and id = ${inspection!.id}`
    expect(v!.body).toContain("South yard")
  })
})

describe("a record a retry releases", () => {
  const db = useDemoDatabase()

  it("is placed at the retry's transaction, not at the end of the batch it came in", { timeout: 120_000 }, async () => {
    const { drain, acme } = await stopped(db)
    // The demo schema forbids it; an app without the CHECK constraint allows it.
    await db.sql`alter table app.audits drop constraint if exists audits_score_check`
    const [audit] = await db.sql<{ id: string }[]>`
      insert into app.audits (company_id, title, performed_at, score) values (${acme}, 'Held', now(), 'NaN') returning id::text`
    await drain()
    const held = await db.sql`select 1 from service.capture_quarantine where tbl = 'audits' and key = ${audit!.id}`
    expect(held.length).toBe(1)
    // As a new release's shaper would read it: the retry now shapes the record.
    await setMirrorValue(db.sql, "audits", audit!.id, "score", 42)
    // Written while capture is stopped: drained together, the retry and then another change.
    await db.sql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "retry", records: [["audits", audit!.id]] })})`
    const [retried] = await db.sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`
    await insertIncident(db.sql, acme)
    await drain()
    const [v] = await db.sql<
      { body: string }[]
    >`select body from service.views where resource = 'audits' and id = ${audit!.id}`
    expect(JSON.parse(v!.body)).toMatchObject({ title: "Held", score: 42 })
    const [r] = await db.sql<{ lsn: string; ord: number }[]>`
      select commit_lsn::text as lsn, ord from service.record_changes where resource = 'audits' and id = ${audit!.id}`
    // The retry's commit, first in it; the incident's commit comes after.
    expect(parseLsn(r!.lsn)).toBeLessThanOrEqual(parseLsn(retried!.lsn))
    expect(r!.ord).toBe(0)
  })
})

describe("a record made and deleted within one batch", () => {
  const db = useDemoDatabase()

  it("leaves a tombstone when different transactions made and deleted it; none when one did both", {
    timeout: 120_000
  }, async () => {
    const { drain, acme } = await stopped(db)
    // Written while capture is stopped: drained in one batch, as a batch the service's database
    // lost in a crash is written again (a follower may have read the making before the loss).
    const seen = await insertAction(db.sql, acme, { title: "Made, then deleted" })
    await db.sql`delete from app.corrective_actions where id = ${seen}`
    const unseen = await db.sql.begin(async (tx) => {
      const id = await insertAction(tx as unknown as typeof db.sql, acme, { title: "Never committed alone" })
      await tx`delete from app.corrective_actions where id = ${id}`
      return id
    })
    await drain()
    const changes = await db.sql<{ id: string; op: string; company: string }[]>`
      select id::text, op, company_id::text as company from service.record_changes
      where resource = 'corrective-actions' and id in (${seen}, ${unseen})`
    expect(changes).toEqual([{ id: seen, op: "delete", company: acme }])
    const tombstones = await db.sql<{ id: string }[]>`
      select id::text from service.deletions where resource = 'corrective-actions' and id in (${seen}, ${unseen})`
    expect(tombstones).toEqual([{ id: seen }])
    const views = await db.sql`select 1 from service.views where id in (${seen}, ${unseen})`
    expect(views.length).toBe(0)
  })
})
