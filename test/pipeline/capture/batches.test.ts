// Capture prepares a batch while the one before is still being written (docs/design.md, "Capture
// pipelines its batches"): the prepared batch reads the earlier one's final state, the checkpoint
// guards against a second writer, a view is shaped once while nothing it shows changes, and a view
// whose bytes did not change is not written again.
import { randomUUID } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  advanceCheckpoint,
  CheckpointMoved,
  confirmCheckpoint,
  readState
} from "../../../src/pipeline/capture/checkpoint.ts"
import { Resync } from "../../../src/pipeline/capture/resync.ts"
import { pipelinedCommit } from "../../../src/platform/db/pipelined.ts"
import { mirrorChanges } from "../../../src/pipeline/capture/step/mirror.ts"
import { CaptureProfile, PHASES } from "../../../src/pipeline/capture/profile.ts"
import { parseLsn } from "../../../src/platform/db/lsn.ts"
import { project, Projections } from "../../../src/pipeline/projection/project.ts"
import { Store } from "../../../src/pipeline/projection/store.ts"
import { mirrorWrites } from "../../../src/pipeline/projection/write.ts"
import { simulate } from "../../../src/seed/simulate.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { catchUp, startCapture } from "../../support/capture.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { useDatabase, useDemoDatabase } from "../../support/fixtures.ts"

const A = randomUUID()
const B = randomUUID()
const C = randomUUID()
const item = (id: string, audit: string, position: number) => ({
  id,
  audit_id: audit,
  position,
  item: `Item ${position}`,
  result: "pass",
  note: null
})

describe("a batch prepared while the one before is written", () => {
  const db = useDatabase()

  it("reads the earlier batch's final state: the same answers before and after that batch commits", async () => {
    const company = randomUUID()
    const row = (tbl: string, key: string, parent: string | null, data: Record<string, unknown>) => ({
      tbl,
      key,
      company_id: tbl === "audit_items" || tbl === "policy_acknowledgements" ? null : company,
      parent_id: parent,
      data: JSON.stringify(data)
    })
    const [i1, i2, i3, k1, k2] = [randomUUID(), randomUUID(), randomUUID(), randomUUID(), randomUUID()]
    const P = randomUUID()
    const rows = [
      row("audits", A, null, { id: A, company_id: company, title: "A" }),
      row("audits", B, null, { id: B, company_id: company, title: "B" }),
      row("audit_items", i1, A, item(i1, A, 1)),
      row("audit_items", i2, A, item(i2, A, 2)),
      row("audit_items", i3, B, item(i3, B, 1)),
      row("policy_acknowledgements", k1, P, { id: k1, policy_id: P }),
      row("policy_acknowledgements", k2, P, { id: k2, policy_id: P })
    ]
    await db.sql`insert into service.rows ${db.sql(rows)}`

    // The earlier batch: item 1 moves from A to B, item 2 goes, a new item comes under B,
    // audit C is new, one acknowledgement goes and one comes.
    const first = new Store(db.sql)
    await first.loadKeys([
      ["audits", A],
      ["audits", B],
      ["audits", C],
      ["audit_items", i1],
      ["audit_items", i2],
      ["policy_acknowledgements", k1]
    ])
    await first.loadChildren("audit_items", [A, B])
    const i4 = randomUUID()
    const k3 = randomUUID()
    first.absent([
      ["audit_items", i4],
      ["policy_acknowledgements", k3]
    ])
    first.apply("audit_items", i1, { ...item(i1, B, 3) })
    first.apply("audit_items", i2, null)
    first.apply("audit_items", i4, item(i4, B, 4))
    first.apply("audits", C, { id: C, company_id: company, title: "C" })
    first.apply("policy_acknowledgements", k1, null)
    first.apply("policy_acknowledgements", k3, { id: k3, policy_id: P })
    first.seal()

    // What the next batch reads, three ways: the earlier one not yet written; written and
    // still laid over; written and read alone.
    const read = async (prior: Store | null) => {
      const s = new Store(db.sql, prior)
      await s.loadKeys([
        ["audits", A],
        ["audits", C],
        ["audit_items", i1],
        ["audit_items", i2],
        ["audit_items", i3]
      ])
      await s.loadChildren("audit_items", [A, B, C])
      await s.loadChildCounts("policy_acknowledgements", [P])
      const keys = (parent: string) =>
        s
          .childrenOf("audit_items", parent)
          .map((r) => r.key)
          .sort()
      return {
        rows: [
          s.get("audits", A)?.data.title,
          s.get("audits", C)?.data.title,
          s.get("audit_items", i1)?.parentId,
          s.get("audit_items", i2),
          s.get("audit_items", i3)?.parentId
        ],
        children: { A: keys(A), B: keys(B), C: keys(C) },
        acknowledgements: s.childCount("policy_acknowledgements", P)
      }
    }
    const before = await read(first)
    expect(before).toEqual({
      rows: ["A", "C", B, null, B],
      children: { A: [], B: [i1, i3, i4].sort(), C: [] },
      acknowledgements: 2
    })
    await db.sql.begin((tx) => Promise.all(mirrorWrites(mirrorChanges(first))(tx)))
    expect(await read(first)).toEqual(before)
    expect(await read(null)).toEqual(before)
  })

  it("stores the re-read windows open at the checkpoint with it; a keepalive's move carries them", async () => {
    const slot = `windows_${db.name}`
    await db.sql`insert into service.capture_state (slot_name, checkpoint_lsn) values (${slot}, '0/100')`
    const open = new Resync(slot)
    open.message(JSON.stringify({ id: "run-1", phase: "lo", slot, table: "audits", from: "", to: null, keys: ["k"] }))
    open.note("audits", "k")
    await db.sql.begin((tx) =>
      Promise.all([
        advanceCheckpoint(tx, slot, parseLsn("0/100"), parseLsn("0/200"), new Date(), open.snapshot(parseLsn("0/200")))
      ])
    )
    // Nothing for capture up to 0/280: the keepalive's checkpoint holds the same windows.
    await confirmCheckpoint(db.sql, slot, parseLsn("0/200"), parseLsn("0/280"))
    const state = await readState(db.sql, slot)
    const next = new Resync(slot)
    next.restore(state!.openWindows, state!.checkpoint, parseLsn("0/900"))
    expect(next.open).toBe(1)
    expect(await next.high("run-1", [{ k: "k", d: { id: "k" } }], async () => [])).toMatchObject({
      changes: [],
      again: [["audits", "k"]]
    })
    // A batch with none open clears them.
    await db.sql.begin((tx) =>
      Promise.all([advanceCheckpoint(tx, slot, parseLsn("0/280"), parseLsn("0/300"), new Date(), null)])
    )
    expect((await readState(db.sql, slot))!.openWindows).toBeNull()
  })

  it("moves the checkpoint only from where this process left it; otherwise the batch writes nothing", async () => {
    const slot = `guard_${db.name}`
    await db.sql`insert into service.capture_state (slot_name, checkpoint_lsn) values (${slot}, '0/100')`
    const at = new Date()
    await db.sql.begin((tx) =>
      Promise.all([advanceCheckpoint(tx, slot, parseLsn("0/100"), parseLsn("0/200"), at, null)])
    )
    // A second writer that started from 0/100 too: it fails, and its other statements go with it.
    const company = randomUUID()
    const late = db.sql.begin((tx) =>
      Promise.all([
        advanceCheckpoint(tx, slot, parseLsn("0/100"), parseLsn("0/300"), at, null),
        tx`insert into service.rows (tbl, key, company_id, data) values ('companies', ${company}, ${company}, '{}')`.execute()
      ])
    )
    await expect(late).rejects.toBeInstanceOf(CheckpointMoved)
    const [state] = await db.sql<
      { lsn: string }[]
    >`select checkpoint_lsn::text as lsn from service.capture_state where slot_name = ${slot}`
    expect(state!.lsn).toBe("0/200")
    expect(await db.sql`select 1 from service.rows where key = ${company}`).toHaveLength(0)
    // The same with COMMIT sent before any answer (a batch with nothing to re-shape): the
    // checkpoint's statement fails in the database, so that COMMIT rolls the batch back.
    const pipelined = pipelinedCommit(db.sql, (tx) => [
      advanceCheckpoint(tx, slot, parseLsn("0/100"), parseLsn("0/300"), at, null),
      tx`insert into service.rows (tbl, key, company_id, data) values ('companies', ${company}, ${company}, '{}')`.execute()
    ])
    await expect(pipelined).rejects.toBeInstanceOf(CheckpointMoved)
    expect(await db.sql`select 1 from service.rows where key = ${company}`).toHaveLength(0)
    // From where it does stand, it moves, with the batch's writes.
    await pipelinedCommit(db.sql, (tx) => [
      advanceCheckpoint(tx, slot, parseLsn("0/200"), parseLsn("0/300"), at, null),
      tx`insert into service.rows (tbl, key, company_id, data) values ('companies', ${company}, ${company}, '{}')`.execute()
    ])
    expect(await db.sql`select 1 from service.rows where key = ${company}`).toHaveLength(1)
    const [moved] = await db.sql<
      { lsn: string }[]
    >`select checkpoint_lsn::text as lsn from service.capture_state where slot_name = ${slot}`
    expect(moved!.lsn).toBe("0/300")
  })

  it("shapes a view again only when something it shows changed: the same view as a fresh projection after every change", async () => {
    const company = randomUUID()
    const s = new Store(db.sql)
    const site = randomUUID()
    const equipment = randomUUID()
    const inspection = randomUUID()
    const audit = randomUUID()
    const policy = randomUUID()
    const [it1, it2, ack] = [randomUUID(), randomUUID(), randomUUID()]
    s.absent([
      ["job_sites", site],
      ["equipment", equipment],
      ["inspections", inspection],
      ["audits", audit],
      ["audit_items", it1],
      ["audit_items", it2],
      ["policies", policy],
      ["policy_acknowledgements", ack]
    ])
    await s.loadChildren("audit_items", [audit])
    await s.loadChildren("inspection_items", [inspection])
    await s.loadChildCounts("policy_acknowledgements", [policy])
    const stamps = { created_at: "2026-01-01T00:00:00.000Z", updated_at: "2026-01-01T00:00:00.000Z" }
    const refs = [
      { resource: "inspections", id: inspection },
      { resource: "audits", id: audit },
      { resource: "policies", id: policy },
      { resource: "job-sites", id: site }
    ] as const
    const projections = new Projections(s)
    const steps: Array<() => void> = [
      () => s.apply("job_sites", site, { id: site, company_id: company, name: "Harbour", ...stamps }),
      () =>
        s.apply("equipment", equipment, {
          id: equipment,
          company_id: company,
          name: "Forklift",
          job_site_id: site,
          ...stamps
        }),
      () =>
        s.apply("inspections", inspection, {
          id: inspection,
          company_id: company,
          equipment_id: equipment,
          outcome: "pass",
          created_at: stamps.created_at
        }),
      () => s.apply("audits", audit, { id: audit, company_id: company, title: "Walk", ...stamps }),
      () => s.apply("policies", policy, { id: policy, company_id: company, title: "Helmets", ...stamps }),
      () => s.apply("job_sites", site, { id: site, company_id: company, name: "Harbour East", ...stamps }),
      () => s.apply("audit_items", it1, item(it1, audit, 1)),
      () => s.apply("policy_acknowledgements", ack, { id: ack, policy_id: policy, company_id: company }),
      () =>
        s.apply("equipment", equipment, {
          id: equipment,
          company_id: company,
          name: "Forklift 2",
          job_site_id: site,
          ...stamps
        }),
      () => s.apply("audit_items", it2, item(it2, audit, 2)),
      () => s.apply("audit_items", it1, null),
      () => s.apply("policy_acknowledgements", ack, null),
      () =>
        s.apply("inspections", inspection, {
          id: inspection,
          company_id: company,
          equipment_id: equipment,
          outcome: "fail",
          created_at: stamps.created_at
        })
    ]
    let reused = 0
    for (const step of steps) {
      const earlier = refs.map((r) => projections.get(r))
      step()
      refs.forEach((r, i) => {
        const view = projections.get(r)
        expect(view?.body ?? null).toBe(project(s, r)?.body ?? null)
        if (view !== null && view === earlier[i]) reused++
      })
    }
    // Most steps leave most of the four views as they were: those are not shaped again.
    expect(reused).toBeGreaterThan(20)
  })
})

describe("capture draining in small batches, each prepared while the one before is written", () => {
  const db = useDemoDatabase()

  it("ends with exactly the expected events and views equal to a fresh projection", { timeout: 240_000 }, async () => {
    const slot = `slot_${db.name}`
    await catchUp(db, { slot })
    // Written while capture is stopped: capture then drains it, every batch of a few changes
    // depending on the ones just before (children, counts, names shown elsewhere). First,
    // transactions that each touch a child of the same parents as the one before.
    const [acme] = await db.sql<{ id: string }[]>`select id::text from app.companies where host = 'acme.localhost'`
    const [audit] = await db.sql<
      { id: string }[]
    >`insert into app.audits (company_id, title, performed_at) values (${acme!.id}, 'Chain', now()) returning id::text`
    const [policy] = await db.sql<
      { id: string }[]
    >`insert into app.policies (company_id, title) values (${acme!.id}, 'Chain') returning id::text`
    const [site] = await db.sql<
      { id: string }[]
    >`insert into app.job_sites (company_id, name) values (${acme!.id}, 'Chain') returning id::text`
    const [equipment] = await db.sql<
      { id: string }[]
    >`insert into app.equipment (company_id, name, job_site_id) values (${acme!.id}, 'Chain', ${site!.id}) returning id::text`
    const [inspection] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, performed_at, outcome) values (${acme!.id}, ${equipment!.id}, now(), 'pass') returning id::text`
    const [other] = await db.sql<
      { id: string }[]
    >`insert into app.audits (company_id, title, performed_at) values (${acme!.id}, 'Other', now()) returning id::text`
    for (let i = 1; i <= 12; i++) {
      await db.sql`insert into app.audit_items (audit_id, position, item, result) values (${audit!.id}, ${i}, ${`Item ${i}`}, 'pass')`
      await db.sql`insert into app.inspection_items (inspection_id, position, item, result) values (${inspection!.id}, ${i}, ${`Check ${i}`}, 'pass')`
      await db.sql`insert into app.policy_acknowledgements (policy_id) values (${policy!.id})`
      if (i % 3 === 0)
        await db.sql`update app.audit_items set audit_id = ${other!.id} where audit_id = ${audit!.id} and position = ${i - 1}`
      if (i % 4 === 0)
        await db.sql`delete from app.policy_acknowledgements where id = (select id from app.policy_acknowledgements where policy_id = ${policy!.id} limit 1)`
      if (i % 5 === 0) await db.sql`update app.job_sites set name = ${`Chain ${i}`} where id = ${site!.id}`
    }
    const result = await simulate(db.sql, { rate: Infinity, maxOperations: 1500, company: "acme.localhost", seed: 7 })
    expect(result.failed).toBe(0)
    const profile = new CaptureProfile()
    const cap = startCapture(db, { slot, batchChanges: 5, profile })
    await cap.settle(120_000)
    await cap.stop()
    expect(cap.stats.batches).toBeGreaterThan(100)
    expect(profile.ms.has(PHASES.waiting)).toBe(true)

    // The simulator's events; the chain above made none (children and acknowledgements make
    // none, records made in it none beyond their creation, checked apart).
    const counts = await db.sql<{ event: string; n: number }[]>`
      select event, count(*)::int as n from service.events where record_id <> all(${[audit!.id, policy!.id, inspection!.id, other!.id]}::uuid[]) group by event`
    expect(Object.fromEntries(counts.map((r) => [r.event, r.n]))).toEqual(
      Object.fromEntries(Object.entries(result.events).filter(([, n]) => n > 0))
    )
    const { diff, views } = await diffAgainstFreshProjection(db)
    expect(views).toBeGreaterThan(1000)
    expect(diff).toEqual([])
  })

  it("does not write a view whose bytes did not change: same row version, same change time", async () => {
    const company = await makeCompany(db.sql, { host: "unchanged.test" })
    const incident = await insertIncident(db.sql, company.id)
    const cap = startCapture(db, { slot: `slot_${db.name}` })
    await cap.settle()
    const stored = () => db.sql<{ xmin: string; changed: string }[]>`
      select xmin::text, changed_at::text as changed from service.views where resource = 'incidents' and id = ${incident}`
    const [before] = await stored()
    expect(before).toBeDefined()
    // An update that changes nothing the view shows.
    await db.sql`update app.incidents set title = title where id = ${incident}`
    await cap.settle()
    expect(await stored()).toEqual([before])
    // One that does: the view is written and its change time moves.
    await db.sql`update app.incidents set title = 'Changed', updated_at = now() + interval '1 minute' where id = ${incident}`
    await cap.settle()
    const [after] = await stored()
    expect(after!.xmin).not.toBe(before!.xmin)
    expect(after!.changed > before!.changed).toBe(true)
    await cap.stop()
  })
})
