// Checks that the server can feed change capture, with messages that name the setting to
// change on the provider it runs on (managed providers grant replication their own ways).
import type { Sql } from "postgres"
import { StartRefused } from "./refusal.ts"

export type Provider = "rds" | "cloudsql" | "azure" | "supabase" | "neon" | "postgres"

/** What the server says about itself; read by `readFacts`, judged by the pure `preflightProblem`. */
export interface ServerFacts {
  readonly version: number
  readonly walLevel: string
  readonly slots: number
  readonly senders: number
  readonly role: string
  readonly superuser: boolean
  /** The REPLICATION attribute. */
  readonly replication: boolean
  /** Member of rds_replication (Amazon RDS and Aurora: the attribute cannot be set there). */
  readonly rdsReplication: boolean
  /** Roles that only exist on one provider, which tell where the server runs. */
  readonly providerRoles: ReadonlyArray<string>
}

const PROVIDER_ROLES: ReadonlyArray<readonly [string, Provider]> = [
  ["rds_superuser", "rds"],
  ["cloudsqlsuperuser", "cloudsql"],
  ["azure_pg_admin", "azure"],
  ["supabase_admin", "supabase"],
  ["neon_superuser", "neon"]
]

export const providerOf = (facts: Pick<ServerFacts, "providerRoles">): Provider =>
  PROVIDER_ROLES.find(([role]) => facts.providerRoles.includes(role))?.[1] ?? "postgres"

export const PROVIDER_NAMES: Readonly<Record<Provider, string>> = {
  rds: "Amazon RDS / Aurora",
  cloudsql: "Cloud SQL",
  azure: "Azure Database for PostgreSQL flexible server",
  supabase: "Supabase",
  neon: "Neon",
  postgres: "PostgreSQL"
}

/** How to get wal_level=logical, on each provider. */
const LOGICAL_WAL: Readonly<Record<Provider, string>> = {
  rds: `Set rds.logical_replication = 1 in the instance's (or Aurora cluster's) custom parameter group; it is static, so reboot. wal_level then reads logical.`,
  cloudsql: `Set the database flag cloudsql.logical_decoding = on (gcloud sql instances patch <instance> --database-flags=cloudsql.logical_decoding=on); the instance restarts.`,
  azure: `Set the server parameter wal_level = logical (portal: Server parameters, or az postgres flexible-server parameter set --name wal_level --value logical) and restart the server.`,
  supabase: `Supabase projects run with wal_level = logical; if this one does not, ask Supabase support to enable logical replication.`,
  neon: `Enable logical replication in the Neon console (Project settings, Logical replication); wal_level then reads logical. It cannot be turned off again.`,
  postgres: `Run "ALTER SYSTEM SET wal_level = logical;" (or set wal_level = logical in postgresql.conf) and restart PostgreSQL.`
}

/** How to give the service's role the right to replicate, on each provider. */
const REPLICATION_RIGHT: Readonly<Record<Provider, (role: string) => string>> = {
  rds: (role) =>
    `On RDS and Aurora the REPLICATION attribute cannot be set: run "GRANT rds_replication TO ${role};" as the master user.`,
  cloudsql: (role) =>
    `Run "ALTER ROLE ${role} WITH REPLICATION;" as a member of cloudsqlsuperuser (e.g. the postgres user).`,
  azure: (role) =>
    `Run "ALTER ROLE ${role} WITH REPLICATION;" as the server's admin user (a member of azure_pg_admin).`,
  supabase: (role) => `Run "ALTER ROLE ${role} WITH REPLICATION;" as the postgres user (SQL editor).`,
  neon: (role) =>
    `Run "ALTER ROLE ${role} WITH REPLICATION;" as the project's owner role (e.g. neondb_owner), or make ${role} in the Neon console, CLI or API, whose roles can replicate (neon_superuser).`,
  postgres: (role) => `Run "ALTER ROLE ${role} WITH REPLICATION;" as a superuser.`
}

/** The first thing that stops capture on this server, as a message naming the fix; null when none. Pure. */
export const preflightProblem = (facts: ServerFacts): string | null => {
  const provider = providerOf(facts)
  const on = provider === "postgres" ? "" : ` (${PROVIDER_NAMES[provider]})`
  if (facts.version < 150000) {
    return `PostgreSQL ${Math.floor(facts.version / 10000)}${on} is too old: change capture needs PostgreSQL 15 or newer (publication column lists).`
  }
  if (facts.walLevel !== "logical") {
    return `PostgreSQL${on} has wal_level=${facts.walLevel}, but change capture needs wal_level=logical. ${LOGICAL_WAL[provider]}`
  }
  if (facts.slots < 1 || facts.senders < 1) {
    return `PostgreSQL${on} allows max_replication_slots=${facts.slots} and max_wal_senders=${facts.senders}; both must be at least 1 (10 is usual). Change them and restart the server.`
  }
  if (!(facts.superuser || facts.replication || facts.rdsReplication)) {
    return `The database role ${facts.role} may not replicate${on}. ${REPLICATION_RIGHT[provider](facts.role)}`
  }
  return null
}

export const readFacts = async (sql: Sql): Promise<ServerFacts> => {
  const [row] = await sql<
    {
      wal_level: string
      version: number
      slots: number
      senders: number
      role: string
      superuser: boolean
      replication: boolean
      rds: boolean | null
      provider_roles: string[]
    }[]
  >`
    select current_setting('wal_level') as wal_level,
           current_setting('server_version_num')::int as version,
           current_setting('max_replication_slots')::int as slots,
           current_setting('max_wal_senders')::int as senders,
           current_user as role,
           r.rolsuper as superuser, r.rolreplication as replication,
           (select pg_has_role(current_user, g.oid, 'member') from pg_roles g where g.rolname = 'rds_replication') as rds,
           array(select rolname::text from pg_roles where rolname = any(${PROVIDER_ROLES.map(([r]) => r)})) as provider_roles
    from pg_roles r where r.rolname = current_user`
  if (!row) throw new StartRefused({ message: "Could not read the server's settings." })
  return {
    version: row.version,
    walLevel: row.wal_level,
    slots: row.slots,
    senders: row.senders,
    role: row.role,
    superuser: row.superuser,
    replication: row.replication,
    rdsReplication: row.rds ?? false,
    providerRoles: row.provider_roles
  }
}

/** Refuses to start (StartRefused) when the server cannot feed change capture. */
export const preflight = async (sql: Sql): Promise<void> => {
  const problem = preflightProblem(await readFacts(sql))
  if (problem !== null) throw new StartRefused({ message: problem })
}

/**
 * The service's own database (SERVICE_DATABASE_URL) needs no replication: only a PostgreSQL
 * its migrations run on, and the right to make its schema there (or a schema a DBA made for it).
 */
export const preflightOwnDatabase = async (sql: Sql): Promise<void> => {
  const [row] = await sql<{ version: number }[]>`select current_setting('server_version_num')::int as version`
  if (row!.version < 150000)
    throw new StartRefused({
      message: `The service's database (SERVICE_DATABASE_URL) runs PostgreSQL ${Math.floor(row!.version / 10000)}; it needs PostgreSQL 15 or newer.`
    })
}
