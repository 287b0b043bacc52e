// sql/051: the mirror rows and held records' rows a release before 0.3.0 kept of privacy cases
// lose the person's details; every other row, and a row missing a column, stays as it was.
import { describe, expect, it } from "vitest"
import { loadMigrations } from "../../../src/platform/db/migrations.ts"
import { migrate } from "../../../src/platform/db/migrate.ts"
import { useDatabase } from "../../support/fixtures.ts"

const ID = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, "0")}`
const COMPANY = "0c000000-0000-4000-8000-000000000001"

/** An incidents row by position (the columns of src/domain/records/columns.ts, in order). */
const positional = (id: string, privacy: boolean) =>
  JSON.stringify([
    id,
    COMPANY,
    "INC-1",
    "injury",
    "Slip",
    "Fell by the dock",
    "2026-01-01T00:00:00.000Z",
    null,
    "Dock 4",
    "Alex Doe",
    ID(99),
    "knee",
    "bruise",
    "minor",
    privacy,
    false,
    "open",
    null,
    "app",
    "2026-01-01T00:00:00.000Z",
    "2026-01-01T00:00:00.000Z"
  ])

describe("sql/051: privacy cases kept without the person's details", () => {
  const db = useDatabase({ migrated: false })

  it("scrubs them from the mirror (by position or as an object) and from held records' rows, and nothing else", async () => {
    await migrate(
      db.sql,
      loadMigrations().filter((m) => m.number <= 50)
    )
    const rows = [
      { key: ID(1), data: positional(ID(1), true) },
      { key: ID(2), data: positional(ID(2), false) },
      // Missing a column (read while its table did not fit): an object; the absent one stays absent.
      { key: ID(3), data: JSON.stringify({ id: ID(3), person_name: "Sam Roe", privacy_case: true, title: "T" }) },
      { key: ID(4), data: `v${JSON.stringify({ id: ID(4), personName: null, privacyCase: true })}` }
    ]
    for (const r of rows)
      await db.sql`insert into service.rows (tbl, key, company_id, parent_id, data) values ('incidents', ${r.key}, ${COMPANY}, null, ${r.data})`
    await db.sql`
      insert into service.capture_quarantine (lsn, tbl, key, company_id, error, before)
      values ('0/1', 'incidents', ${ID(5)}, ${COMPANY}, 'held', ${JSON.stringify({ id: ID(5), person_name: "Kim Poe", status: "open" })})`
    await migrate(db.sql)
    const after = new Map(
      (await db.sql<{ key: string; data: string }[]>`select key, data from service.rows where tbl = 'incidents'`).map(
        (r) => [r.key, r.data] as const
      )
    )
    const first = JSON.parse(after.get(ID(1))!) as unknown[]
    expect([5, 8, 9, 10, 11, 12].map((i) => first[i])).toEqual([null, null, null, null, null, null])
    expect(first[4]).toBe("Slip")
    expect(first[14]).toBe(true)
    expect(after.get(ID(2))).toBe(rows[1]!.data)
    expect(JSON.parse(after.get(ID(3))!)).toEqual({ id: ID(3), person_name: null, privacy_case: true, title: "T" })
    expect(after.get(ID(4))).toBe(rows[3]!.data)
    const [held] = await db.sql<{ before: string }[]>`select before from service.capture_quarantine`
    expect(JSON.parse(held!.before)).toEqual({ id: ID(5), status: "open" })
    expect([after.get(ID(1)), after.get(ID(3)), held!.before].join()).not.toMatch(
      /Alex Doe|Dock 4|Fell by|Sam Roe|Kim Poe/
    )
  })
})
