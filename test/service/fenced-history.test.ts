// A record deleted while a capture of an older release still leads (docs/design.md, "The schema
// fence"): before the fence, its delete (the mirror row, then the view) made sql/032's trigger
// put the view back in the mirror as a row, and the next rebuild-views served the record again
// and dropped its tombstone from /api/v1/deletions. The older capture is a release before
// 0.2.0: its statements are replayed here as it sent them, on a session named as the service's
// that says no release. With the fence as sql/031 and 032 raise it, the database refuses them;
// the new release's capture (the real one) then takes the delete from the slot, and the record
// stays deleted through the rebuild.
import postgres from "postgres"
import { describe, expect, it } from "vitest"
import { rebuildViews } from "../../src/pipeline/capture/rebuild.ts"
import { FENCE_REFUSED } from "../../src/platform/db/fence.ts"
import { insertAction } from "../support/app.ts"
import { startCapture } from "../support/capture.ts"
import { makeKey, request } from "../support/http.ts"
import { runSql } from "../support/sql.ts"
import { createCompany, type TestCompany } from "../support/views.ts"
import { useServiceWorld } from "../support/world.ts"

/** The delete batch of the release of 2026-11-26 (before sql/031), as its capture sent it. */
const olderCaptureDeletes = async (url: string, id: string, at: Date) => {
  const older = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { application_name: "safety-records-service" }
  })
  try {
    await older.begin(async (tx) => {
      await tx`
        delete from service.rows r using unnest(string_to_array('corrective_actions', chr(30)), ${[id]}::text[]) as d(tbl, key)
        where r.tbl = d.tbl and r.key = d.key`
      await tx`
        with d as (
          delete from service.views v using json_to_recordset(${JSON.stringify([{ resource: "corrective-actions", id, at }])}::text::json)
            as g(resource text, id uuid, at timestamptz)
          where v.resource = g.resource and v.id = g.id
          returning v.resource, v.id, v.company_id, g.at
        )
        insert into service.deletions (resource, id, company_id, deleted_at)
        select resource, id, company_id, date_trunc('milliseconds', coalesce(d.at, now())) from d
        on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at`
    })
  } finally {
    await older.end()
  }
}

describe("an older release's capture deleting a record beside the new release", () => {
  let acme: TestCompany
  const world = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Fenced History", mirrored: false })
    },
    receiver: false,
    settings: { rateLimit: 1_000_000 }
  })
  const { db, server } = world
  const fence = (release: string) => db.sql`update service.schema_fence set oldest_writer = ${release}`
  const deleted = async (key: string) =>
    (
      (await request(server.url, "/api/v1/deletions?limit=100", { key })).json as { data: Array<{ id: string }> }
    ).data.map((d) => d.id)

  it("without the fence, served the deleted record again after rebuild-views and lost its tombstone (as before 0.2.0)", async () => {
    const { key } = await makeKey(db, acme)
    const id = await insertAction(db.sql, acme.id)
    await world.cap.settle()
    expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(200)
    // The older release leads capture and takes the app's delete from the slot.
    await world.cap.stop()
    await db.sql`delete from app.corrective_actions where id = ${id}`
    await fence("0.1.0") // as a database no fence guards
    try {
      await olderCaptureDeletes(db.url, id, new Date())
      expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(404)
      expect(await deleted(key)).toContain(id)
      await runSql(db.sql, rebuildViews())
      expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(200)
      expect(await deleted(key)).not.toContain(id)
    } finally {
      await fence("0.2.0")
    }
  })

  it("with the fence, the older capture writes nothing; the new one deletes the record, and it stays deleted", async () => {
    const { key } = await makeKey(db, acme)
    const cap = startCapture(db)
    let id = ""
    try {
      id = await insertAction(db.sql, acme.id)
      await cap.settle()
      await cap.stop()
      await db.sql`delete from app.corrective_actions where id = ${id}`
      await expect(olderCaptureDeletes(db.url, id, new Date())).rejects.toMatchObject({ code: FENCE_REFUSED })
      // Nothing of it: the view stands, no mirror row came back, no tombstone.
      expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(200)
      const [mirror] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.rows where key = ${id}`
      expect(mirror!.n).toBe(0)
      expect(await deleted(key)).not.toContain(id)
    } finally {
      await cap.stop()
    }
    // The older leader stopped; the new release's capture takes the delete from the slot.
    const next = startCapture(db)
    try {
      await next.settle()
      expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(404)
      await runSql(db.sql, rebuildViews())
      expect((await request(server.url, `/api/v1/corrective-actions/${id}`, { key })).status).toBe(404)
      expect(await deleted(key)).toContain(id)
    } finally {
      await next.stop()
    }
  })
})
