// rebuild-views while the app keeps writing and capture keeps applying: it repairs views that
// went wrong, and the end state equals a fresh projection of the app tables.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { rebuildViews, type RebuildProgress } from "../../../src/pipeline/capture/rebuild.ts"
import { simulate } from "../../../src/seed/simulate.ts"
import { startCapture, type RunningCapture } from "../../support/capture.ts"
import type { TestDatabase } from "../../support/db.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { runCli } from "../../support/cli.ts"
import { useDemoDatabase } from "../../support/fixtures.ts"
import { runSql } from "../../support/sql.ts"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

/**
 * Damage a few views the way a bug would: wrong bodies, a lost view, a view of nothing. Of
 * kinds the simulator never writes, so capture cannot repair them first.
 */
const damage = async (db: TestDatabase) => {
  const wrong = await db.sql`
    update service.views set body = '{"stale":true}'
    where (resource, id) in (select resource, id from service.views where resource = 'sds' order by id limit 3) returning id`
  const lost = await db.sql`
    delete from service.views where (resource, id) in (select resource, id from service.views where resource = 'risk-assessments' order by id limit 1) returning id`
  await db.sql`
    insert into service.views (resource, id, company_id, created_at, body)
    select 'incidents', gen_random_uuid(), company_id, now(), '{"ghost":true}' from service.views limit 1`
  return wrong.count + lost.count
}

describe("rebuild-views", () => {
  const db = useDemoDatabase()
  let cap: RunningCapture

  beforeAll(async () => {
    cap = startCapture(db)
    await cap.settle(60_000)
  })
  afterAll(async () => {
    await cap?.stop()
  })

  /**
   * Writes like the app until the returned function is called; resolves with what was
   * committed. Besides the simulator, a few corrective actions are retitled back to back,
   * so some record the rebuild is re-projecting keeps changing under it.
   */
  const keepWriting = () => {
    const ac = new AbortController()
    const run = simulate(db.sql, { rate: 200, concurrency: 2, signal: ac.signal, seed: 42 })
    const hammer = (async () => {
      const ids = (
        await db.sql<{ id: string }[]>`select id::text from app.corrective_actions order by id limit 20`
      ).map((r) => r.id)
      let n = 0
      while (!ac.signal.aborted) {
        await db.sql`update app.corrective_actions set title = ${`Retitled ${n}`}, updated_at = now() where id = ${ids[n % ids.length]!}`
        n++
      }
      return n
    })()
    return async () => {
      ac.abort()
      const retitled = await hammer
      return { ...(await run), retitled }
    }
  }

  const checkAgainstFresh = async () => {
    await cap.settle(60_000)
    await cap.stop()
    const { diff, views } = await diffAgainstFreshProjection(db)
    expect(diff).toEqual([])
    expect(views).toBeGreaterThan(100)
    cap = startCapture(db)
    await cap.settle(60_000)
  }

  it("under concurrent writes, repairs damaged views and ends equal to a fresh projection", async () => {
    const damaged = await damage(db)
    const stop = keepWriting()
    await sleep(700)
    const batchesBefore = cap.stats.batches
    const phases: RebuildProgress[] = []
    const result = await runSql(
      db.sql,
      rebuildViews((p) => phases.push(p))
    )
    await sleep(700)
    const written = await stop()
    expect(written.failed).toBe(0)
    expect(Object.values(written.operations).reduce((a, b) => a + b, 0)).toBeGreaterThan(50)
    expect(written.retitled).toBeGreaterThan(100)
    // capture kept applying around the rebuild
    expect(cap.stats.batches).toBeGreaterThan(batchesBefore)
    expect(damaged).toBe(4)
    expect(result.changed).toBeGreaterThanOrEqual(damaged)
    expect(result.removed).toBeGreaterThanOrEqual(1)
    expect(result.views).toBeGreaterThan(100)
    expect(phases.map((p) => p.phase)).toEqual(
      expect.arrayContaining(["waiting", "views", "tenancy", "cleanup", "committing"])
    )
    const last = phases.filter((p) => p.phase === "views").at(-1)!
    expect(last.done).toBe(last.total)
    await checkAgainstFresh()
  })

  it("npm run admin -- rebuild-views --json, under concurrent writes", async () => {
    const damaged = await damage(db)
    const stop = keepWriting()
    await sleep(500)
    const r = await runCli(["rebuild-views", "--json"], { DATABASE_URL: db.url })
    await sleep(500)
    await stop()
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const answer = JSON.parse(r.stdout)
    expect(Object.keys(answer).sort()).toEqual([
      "changed",
      "checkpoint",
      "companies",
      "ms",
      "pausedCaptureMs",
      "removed",
      "views"
    ])
    expect(answer.changed).toBeGreaterThanOrEqual(damaged)
    expect(answer.removed).toBeGreaterThanOrEqual(1)
    await checkAgainstFresh()
  })
})
