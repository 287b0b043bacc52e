import { describe, expect, it } from "vitest"
import { loadMigrations, migrate } from "../../../src/platform/db/migrate.ts"
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
