// Checks that the server can feed change capture, with messages that say what to change.
import type { Sql } from "postgres"

export class PreflightError extends Error {}

export const preflight = async (sql: Sql): Promise<void> => {
  const [row] = await sql<{ wal_level: string; version: number; slots: number; senders: number; replication: boolean }[]>`
    select current_setting('wal_level') as wal_level,
           current_setting('server_version_num')::int as version,
           current_setting('max_replication_slots')::int as slots,
           current_setting('max_wal_senders')::int as senders,
           (select rolreplication or rolsuper from pg_roles where rolname = current_user) as replication`
  if (!row) throw new PreflightError("Could not read the server's settings.")
  if (row.version < 150000) {
    throw new PreflightError(
      `PostgreSQL ${Math.floor(row.version / 10000)} is too old: change capture needs PostgreSQL 15 or newer (publication column lists).`
    )
  }
  if (row.wal_level !== "logical") {
    throw new PreflightError(
      `PostgreSQL has wal_level=${row.wal_level}, but change capture needs wal_level=logical. ` +
        `Run "ALTER SYSTEM SET wal_level = logical;" (or set wal_level = logical in postgresql.conf) and restart PostgreSQL.`
    )
  }
  if (row.slots < 1 || row.senders < 1) {
    throw new PreflightError(
      `PostgreSQL allows max_replication_slots=${row.slots} and max_wal_senders=${row.senders}; both must be at least 1 (10 is usual). Change them and restart PostgreSQL.`
    )
  }
  if (!row.replication) {
    throw new PreflightError(
      `The database user has no REPLICATION privilege. Run "ALTER ROLE <user> WITH REPLICATION;" as a superuser.`
    )
  }
}
