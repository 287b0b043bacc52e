// Capture across the things that go wrong: a PostgreSQL restart mid-stream, an idle
// database, a first start while the app writes, a dropped slot, and a huge transaction.
import { describe, expect, it } from "vitest"
import { parseLsn } from "../../../src/platform/db/lsn.ts"
import { LEADER_LOCK } from "../../../src/pipeline/capture/run.ts"
import { connect } from "../../../src/platform/db/Database.ts"
import { prepareDemoDatabase } from "../../../src/platform/db/demo-schema.ts"
import { seedDemo } from "../../../src/seed/demo.ts"
import { simulate } from "../../../src/seed/simulate.ts"
import { insertAction, insertIncident, makeCompany } from "../../support/app.ts"
import { outbox, startCapture, view } from "../../support/capture.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { useDatabase, useRestartableServer } from "../../support/fixtures.ts"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"

describe("the leader lock", () => {
  const db = useDatabase()

  it("is checked at every heartbeat: a capture whose lock connection is gone steps down, then leads again with nothing lost", {
    timeout: 60_000
  }, async () => {
    const company = await makeCompany(db.sql)
    const cap = startCapture(db, { heartbeatMs: 200 })
    await cap.settle()
    const first = await insertIncident(db.sql, company.id)
    await cap.settle()
    // End the session that holds the lock, as a dropped connection or a recycled one would.
    const [holder] = await db.sql<{ pid: number }[]>`
      select pid from pg_locks where locktype = 'advisory' and granted
        and ((classid::bigint << 32) | objid::bigint) = ${LEADER_LOCK} and database = (select oid from pg_database where datname = current_database())`
    expect(holder).toBeDefined()
    await db.sql`select pg_terminate_backend(${holder!.pid})`
    const deadline = Date.now() + 20_000
    while (
      !cap.logs.some((l) => l.level === "retry" && l.message.includes("lost its leader lock")) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 50))
    }
    expect(cap.logs.find((l) => l.message.includes("lost its leader lock"))?.message).toMatch(
      /capture lost its leader lock \(its connection (failed|was replaced)\); stepping down/
    )
    const second = await insertIncident(db.sql, company.id)
    await cap.settle(20_000)
    await cap.stop()
    const events = await db.sql<
      { record_id: string }[]
    >`select record_id::text from service.events where event = 'incident.created' order by commit_lsn, seq`
    expect(events.map((e) => e.record_id)).toEqual([first, second])
  })
})

describe("PostgreSQL restart mid-stream", () => {
  const server = useRestartableServer("srs-restart-")

  it("resumes from the checkpoint with nothing lost or doubled", { timeout: 120_000 }, async () => {
    const sql = connect(server.url, 4)
    await prepareDemoDatabase(sql)
    const company = await makeCompany(sql)
    const db = { sql, url: server.url, name: "restart" }
    const cap = startCapture(db)
    await cap.settle()
    const before: string[] = []
    for (let i = 0; i < 50; i++) before.push(await insertIncident(sql, company.id))
    await server.stop()
    await server.start()
    // The app is another process with its own connections: its writes go through a new pool, so
    // an error the capture's pool meets while reconnecting (one error object rejects every query
    // queued on that connection) cannot fail them. The capture's pool reconnects by itself.
    const sql2 = connect(server.url, 2)
    const after: string[] = []
    for (let i = 0; i < 50; i++) after.push(await insertIncident(sql2, company.id))
    // The capture's pool reconnects on its own; the loop retries with a new replication connection.
    const deadline = Date.now() + 60_000
    for (;;) {
      const [r] = await sql2<
        { n: number }[]
      >`select count(*)::int as n from service.events where event = 'incident.created'`
      if (r!.n >= 100 || Date.now() > deadline) break
      await new Promise((r) => setTimeout(r, 100))
    }
    await cap.stop()
    const events = await sql2<
      { record_id: string }[]
    >`select record_id::text from service.events where event = 'incident.created'`
    expect(events.map((e) => e.record_id).sort()).toEqual([...before, ...after].sort())
    expect(cap.logs.some((l) => l.level === "retry")).toBe(true)
    await sql2.end({ timeout: 2 })
    await sql.end({ timeout: 2 })
  })
})

describe("slot and bootstrap", () => {
  const db = useDatabase()

  it("a first start on existing rows builds views, fires nothing for them, and loses nothing written meanwhile", {
    timeout: 120_000
  }, async () => {
    await seedDemo(db.sql)
    // Timestamps without an everyday ISO form, read from the snapshot (not the stream).
    // (Training records: the writer below adds some but never updates one.)
    const [odd] = await db.sql<{ id: string }[]>`
      update app.training_records set expires_at = 'infinity', completed_at = '12026-03-04 05:06:07+00'
      where id = (select id from app.training_records order by id limit 1) returning id::text`
    const writer = simulate(db.sql, { rate: Infinity, maxOperations: 800, company: "acme.localhost", seed: 3 })
    const cap = startCapture(db)
    const result = await writer
    await cap.settle(60_000)
    await cap.stop()
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.events`
    const n = row!.n
    const total = Object.values(result.events).reduce((a, b) => a + b, 0)
    // Events only for writes after the snapshot: at most what the writer did, never twice.
    expect(n).toBeLessThanOrEqual(total)
    const dupes =
      await db.sql`select record_id, event from service.events where event like '%.created' group by 1, 2 having count(*) > 1`
    expect(dupes.length).toBe(0)
    const seeded = await db.sql<{ id: string }[]>`select id::text from app.incidents order by created_at limit 1`
    expect(await view(db.sql, "incidents", seeded[0]!.id)).toBeDefined()
    expect(await view(db.sql, "training-records", odd!.id)).toMatchObject({
      expiresAt: null,
      completedAt: "+012026-03-04T05:06:07.000Z"
    })
    const { diff } = await diffAgainstFreshProjection(db)
    expect(diff).toEqual([])
  })

  it("an idle database still moves the slot (heartbeat)", async () => {
    const cap = startCapture(db, { heartbeatMs: 100, slot: `slot_${db.name}` })
    await cap.settle(60_000)
    const slotLsn = async () => {
      const [r] = await db.sql<
        { lsn: string }[]
      >`select confirmed_flush_lsn::text as lsn from pg_replication_slots where slot_name = ${`slot_${db.name}`}`
      return parseLsn(r!.lsn)
    }
    // WAL the slot does not publish (the service's own tables) moves the server on.
    await db.sql`insert into service.activity (company_id, kind) select gen_random_uuid(), 'filler' from generate_series(1, 100)`
    const [w] = await db.sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`
    const target = parseLsn(w!.lsn)
    const deadline = Date.now() + 10_000
    while ((await slotLsn()) < target && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
    expect(await slotLsn()).toBeGreaterThanOrEqual(target)
    await cap.stop()
  })

  it("a dropped slot is recreated, the views rebuilt, and the gap said out loud", async () => {
    const slot = `slot_${db.name}`
    const company = await makeCompany(db.sql)
    const gapIncident = await insertIncident(db.sql, company.id)
    await db.sql`select pg_drop_replication_slot(${slot})`
    const missed = await insertIncident(db.sql, company.id)
    const cap = startCapture(db, { slot })
    await cap.settle(60_000)
    const after = await insertIncident(db.sql, company.id)
    await cap.settle()
    await cap.stop()
    const lost = cap.logs.find((l) => l.level === "error")
    expect(lost?.message).toBe("capture slot lost: recreating it and rebuilding every view from the app tables")
    expect(lost?.fields?.reason).toMatch(/was lost/)
    expect(lost?.fields?.consequence).toMatch(/could not be derived/)
    expect(await view(db.sql, "incidents", missed)).toBeDefined()
    const ids = (await outbox(db.sql)).map((e) => e.record_id)
    expect(ids).not.toContain(missed)
    expect(ids).toContain(after)
    void gapIncident
    const [state] = await db.sql<
      { gap_reason: string }[]
    >`select gap_reason from service.capture_state where slot_name = ${slot}`
    expect(state!.gap_reason).toMatch(/lost/)
  })

  /** A company, and capture on this file's slot streaming transactions of more than `changes` changes. */
  const streamingLarge = async (changes: number) => {
    const company = await makeCompany(db.sql)
    const cap = startCapture(db, { slot: `slot_${db.name}`, largeTransaction: changes })
    await cap.settle(60_000)
    return { company, cap }
  }

  it("a transaction larger than memory allows is applied while it streams", { timeout: 120_000 }, async () => {
    const { company, cap } = await streamingLarge(1000)
    const [a] = await db.sql<
      { id: string }[]
    >`insert into app.audits (company_id, title, performed_at) values (${company.id}, 'Big import', now()) returning id::text`
    await db.sql.begin(async (tx) => {
      await tx`
        insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
        select ${company.id}, 'IMP-' || g, 'near_miss', 'Imported ' || g, now(), 'minor' from generate_series(1, 5000) g`
      await tx`insert into app.audit_items (audit_id, position, item, result) select ${a!.id}, g, 'Item ' || g, 'pass' from generate_series(1, 3000) g`
      await tx`update app.incidents set status = 'closed' where company_id = ${company.id} and reference like 'IMP-%'`
    })
    await cap.settle(60_000)
    await cap.stop()
    const [events] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.events e join app.incidents i on i.id = e.record_id where i.reference like 'IMP-%'`
    expect(events!.n).toBe(5000)
    const [closed] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from service.views where resource = 'incidents' and company_id = ${company.id} and body::jsonb->>'status' = 'closed'`
    expect(closed!.n).toBe(5000)
    expect(((await view(db.sql, "audits", a!.id))!.items as unknown[]).length).toBe(3000)
    const payload = await db.sql<{ payload: string }[]>`
      select ${db.sql.unsafe(eventPayload("e"))} as payload from service.events e join app.incidents i on i.id = e.record_id where i.reference = 'IMP-1'`
    expect(JSON.parse(payload[0]!.payload).status).toBe("closed")
  })

  it("a site renamed inside a transaction too large for memory reaches all its inspections", {
    timeout: 120_000
  }, async () => {
    const { company, cap } = await streamingLarge(200)
    const [site] = await db.sql<
      { id: string }[]
    >`insert into app.job_sites (company_id, name) values (${company.id}, 'Yard') returning id::text`
    const [eq] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name, identifier, category, job_site_id)
      values (${company.id}, 'Loader', 'LD-1', 'vehicle', ${site!.id}) returning id::text`
    await db.sql`
      insert into app.inspections (company_id, equipment_id, checklist, performed_by, performed_at, outcome)
      select ${company.id}, ${eq!.id}, 'Daily', 'Ann', now(), 'pass' from generate_series(1, 300) g`
    await cap.settle(60_000)
    await db.sql.begin(async (tx) => {
      await tx`update app.job_sites set name = 'Yard West' where id = ${site!.id}`
      await tx`
        insert into app.incidents (company_id, reference, type, title, occurred_at, severity)
        select ${company.id}, 'YD-' || g, 'near_miss', 'Yard ' || g, now(), 'minor' from generate_series(1, 500) g`
    })
    await cap.settle(60_000)
    await cap.stop()
    const sites = await db.sql<{ site: string; n: number }[]>`
      select body::jsonb->'equipment'->>'jobSite' as site, count(*)::int as n from service.views
      where resource = 'inspections' and company_id = ${company.id} group by 1`
    expect(sites).toEqual([{ site: "Yard West", n: 300 }])
  })

  it("a TRUNCATE inside a transaction too large for memory empties the views and capture goes on", {
    timeout: 120_000
  }, async () => {
    const { company, cap } = await streamingLarge(200)
    const kept = await insertAction(db.sql, company.id)
    await cap.settle(60_000)
    await db.sql.begin(async (tx) => {
      await tx`
        insert into app.training_records (company_id, course, completed_at)
        select ${company.id}, 'Course ' || g, now() from generate_series(1, 500) g`
      await tx`truncate app.training_records`
      await tx`insert into app.training_records (company_id, course, completed_at) values (${company.id}, 'After the truncate', now())`
    })
    const later = await insertIncident(db.sql, company.id)
    await cap.settle(60_000)
    await cap.stop()
    expect(cap.logs.filter((l) => l.level === "retry")).toEqual([])
    const left = await db.sql<
      { course: string }[]
    >`select body::jsonb->>'course' as course from service.views where resource = 'training-records'`
    expect(left.map((r) => r.course)).toEqual(["After the truncate"])
    expect((await view(db.sql, "incidents", later))?.id).toBe(later)
    expect((await view(db.sql, "corrective-actions", kept))?.id).toBe(kept)
  })
})
