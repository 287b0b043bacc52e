// The Docker demo's DBA steps are exactly what `database setup-sql --role safety_records` prints,
// so they cannot drift apart: its app part on the app's server (deploy/docker/initdb/03-setup.sql),
// its service part on the service's own server (deploy/docker/service-initdb/02-setup.sql).
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { runCli } from "../support/cli.ts"

describe("deploy/docker's setup SQL", () => {
  it("is the printed setup SQL for the compose file's service role, each part on its server", async () => {
    for (const [part, file] of [
      ["app", "initdb/03-setup.sql"],
      ["service", "service-initdb/02-setup.sql"]
    ] as const) {
      const printed = await runCli(["database", "setup-sql", "--role", "safety_records", "--part", part], {
        PUBLICATION: undefined
      })
      expect(printed.code).toBe(0)
      expect(readFileSync(new URL(`../../deploy/docker/${file}`, import.meta.url), "utf8")).toBe(printed.stdout)
    }
  })

  it("prints two parts: the app's database gets grants and the publication only, the service's its schema", async () => {
    const [both, app, service] = await Promise.all(
      [[], ["--part", "app"], ["--part", "service"]].map((extra) =>
        runCli(["database", "setup-sql", "--role", "srs", ...extra], { PUBLICATION: undefined })
      )
    )
    for (const r of [both, app, service]) expect(r!.code).toBe(0)
    // The app's part: replication and reading only; nothing of the service's own there.
    expect(app!.stdout).toContain("grant select (id, company_id, name, email, role, created_at) on app.users to srs;")
    expect(app!.stdout).toContain("create publication safety_records_service for table")
    expect(app!.stdout).not.toMatch(/create schema|create extension|create table|grant (create|insert|update|delete)/i)
    // The service's part: its schema and the extension its indexes use; nothing about the app.
    expect(service!.stdout).toContain("create schema if not exists service authorization srs;")
    expect(service!.stdout).toContain("create extension if not exists pg_trgm;")
    expect(service!.stdout).not.toMatch(/grant|publication safety_records_service for|schema app/i)
    // Both, one after the other (one database runs the two).
    const body = (t: string) => t.slice(t.indexOf("-- Part"), t.indexOf("-- Then start"))
    expect(body(both!.stdout)).toBe(body(app!.stdout) + body(service!.stdout))
    const bad = await runCli(["database", "setup-sql", "--role", "srs", "--part", "neither"], {})
    expect(bad.code).toBe(2)
  })

  it("setup-sql refuses a role name PostgreSQL cannot hold, connecting nowhere", async () => {
    const r = await runCli(["database", "setup-sql", "--role", "x".repeat(64)], {
      DATABASE_URL: "postgres://nobody@127.0.0.1:1/none"
    })
    expect(r.code).toBe(1)
    expect(r.stderr).toContain("--role: the role name is longer than PostgreSQL's 63-byte names")
  })
})
