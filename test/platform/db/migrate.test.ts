import { compareReleases, RELEASE } from "../../../src/platform/release.ts"
import { describe, expect, it } from "vitest"
import { loadMigrations, migrate, type MigrationEvent } from "../../../src/platform/db/migrate.ts"
import { parseMigration } from "../../../src/platform/db/migrations.ts"
import { connect } from "../../../src/platform/db/Database.ts"
import { ensureDemoAppSchema } from "../../../src/platform/db/demo-schema.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("migrations", () => {
  const db = useDatabase({ migrated: false })

  it("two processes at once apply each migration exactly once", async () => {
    const a = connect(db.url, 2)
    const b = connect(db.url, 2)
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)])
      const all = loadMigrations().map((m) => m.name)
      expect([...ra, ...rb].sort()).toEqual(all.sort())
      expect(ra.length === 0 || rb.length === 0).toBe(true)
      const rows = await db.sql<{ name: string }[]>`select name from service.schema_migrations order by name`
      expect(rows.map((r) => r.name)).toEqual(all)
    } finally {
      await Promise.all([a.end(), b.end()])
    }
  })

  it("a second run is a no-op", async () => {
    expect(await migrate(db.sql)).toEqual([])
  })

  it("refuses a migration that was edited after it was applied", async () => {
    const edited = loadMigrations().map((m, i) => (i === 0 ? { ...m, checksum: "different" } : m))
    await expect(migrate(db.sql, edited)).rejects.toThrow(/was changed after it was applied/)
  })

  it("touch only the service's schema: no app schema appears", async () => {
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from pg_namespace where nspname = 'app'`
    expect(row!.n).toBe(0)
  })
})

describe("migrations run online", () => {
  const db = useDatabase({ migrated: false })
  const upTo = (n: number) => loadMigrations().filter((m) => m.number <= n)
  const at = (number: number, sql: string) => parseMigration(`${number}_test.sql`, sql)

  it("each commits on its own: one that fails leaves those before it applied and nothing of itself", async () => {
    await expect(
      migrate(db.sql, [
        ...upTo(11),
        at(901, "create table service.t1 (a int);"),
        at(902, "create table service.t2 (a int); select 1/0;")
      ])
    ).rejects.toThrow(/division by zero/)
    const names = await db.sql<{ name: string }[]>`select name from service.schema_migrations where name like '90%'`
    expect(names.map((r) => r.name)).toEqual(["901_test.sql"])
    const [t2] = await db.sql<{ ok: boolean }[]>`select to_regclass('service.t2') is not null as ok`
    expect(t2!.ok).toBe(false)
    const [fence] = await db.sql<{ generation: number }[]>`select generation from service.schema_fence`
    expect(fence!.generation).toBe(901)
  })

  it("a steps migration resumes at the step a run was cut short in", async () => {
    const steps = at(
      903,
      `-- migrate: steps
create table service.s (n int);
insert into service.s values (1);
create index concurrently if not exists s_n on service.s (n);
insert into service.s_flag values (1);`
    )
    await expect(migrate(db.sql, [...upTo(11), steps])).rejects.toThrow(/s_flag/)
    const [progress] = await db.sql<
      { done: number }[]
    >`select done from service.schema_migration_steps where name = ${steps.name}`
    expect(progress!.done).toBe(2)
    await db.sql`create table service.s_flag (n int)`
    expect(await migrate(db.sql, [...upTo(11), steps])).toEqual([steps.name])
    const [rows] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.s`
    expect(rows!.n).toBe(1) // the first step did not run again
    const left = await db.sql`select 1 from service.schema_migration_steps`
    expect(left.length).toBe(0)
  })

  it("an index a concurrent build cut short left invalid is built again", async () => {
    await migrate(db.sql, upTo(11))
    await db.sql`create table service.u (v int)`
    await db.sql`insert into service.u values (1), (1)`
    const unique = at(904, "-- migrate: steps\ncreate unique index concurrently if not exists u_v on service.u (v);")
    await expect(migrate(db.sql, [...upTo(11), unique])).rejects.toThrow(/could not create unique index/)
    const valid = () =>
      db.sql<{ valid: boolean }[]>`select indisvalid as valid from pg_index where indexrelid = 'service.u_v'::regclass`
    expect((await valid())[0]!.valid).toBe(false)
    await db.sql`delete from service.u where ctid = (select max(ctid) from service.u)`
    await migrate(db.sql, [...upTo(11), unique])
    expect((await valid())[0]!.valid).toBe(true)
  })

  it("asks for its locks with a short timeout and tries again, so others queued behind it go on", async () => {
    const holder = await db.sql.reserve()
    const events: MigrationEvent[] = []
    let timedOut: () => void = () => {}
    const firstTimeout = new Promise<void>((resolve) => {
      timedOut = resolve
    })
    try {
      await migrate(db.sql, upTo(11))
      await holder`begin`
      await holder`select count(*) from service.capture_state` // holds ACCESS SHARE until it ends
      const running = migrate(db.sql, [...upTo(11), at(905, "alter table service.capture_state add column z int;")], {
        onEvent: (e) => {
          events.push(e)
          if (e.kind === "lock-timeout") timedOut()
        }
      })
      await firstTimeout
      // A reader arriving while the migration waits is not stuck behind it for as long as the holder holds.
      await db.sql`select count(*) from service.capture_state`
      await holder`commit`
      expect(await running).toEqual(["905_test.sql"])
    } finally {
      holder.release()
    }
    const waits = events.filter((e) => e.kind === "lock-timeout")
    expect(waits.length).toBeGreaterThan(0)
    expect(waits[0]).toMatchObject({ name: "905_test.sql", attempt: 1, timeoutMs: 50 })
  })

  it("gives up after its patience, naming the long transactions in its way", async () => {
    const holder = await db.sql.reserve()
    try {
      await migrate(db.sql, upTo(11))
      await holder`begin`
      await holder`select count(*) from service.capture_state`
      await new Promise((resolve) => setTimeout(resolve, 1_100)) // a long transaction, past a second
      await expect(
        migrate(db.sql, [...upTo(11), at(906, "alter table service.capture_state add column y int;")], {
          lockPatienceMs: 300
        })
      ).rejects.toThrow(
        /906_test\.sql could not take its locks .* long transactions on the service's database: pid \d+/
      )
      await holder`rollback`
    } finally {
      holder.release()
    }
  })
})

describe("the schema fence, as migrations move it", () => {
  const db = useDatabase({ migrated: false })
  const upTo = (n: number) => loadMigrations().filter((m) => m.number <= n)

  it("records the generation reached, and the oldest release that may write, raised by a migration that says so", async () => {
    await migrate(db.sql, upTo(11))
    const read = () =>
      db.sql<{ generation: number; oldest_writer: string; raised_by: string | null }[]>`
        select generation, oldest_writer, raised_by from service.schema_fence`
    expect((await read())[0]).toEqual({ generation: 11, oldest_writer: "0.1.0", raised_by: null })
    await migrate(db.sql)
    // The highest fence a migration raises, by the first migration that raises it.
    const all = loadMigrations()
    const top = all
      .map((m) => m.fence)
      .reduce<string>((a, f) => (f !== null && compareReleases(f, a) > 0 ? f : a), "0.1.0")
    expect((await read())[0]).toEqual({
      generation: Math.max(...all.map((m) => m.number)),
      oldest_writer: top,
      raised_by: all.find((m) => m.fence === top)!.name
    })
  })

  it("refuses a migration that raises it above this build's release", async () => {
    await expect(
      migrate(db.sql, [parseMigration("907_test.sql", "-- migrate: fence 99.0.0\nselect 1;")])
    ).rejects.toThrow(`raises the schema fence to release 99.0.0, newer than this build's ${RELEASE.version}`)
  })
})

describe("the demo's app tables (sql/demo/app.sql)", () => {
  const db = useDatabase({ migrated: false })

  it("are made once, with their allowed values as constraints, and never remade", async () => {
    const made = await Promise.all([ensureDemoAppSchema(db.sql), ensureDemoAppSchema(db.sql)])
    expect(made.sort()).toEqual([false, true])
    const [c] = await db.sql<
      { id: string }[]
    >`insert into app.companies (name, host) values ('X', 'x.test') returning id`
    await expect(
      db.sql`insert into app.corrective_actions (company_id, title, source, status) values (${c!.id}, 't', 'manual', 'done')`
    ).rejects.toThrow(/check constraint/)
    await expect(
      db.sql`insert into app.company_modules (company_id, module) values (${c!.id}, 'nope')`
    ).rejects.toThrow(/check constraint/)
    expect(await ensureDemoAppSchema(db.sql)).toBe(false)
    const [n] = await db.sql<{ n: number }[]>`select count(*)::int as n from app.companies`
    expect(n!.n).toBe(1)
  })
})
