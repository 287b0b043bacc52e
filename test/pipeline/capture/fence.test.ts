// Capture and the schema fence (docs/deployment.md#upgrades): a database that takes writes from
// a newer release only gets nothing from this one's capture. The run checks the fence in each
// batch's transaction before anything is written, ends with CaptureFenced and lets its leader
// lock go, so a newer process leads.
import { Effect, Exit } from "effect"
import { describe, expect, it } from "vitest"
import { captureRun, CaptureStats } from "../../../src/pipeline/capture/run.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { startCapture } from "../../support/capture.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("capture behind a schema fence it is too old for", () => {
  const db = useDatabase()

  it("writes nothing of a batch, ends its run with CaptureFenced and lets the leader lock go", async () => {
    const company = await makeCompany(db.sql)
    const slot = `slot_${db.name}`
    // A first start builds the views; then a newer release's migration raises the fence.
    const first = startCapture(db, { slot })
    await first.settle()
    await first.stop()
    await db.sql`update service.schema_fence set oldest_writer = '99.0.0', raised_by = '999_newer.sql'`
    const id = await insertIncident(db.sql, company.id)
    const before = await db.sql`select checkpoint_lsn::text from service.capture_state`
    const exit = await Effect.runPromiseExit(
      captureRun(
        db.sql,
        { url: db.url, slot, publication: "safety_records_service", batchChanges: 100, heartbeatMs: 60_000 },
        new CaptureStats()
      )
    )
    expect(Exit.isFailure(exit) ? String(exit.cause) : "").toContain("CaptureFenced")
    expect(String(Exit.isFailure(exit) ? exit.cause : "")).toContain("from release 99.0.0 or newer")
    // Nothing of the incident: no view, no event, no mirror row; the checkpoint did not move.
    expect(await db.sql`select 1 from service.views where id = ${id}`).toHaveLength(0)
    expect(await db.sql`select 1 from service.events where record_id = ${id}`).toHaveLength(0)
    expect(await db.sql`select 1 from service.rows where key = ${id}`).toHaveLength(0)
    expect(await db.sql`select checkpoint_lsn::text from service.capture_state`).toEqual(before)
    // The lock is free: a newer process can lead.
    const [lock] = await db.sql<{ held: boolean }[]>`
      select exists (select 1 from pg_locks where locktype = 'advisory' and granted
                     and database = (select oid from pg_database where datname = current_database())) as held`
    expect(lock!.held).toBe(false)
    // Lowered again (as a rollback of the newer release would not, but a test may): it applies.
    await db.sql`update service.schema_fence set oldest_writer = '0.1.0'`
    const again = startCapture(db, { slot })
    await again.settle()
    await again.stop()
    expect(await db.sql`select 1 from service.events where record_id = ${id}`).toHaveLength(1)
  })
})
