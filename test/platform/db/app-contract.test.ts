// The app's tables are checked at start, never created or changed: each missing table or
// column, unreadable column, wrong type or unfollowable identity is named app.table.column.
import { describe, expect, it } from "vitest"
import {
  checkAppContract,
  contractProblems,
  readAppTables,
  type FoundTable
} from "../../../src/platform/db/app-contract.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("the app contract on a real database", () => {
  const db = useDatabase()

  it("the demo's tables (sql/demo/app.sql) fit what the service reads", async () => {
    await expect(checkAppContract(db.sql)).resolves.toEqual([])
  })

  it("names a renamed column and a changed type without refusing (capture holds those tables), and refuses a lost primary key", async () => {
    await db.sql`alter table app.permits rename column status to state`
    await db.sql`alter table app.sds alter column hazard_classes type text using array_to_string(hazard_classes, ',')`
    expect([...(await checkAppContract(db.sql))].sort()).toEqual([
      "app.permits.status is missing (read as text)",
      "app.sds.hazard_classes is text; the service reads it as text[]"
    ])
    await db.sql`alter table app.audit_items drop constraint audit_items_pkey cascade`
    const error = await checkAppContract(db.sql).then(
      () => null,
      (e: Error) => e
    )
    expect(error?.message).toContain("app.audit_items has no primary key")
    expect(error?.message).not.toContain("app.permits")
    expect(error?.message).not.toContain("app.workers")
  })

  it("accepts what reads the same: varchar for text, an enum for text, bigint for integer", async () => {
    await db.sql`create type app.country as enum ('NL', 'US')`
    await db.sql`alter table app.job_sites alter column country type app.country using country::app.country`
    await db.sql`alter table app.workers alter column name type varchar(200)`
    await db.sql`alter table app.inspection_items alter column position type bigint`
    const found = await readAppTables(db.sql)
    const problems = contractProblems(found, "srs").filter((p) => /job_sites|workers|inspection_items/.test(p))
    expect(problems).toEqual([])
  })
})

describe("contractProblems", () => {
  const table = (columns: Record<string, string>, identity: Partial<FoundTable> = {}): FoundTable => ({
    columns: new Map(Object.entries(columns).map(([c, type]) => [c, { type, isEnum: false, readable: true }])),
    replicaIdentity: "d",
    identityColumns: ["id"],
    ...identity
  })

  it("names a missing table, an unreadable column, and FULL or NOTHING identities", () => {
    const found = new Map<string, FoundTable>([
      [
        "companies",
        table(
          {
            id: "uuid",
            name: "text",
            host: "text",
            tier: "text",
            api_enabled: "boolean",
            created_at: "timestamp with time zone"
          },
          { replicaIdentity: "f" }
        )
      ],
      [
        "users",
        table(
          {
            id: "uuid",
            company_id: "uuid",
            name: "text",
            email: "text",
            role: "text",
            created_at: "timestamp without time zone"
          },
          { replicaIdentity: "n" }
        )
      ]
    ])
    const unreadable = new Map(found.get("companies")!.columns)
    unreadable.set("host", { type: "text", isEnum: false, readable: false })
    found.set("companies", { ...found.get("companies")!, columns: unreadable })
    const problems = contractProblems(found, "srs")
    expect(problems).toContain("app.job_sites is missing")
    expect(problems).toContain("app.companies.host cannot be read by role srs (no SELECT on it)")
    expect(problems).toContain(
      "app.users.created_at is timestamp without time zone; the service reads it as timestamptz"
    )
    expect(problems.find((p) => p.startsWith("app.companies has REPLICA IDENTITY FULL"))).toBeDefined()
    expect(problems.find((p) => p.startsWith("app.users has REPLICA IDENTITY NOTHING"))).toBeDefined()
  })
})
