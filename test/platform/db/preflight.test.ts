// Preflight per provider: each managed PostgreSQL grants replication its own way, and the
// message names that provider's setting or statement. Pure: the facts are given.
import { describe, expect, it } from "vitest"
import { preflightProblem, providerOf, type ServerFacts } from "../../../src/platform/db/preflight.ts"

const ok: ServerFacts = {
  version: 180004,
  walLevel: "logical",
  slots: 10,
  senders: 10,
  role: "srs",
  superuser: false,
  replication: true,
  rdsReplication: false,
  providerRoles: []
}

const on = (provider: string): Partial<ServerFacts> =>
  ({
    rds: { providerRoles: ["rds_superuser"] },
    cloudsql: { providerRoles: ["cloudsqlsuperuser"] },
    azure: { providerRoles: ["azure_pg_admin"] },
    supabase: { providerRoles: ["supabase_admin"] },
    neon: { providerRoles: ["neon_superuser"] },
    postgres: {}
  })[provider]!

describe("preflight", () => {
  it.each([
    ["postgres", "ALTER SYSTEM SET wal_level = logical"],
    ["rds", "rds.logical_replication = 1"],
    ["cloudsql", "cloudsql.logical_decoding = on"],
    ["azure", "wal_level = logical (portal: Server parameters"],
    ["supabase", "Supabase"],
    ["neon", "Enable logical replication in the Neon console"]
  ])("%s without logical WAL names its setting", (provider, setting) => {
    const problem = preflightProblem({ ...ok, ...on(provider), walLevel: "replica" })
    expect(problem).toContain("wal_level=replica")
    expect(problem).toContain(setting)
  })

  it.each([
    ["postgres", 'ALTER ROLE srs WITH REPLICATION;" as a superuser'],
    ["rds", "GRANT rds_replication TO srs;"],
    ["cloudsql", "member of cloudsqlsuperuser"],
    ["azure", "server's admin user"],
    ["supabase", "as the postgres user"],
    ["neon", "Neon console, CLI or API"]
  ])("%s without the right to replicate names how to grant it", (provider, grant) => {
    const problem = preflightProblem({ ...ok, ...on(provider), replication: false })
    expect(problem).toContain("The database role srs may not replicate")
    expect(problem).toContain(grant)
  })

  it("accepts RDS's rds_replication membership, which stands in for the REPLICATION attribute", () => {
    expect(preflightProblem({ ...ok, ...on("rds"), replication: false, rdsReplication: true })).toBeNull()
  })

  it.each([
    ["a replicating role", {}],
    ["a superuser", { replication: false, superuser: true }],
    ["PostgreSQL 15", { version: 150010 }]
  ])("accepts %s", (_, facts) => {
    expect(preflightProblem({ ...ok, ...facts })).toBeNull()
  })

  it("refuses PostgreSQL 14 (no publication column lists) and no slots", () => {
    expect(preflightProblem({ ...ok, version: 140011 })).toContain("PostgreSQL 14 is too old")
    expect(preflightProblem({ ...ok, slots: 0 })).toContain("max_replication_slots=0")
  })

  it("tells providers apart by the roles only they have", () => {
    expect(providerOf({ providerRoles: [] })).toBe("postgres")
    expect(providerOf({ providerRoles: ["rds_superuser", "rds_replication"] })).toBe("rds")
    expect(providerOf({ providerRoles: ["neon_superuser"] })).toBe("neon")
  })
})
