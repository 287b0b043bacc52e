// Replicas starting together each find no publication and each create it: the one that loses
// the race uses the winner's publication instead of failing its start.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createPublicationStatement, ensurePublication } from "../../../src/pipeline/capture/publication.ts"
import { freshDatabase, type TestDatabase } from "../../support/db.ts"
import { runSql } from "../../support/sql.ts"

describe("ensurePublication", () => {
  let db: TestDatabase
  beforeAll(async () => {
    db = await freshDatabase()
  })
  afterAll(() => db.drop())

  it("uses the publication another process creates at the same moment", async () => {
    const name = "race_pub"
    // The other process's CREATE is open (uncommitted) when ours starts, so ours waits on the
    // catalog's unique index and fails there once the other commits.
    const other = await db.sql.reserve()
    try {
      await other`begin`
      await other.unsafe(createPublicationStatement(name))
      const ours = runSql(db.sql, ensurePublication(name))
      await waitUntilBlocked(db, name)
      await other`commit`
      expect((await ours).created).toBe(false)
    } finally {
      other.release()
    }
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from pg_publication where pubname = ${name}`
    expect(row!.n).toBe(1)
  })
})

/** Waits until a session of this database waits on a lock, its query creating `name`. */
const waitUntilBlocked = async (db: TestDatabase, name: string) => {
  for (let i = 0; i < 200; i++) {
    const rows =
      await db.sql`select 1 from pg_stat_activity where datname = ${db.name} and wait_event_type = 'Lock' and query ilike ${`create publication ${name}%`}`
    if (rows.length > 0) return
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error("the second CREATE PUBLICATION never waited on the first")
}
