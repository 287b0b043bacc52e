// The views' page indexes are keyed by a resource's number (sql/034): every resource the API
// serves has one, and no two share one, or a list would read another resource's range. The
// database's functions are made from the code's one list (src/platform/db/declared.ts).
import { describe, expect, it } from "vitest"
import { CHILD_RECORDS, RESOURCE_INFO, RESOURCE_NUMBER, RESOURCES } from "../../src/domain/resources.ts"
import { syncDeclared } from "../../src/platform/db/declared.ts"
import { useDatabase } from "../support/fixtures.ts"

describe("service.resource_no", () => {
  const db = useDatabase()

  it("numbers every resource, each its own", async () => {
    const rows = await db.sql<{ resource: string; no: number | null }[]>`
      select r as resource, service.resource_no(r) as no from unnest(${[...RESOURCES]}::text[]) as r`
    expect(rows.every((r) => r.no !== null)).toBe(true)
    expect(new Set(rows.map((r) => r.no)).size).toBe(RESOURCES.length)
    const [unknown] = await db.sql<{ no: number | null }[]>`select service.resource_no('not-a-resource') as no`
    expect(unknown!.no).toBeNull()
  })

  it("are the code's list: the resources' numbers and the tables their views may stand for", async () => {
    const rows = await db.sql<{ resource: string; no: number; tbl: string | null }[]>`
      select r as resource, service.resource_no(r) as no, service.view_backed_table(r) as tbl
      from unnest(${[...RESOURCES]}::text[]) as r`
    for (const r of rows) {
      const resource = r.resource as (typeof RESOURCES)[number]
      expect(r.no).toBe(RESOURCE_NUMBER[resource])
      expect(r.tbl).toBe(CHILD_RECORDS.has(resource) ? null : RESOURCE_INFO[resource].table)
    }
  })

  it("are made again when the code lists more resources than they do, never when it lists fewer", async () => {
    await db.sql`comment on function service.resource_no(text) is 'resources: 13'`
    await db.sql`create or replace function service.view_backed_table(resource text) returns text language sql immutable as $$ select null::text $$`
    expect(await db.sql.begin((tx) => syncDeclared(tx))).toBe(true)
    const [made] = await db.sql<{ tbl: string | null }[]>`select service.view_backed_table('incidents') as tbl`
    expect(made!.tbl).toBe("incidents")
    // A longer list there (a newer release's) is left as it is.
    await db.sql`comment on function service.resource_no(text) is 'resources: 99'`
    expect(await db.sql.begin((tx) => syncDeclared(tx))).toBe(false)
    await db.sql.unsafe(`comment on function service.resource_no(text) is 'resources: ${RESOURCES.length}'`)
  })
})
