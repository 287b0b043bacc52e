// A command whose database stops answering while it works (stopped, restarting, gone) ends with
// one plain line saying so and exit 1: no stack trace, and what it wrote before stays written.
import { describe, expect, it } from "vitest"
import { connect } from "../../../src/platform/db/Database.ts"
import { prepareDemoDatabase } from "../../../src/platform/db/demo-schema.ts"
import { isDatabaseUnavailable } from "../../../src/platform/db/stray-failures.ts"
import { runCli } from "../../support/cli.ts"
import { useRestartableServer } from "../../support/fixtures.ts"
import { waitFor } from "../../support/wait.ts"

describe("the CLI when the database goes away mid-command", () => {
  const server = useRestartableServer("srs-cli-gone-")

  it("says the database stopped answering, in one line, and exits 1", { timeout: 120_000 }, async () => {
    const sql = connect(server.url, 1)
    try {
      await prepareDemoDatabase(sql)
      // A held record; no capture runs, so `retry` waits for its request to be applied.
      await sql`
        insert into service.capture_quarantine (lsn, tbl, key, error) values ('0/1', 'audits', gen_random_uuid()::text, 'held for the test')`
    } finally {
      await sql.end({ timeout: 2 })
    }
    const running = runCli(["capture", "quarantine", "retry", "--all"], { DATABASE_URL: server.url })
    const watch = connect(server.url, 1)
    try {
      // Connected (whether it has sent its request yet or waits for capture, the database then goes).
      await waitFor(
        async () =>
          (
            await watch<{ n: number }[]>`
              select count(*)::int as n from pg_stat_activity
               where application_name like 'safety-records-service%' and pid <> pg_backend_pid()`
          )[0]!.n > 0,
        "the command connected"
      )
      await new Promise((r) => setTimeout(r, 1000))
    } finally {
      await watch.end({ timeout: 2 })
    }
    await server.stop()
    const r = await running
    await server.start()
    expect(r.code).toBe(1)
    expect(r.stderr.trim()).toMatch(
      /^error: the database stopped answering \(.+\): what the command wrote before stays written/
    )
    expect(r.stderr.trim().split("\n")).toHaveLength(1)
    expect(r.stderr).not.toContain("    at ")
  })

  it("tells a database that is not there from other failures", () => {
    const coded = (code: string) => Object.assign(new Error(code), { code })
    expect(isDatabaseUnavailable(coded("ECONNREFUSED"))).toBe(true)
    expect(isDatabaseUnavailable(coded("CONNECTION_CLOSED"))).toBe(true)
    expect(isDatabaseUnavailable(coded("57P01"))).toBe(true) // admin_shutdown
    expect(isDatabaseUnavailable(coded("57P03"))).toBe(true) // cannot_connect_now
    expect(isDatabaseUnavailable(coded("23505"))).toBe(false) // unique_violation
    expect(isDatabaseUnavailable(coded("42P01"))).toBe(false)
    expect(isDatabaseUnavailable("57P01")).toBe(false)
  })
})
