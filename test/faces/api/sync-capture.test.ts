// Keeping a copy in step (docs/integrators.md#keeping-a-copy-in-step) end to end: the app's rows
// change, real capture projects them, and a client syncs through the real server. A record whose
// child changed (audit items) and a record without updatedAt (inspections) show up in a sync by
// change time; deletions are listed as the key may read them, oldest first, and pruned after 30
// days. Lists and deletions are read through the typed client (client/), whose sync() is run too.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { purgeOld } from "../../../src/webhooks/engine/housekeeping-queries.ts"
import { rebuildViews } from "../../../src/pipeline/capture/rebuild.ts"
import { startCapture, type RunningCapture } from "../../support/capture.ts"
import { insertIncident } from "../../support/app.ts"
import { createCompany, NEVER_MARK, type TestCompany } from "../../support/views.ts"
import { SafetyRecordsClient, type Deletion } from "../../../client/src/index.ts"
import {
  checkedClient,
  checkedFetch,
  makeKey,
  openApiChecker,
  request,
  type CheckedClient
} from "../../support/http.ts"
import { useServiceWorld } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

describe("sync through capture", () => {
  let acme: TestCompany
  let other: TestCompany
  const world = useServiceWorld({
    // Companies in the app only: capture mirrors them, as it does in production.
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Capture Sync", mirrored: false })
      other = await createCompany(sql, { name: "Other Capture Sync", mirrored: false })
    },
    receiver: false,
    settings: { rateLimit: 1_000_000 }
  })
  const { db, server } = world
  // The running capture: one test stops it and starts another.
  let cap: RunningCapture
  let api: CheckedClient
  let key: string
  let client: SafetyRecordsClient

  beforeAll(async () => {
    cap = world.cap
    const checker = await openApiChecker((await request(server.url, "/api/v1/openapi.json")).json)
    api = checkedClient(server.url, checker, NEVER_MARK)
    key = (await makeKey(db, acme)).key
    // The typed client (client/), every answer checked against the document.
    client = new SafetyRecordsClient({
      baseUrl: server.url,
      apiKey: key,
      fetch: checkedFetch(checker, NEVER_MARK).fetch
    })
  })

  afterAll(() => cap?.stop())

  /** Every record changed after `since` (none: all), by walking the sorted list with the client; and where the next sync starts. */
  const sync = async (resource: "audits" | "inspections", since: string | null) => {
    const records: Array<any> = []
    let cursor: string | null = null
    let next: string | null = null
    do {
      const page: { data: ReadonlyArray<unknown>; nextCursor: string | null; nextUpdatedAfter?: string | null } =
        await client.listPage(resource, {
          sort: "updatedAt",
          limit: 2,
          ...(since === null ? {} : { updatedAfter: since }),
          ...(cursor === null ? {} : { cursor })
        })
      records.push(...page.data)
      cursor = page.nextCursor
      next = page.nextUpdatedAfter ?? null
    } while (cursor !== null)
    return { records, next }
  }

  it("an audit whose item changed shows up in the next sync, its updatedAt unchanged; so does its own change", async () => {
    // Each audit with its items in one transaction, as the app writes them.
    const audits = await db.sql.begin(async (tx) => {
      const made = await tx<{ id: string }[]>`
        insert into app.audits (company_id, title, performed_at)
        select ${acme.id}, 'Site walk ' || g, now() from generate_series(1, 3) g returning id::text`
      for (const a of made) {
        await tx`insert into app.audit_items (audit_id, position, item, result) values (${a.id}, 1, 'Guard rails', 'pass'), (${a.id}, 2, 'Exits', 'pass')`
      }
      return made
    })
    await cap.settle()
    const first = await sync("audits", null)
    expect(first.records.map((r) => r.id).sort()).toEqual(audits.map((a) => a.id).sort())
    expect(first.next).toBe(first.records.at(-1).updatedAt)
    expect((await sync("audits", first.next)).records).toEqual([])

    // A child row: the audit's own row, and so its updatedAt, does not change.
    const target = audits[1]!.id
    await db.sql`update app.audit_items set result = 'fail', note = 'Rail loose' where audit_id = ${target} and position = 1`
    await cap.settle()
    const second = await sync("audits", first.next)
    expect(second.records.map((r) => r.id)).toEqual([target])
    expect(second.records[0].items[0]).toMatchObject({ result: "fail", note: "Rail loose" })
    expect(second.records[0].updatedAt).toBe(first.records.find((r) => r.id === target).updatedAt)
    expect(second.next! > first.next!).toBe(true)
    // A client that stored the record's updatedAt instead gets it again (never misses it).
    expect((await sync("audits", second.records[0].updatedAt)).records.map((r) => r.id)).toContain(target)
    expect((await sync("audits", second.next)).records).toEqual([])

    // The audit's own change brings a new updatedAt: that is its change time.
    await db.sql`update app.audits set notes = 'Reviewed', updated_at = now() + interval '1 hour' where id = ${audits[0]!.id}`
    await cap.settle()
    const third = await sync("audits", second.next)
    expect(third.records.map((r) => [r.id, r.notes])).toEqual([[audits[0]!.id, "Reviewed"]])
    expect(third.next).toBe(third.records[0].updatedAt)
  })

  it("an inspection (no updatedAt) shows up when it or the equipment name inside it changes", async () => {
    const [equipment] = await db.sql<{ id: string }[]>`
      insert into app.equipment (company_id, name) values (${acme.id}, 'Forklift 1') returning id::text`
    const [inspection] = await db.sql<{ id: string }[]>`
      insert into app.inspections (company_id, equipment_id, performed_at, outcome) values (${acme.id}, ${equipment!.id}, now(), 'pass') returning id::text`
    await cap.settle()
    const first = await sync("inspections", null)
    expect(first.records.map((r) => r.id)).toEqual([inspection!.id])
    expect(first.next).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    await db.sql`update app.inspections set notes = 'Brakes checked' where id = ${inspection!.id}`
    await cap.settle()
    const second = await sync("inspections", first.next)
    expect(second.records.map((r) => r.notes)).toEqual(["Brakes checked"])
    await db.sql`update app.equipment set name = 'Forklift A' where id = ${equipment!.id}`
    await cap.settle()
    const third = await sync("inspections", second.next)
    expect(third.records.map((r) => r.equipment.name)).toEqual(["Forklift A"])
    expect(third.next! > second.next!).toBe(true)
  })

  it("deletions: oldest first, of what the key may read (scope, module, company), cursor-paged, since inclusive", async () => {
    const incidents = [
      await insertIncident(db.sql, acme.id),
      await insertIncident(db.sql, acme.id),
      await insertIncident(db.sql, acme.id)
    ]
    const [observation] = await db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at) values (${acme.id}, 'unsafe_act', 'No helmet', now()) returning id::text`
    const foreign = await insertIncident(db.sql, other.id)
    await cap.settle()
    const kept = await insertIncident(db.sql, acme.id)
    // One deletion per transaction, each in a millisecond of its own: each keeps its commit
    // time, also when capture applies them in one batch (it is stopped meanwhile).
    await cap.stop()
    for (const id of incidents) {
      await db.sql`delete from app.incidents where id = ${id}`
      await new Promise((r) => setTimeout(r, 3))
    }
    await db.sql`delete from app.observations where id = ${observation!.id}`
    await db.sql`delete from app.incidents where id = ${foreign}`
    cap = startCapture(db)
    await cap.settle()

    const all = await api.get("/api/v1/deletions", { key })
    expect(all.status).toBe(200)
    expect(all.json.data.map((d: any) => [d.resource, d.id])).toEqual([
      ...incidents.map((id) => ["incidents", id]),
      ["observations", observation!.id]
    ])
    expect(all.json.nextCursor).toBeNull()
    const times = all.json.data.map((d: any) => d.deletedAt as string)
    expect(new Set(times).size).toBe(4)
    expect([...times].sort()).toEqual(times)
    for (const t of times) expect(t).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(JSON.stringify(all.json)).not.toContain(kept)

    // One at a time (the client follows nextCursor): each exactly once.
    const paged: Array<string> = []
    for await (const d of client.deletions({ resource: "incidents", limit: 1 })) paged.push(d.id)
    expect(paged).toEqual(incidents)
    // since is inclusive: the last deletion seen comes again.
    const since = await api.get(`/api/v1/deletions?since=${times[1]}`, { key })
    expect(since.json.data.map((d: any) => d.id)).toEqual([incidents[1], incidents[2], observation!.id])

    // Another key of the company that reads observations only; the other company's key.
    const observer = (await makeKey(db, acme, { scopes: ["observations"] })).key
    expect((await api.get("/api/v1/deletions", { key: observer })).json.data.map((d: any) => d.id)).toEqual([
      observation!.id
    ])
    const refused = await api.get("/api/v1/deletions?resource=incidents", { key: observer })
    expect([refused.status, refused.json.error]).toEqual([403, "this API key may not read incidents"])
    const otherKey = (await makeKey(db, other)).key
    expect((await api.get("/api/v1/deletions", { key: otherKey })).json.data.map((d: any) => d.id)).toEqual([foreign])

    // A module turned off: its deletions are not listed, and asking for them is a 403.
    await db.sql`update app.company_modules set enabled = false where company_id = ${acme.id} and module = 'observations'`
    await cap.settle()
    expect((await api.get("/api/v1/deletions", { key })).json.data.map((d: any) => d.resource)).toEqual([
      "incidents",
      "incidents",
      "incidents"
    ])
    const off = await api.get("/api/v1/deletions?resource=observations", { key })
    expect([off.status, off.json.error]).toEqual([403, "the observations module is turned off for this company"])
    await db.sql`update app.company_modules set enabled = true where company_id = ${acme.id} and module = 'observations'`
    await cap.settle()

    // A record created again with the same id is no longer deleted.
    await insertIncident(db.sql, acme.id, { id: incidents[0] })
    await cap.settle()
    expect((await api.get("/api/v1/deletions?resource=incidents", { key })).json.data.map((d: any) => d.id)).toEqual(
      incidents.slice(1)
    )
  })

  it("the client's sync: what changed and what was deleted in the app since the last run, and where to go on from", async () => {
    const read = async (since: string | null) => {
      const run = client.sync("observations", since, { limit: 2 })
      const changed: Array<{ id: string; title: string }> = []
      for await (const r of run.changed) changed.push({ id: r.id, title: r.title })
      const deleted: Array<Deletion> = []
      for await (const d of run.deleted) deleted.push(d)
      return { changed, deleted, next: run.next() }
    }
    const made = await db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at)
      select ${acme.id}, 'unsafe_act', 'Observation ' || g, now() from generate_series(1, 5) g returning id::text`
    await cap.settle()
    const first = await read(null)
    expect(first.changed.map((r) => r.id)).toEqual(expect.arrayContaining(made.map((m) => m.id)))
    expect((await read(first.next)).changed).toEqual([])

    // One renamed, one deleted, one new: the next run has exactly those.
    await db.sql`update app.observations set title = 'Renamed', updated_at = now() where id = ${made[0]!.id}`
    await db.sql`delete from app.observations where id = ${made[1]!.id}`
    const [added] = await db.sql<{ id: string }[]>`
      insert into app.observations (company_id, type, title, observed_at) values (${acme.id}, 'unsafe_act', 'Added', now()) returning id::text`
    await cap.settle()
    const second = await read(first.next)
    expect(second.changed).toEqual([
      { id: made[0]!.id, title: "Renamed" },
      { id: added!.id, title: "Added" }
    ])
    expect(second.deleted.map((d) => d.id)).toContain(made[1]!.id)
    const third = await read(second.next)
    expect(third.changed).toEqual([])
    expect(third.deleted.map((d) => d.id)).toEqual([second.deleted.at(-1)!.id]) // since is inclusive
  })

  it("deletions refuse bad parameters and a cursor of another list; tombstones older than 30 days go", async () => {
    for (const [query, message] of [
      ["resource=nope", /^query parameter "resource" must be one of incidents, /],
      ["since=2026-02-30", /^query parameter "since" must be a date/],
      ["limit=0", /^query parameter "limit" must be an integer from 1 to 200/],
      ["status=open", /^unknown query parameter "status"; this list takes resource, since, limit, cursor$/]
    ] as const) {
      const a = await api.get(`/api/v1/deletions?${query}`, { key })
      expect(a.status).toBe(400)
      expect(a.json.error).toMatch(message)
    }
    const page = await api.get("/api/v1/deletions?limit=1", { key })
    const mixed = await api.get(`/api/v1/deletions?limit=1&resource=observations&cursor=${page.json.nextCursor}`, {
      key
    })
    expect([mixed.status, mixed.json.error]).toEqual([400, expect.stringMatching(/^cursor belongs to another list/)])
    const fromList = await api.get("/api/v1/audits?limit=1", { key })
    expect((await api.get(`/api/v1/deletions?cursor=${fromList.json.nextCursor}`, { key })).status).toBe(400)

    // Old tombstones are not listed, and retention removes them.
    const old = randomUUID()
    await db.sql`insert into service.deletions (resource, id, company_id, deleted_at) values ('incidents', ${old}, ${acme.id}, now() - interval '31 days')`
    expect(JSON.stringify((await api.get("/api/v1/deletions?since=2000-01-01", { key })).json)).not.toContain(old)
    const before = await db.sql`select 1 from service.deletions`
    await purgeOld(db.sql, new Date(Date.now() - 30 * 86_400_000))
    expect(await db.sql`select 1 from service.deletions where id = ${old}`).toHaveLength(0)
    expect(await db.sql`select 1 from service.deletions`).toHaveLength(before.length - 1)
  })
  it("rebuild-views keeps the change time of views it leaves alone, moves it for views it rewrites, and leaves tombstones", async () => {
    const times = async () =>
      new Map(
        (
          await db.sql<
            { id: string; t: string }[]
          >`select id::text, changed_at::text as t from service.views where company_id = ${acme.id}`
        ).map((r) => [r.id, r.t] as const)
      )
    const before = await times()
    const [stale] = await db.sql<{ id: string; changed: Date }[]>`
      update service.views set body = '{"stale":true}'
      where (resource, id) = (select resource, id from service.views where resource = 'audits' and company_id = ${acme.id} order by id limit 1)
      returning id::text, changed_at as changed`
    const ghost = randomUUID()
    await db.sql`insert into service.views (resource, id, company_id, created_at, body) values ('audits', ${ghost}, ${acme.id}, now(), '{"ghost":true}')`
    const [state] = await db.sql<{ at: Date }[]>`select last_commit_at as at from service.capture_state`
    const r = await runSql(db.sql, rebuildViews())
    expect([r.changed, r.removed]).toEqual([1, 1])
    const after = await times()
    for (const [id, t] of before) if (id !== stale!.id) expect([id, after.get(id)]).toEqual([id, t])
    // The rewritten view changed when the mirror it was rebuilt from did, and never backwards.
    const moved = new Date(after.get(stale!.id)!)
    expect(moved.getTime()).toBe(Math.max(stale!.changed.getTime() + 1, Math.trunc(state!.at.getTime())))
    const gone = await api.get("/api/v1/deletions?resource=audits", { key })
    expect(gone.json.data.map((d: any) => d.id)).toEqual([ghost])
  })
})
