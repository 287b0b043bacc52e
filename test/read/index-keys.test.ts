// The views' page indexes are keyed by a resource's number (sql/034): every resource the API
// serves has one, and no two share one, or a list would read another resource's range.
import { describe, expect, it } from "vitest"
import { RESOURCES } from "../../src/domain/resources.ts"
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
})
