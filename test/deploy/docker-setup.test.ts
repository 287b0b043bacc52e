// The Docker demo's DBA step (deploy/docker/initdb/03-setup.sql) is exactly what
// `database setup-sql --role safety_records` prints, so the two cannot drift apart.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { runCli } from "../support/cli.ts"

describe("deploy/docker/initdb/03-setup.sql", () => {
  it("is the printed setup SQL for the compose file's service role", async () => {
    const printed = await runCli(["database", "setup-sql", "--role", "safety_records"], { PUBLICATION: undefined })
    expect(printed.code).toBe(0)
    expect(readFileSync(new URL("../../deploy/docker/initdb/03-setup.sql", import.meta.url), "utf8")).toBe(
      printed.stdout
    )
  })

  it("setup-sql refuses a role name PostgreSQL cannot hold, connecting nowhere", async () => {
    const r = await runCli(["database", "setup-sql", "--role", "x".repeat(64)], {
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none"
    })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("--role: the role name is longer than PostgreSQL's 63-byte names")
  })
})
