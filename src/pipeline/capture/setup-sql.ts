// The SQL a DBA runs once so the service can run as a least-privilege role beside the app's
// own tables: its schema owned by the role, SELECT on exactly the columns it reads (NEVER
// columns are not granted), and the publication with its column lists. Printed by
// `npm run -s admin -- database setup-sql --role <name>`, which connects nowhere. Pure.
import { NEVER_COLUMNS, PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { APP_TABLES } from "../projection/tables.ts"
import { createPublicationStatement, ident } from "./publication.ts"

/** A role name as SQL: plain when it can be, else double-quoted. */
export const quoteRole = (name: string): string =>
  /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replaceAll('"', '""')}"`

/** Why a role name cannot be used, or null. */
export const badRoleName = (name: string): string | null =>
  name.trim() === ""
    ? "the role name is empty"
    : Buffer.byteLength(name) > 63
      ? "the role name is longer than PostgreSQL's 63-byte names"
      : // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
        /[\u0000-\u001f\u007f]/.test(name)
        ? "the role name has a control character"
        : null

export const setupSql = (options: { readonly role: string; readonly publication: string }): string => {
  const role = quoteRole(options.role)
  const publication = ident(options.publication)
  const never = Object.entries(NEVER_COLUMNS)
    .filter(([, cols]) => cols.length > 0)
    .map(([t, cols]) => `--      app.${t}: ${cols.join(", ")}`)
  const lines = [
    `-- Safety Records Service: what a DBA runs once, in the app's database, so the service runs`,
    `-- as role ${role} with least privilege. Run it as a superuser (on a managed server, the admin`,
    `-- user that made the role), e.g. psql -v ON_ERROR_STOP=1 -d <the app's database> -f setup.sql`,
    `-- It creates nothing in schema app and changes no app table.`,
    `--`,
    `-- 1. The role itself is not made here (its password is yours). Make it the provider's way:`,
    `--    PostgreSQL, Azure Database for PostgreSQL flexible server (as the server admin), Supabase:`,
    `--      create role ${role} with login replication password '...';`,
    `--    Amazon RDS / Aurora (rds.logical_replication = 1; REPLICATION cannot be set there):`,
    `--      create role ${role} with login password '...';`,
    `--      grant rds_replication to ${role};`,
    `--    Cloud SQL (flag cloudsql.logical_decoding = on), as a member of cloudsqlsuperuser:`,
    `--      create role ${role} with login replication password '...';`,
    `--      (or: gcloud sql users create ${options.role} ...; then: alter role ${role} with replication;)`,
    `--    Neon (logical replication enabled in the project settings): make the role in the`,
    `--      console, CLI or API (such roles can replicate), or as the owner role:`,
    `--      create role ${role} with login password '...'; alter role ${role} with replication;`,
    `--    The role needs nothing else: no superuser, no CREATE on the database.`,
    ``,
    `begin;`,
    ``,
    `-- 2. The service's own schema, owned by the role: its migrations make everything inside.`,
    `create schema if not exists service authorization ${role};`,
    ``,
    `-- 3. Reading the app's tables: SELECT on the columns the service reads, nothing more.`,
    `--    Never granted (never sent, so never read): files, photos, signatures, voice notes,`,
    `--    workers' phones and e-mails, QR codes, medical data:`,
    ...never,
    `grant usage on schema app to ${role};`,
    ...APP_TABLES.map(
      (t) => `grant select (${PUBLISHED_COLUMNS[t]!.map(ident).join(", ")}) on app.${ident(t)} to ${role};`
    ),
    ``,
    `-- 4. Trigram indexes for the name filters (pg_trgm, a trusted extension every provider offers).`,
    `create extension if not exists pg_trgm;`,
    ``,
    `-- 5. The publication capture reads: the same columns, NEVER columns left out, so they never`,
    `--    even reach the change stream. Making it needs the app tables' owner or a superuser.`,
    `--    The service checks it at every start and refuses one that carries more or less.`,
    `do $$`,
    `begin`,
    `  if not exists (select 1 from pg_publication where pubname = '${publication}') then`,
    `    ${createPublicationStatement(publication, ",\n      ")};`,
    `  end if;`,
    `end`,
    `$$;`,
    ``,
    `commit;`,
    ``,
    `-- Then start the service with DATABASE_URL=postgres://${options.role}:<password>@<host>/<database>`,
    `-- (PUBLICATION=${publication} unless that is the default). It creates its replication slot itself.`
  ]
  return `${lines.join("\n")}\n`
}
