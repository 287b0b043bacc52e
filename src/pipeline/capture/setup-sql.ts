// The SQL a DBA runs once so the service can run as a least-privilege role beside the app's
// own tables, in two parts: in the app's database, SELECT on exactly the columns it reads
// (NEVER columns are not granted) and the publication with its column lists; in the service's
// own database (the app's, with one database), its schema owned by the role. Printed by
// `npm run -s admin -- database setup-sql --role <name> [--part app|service]`, which connects
// nowhere. Pure.
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

/** Which part of the setup SQL: the app's database's, the service's own database's, or both (one after the other). */
export type SetupPart = "app" | "service" | "both"
export const SETUP_PARTS: ReadonlyArray<SetupPart> = ["app", "service", "both"]

export const setupSql = (options: {
  readonly role: string
  readonly publication: string
  readonly part?: SetupPart
}): string => {
  const part = options.part ?? "both"
  const role = quoteRole(options.role)
  const publication = ident(options.publication)
  const never = Object.entries(NEVER_COLUMNS)
    .filter(([, cols]) => cols.length > 0)
    .map(([t, cols]) => `--      app.${t}: ${cols.join(", ")}`)
  const header = [
    `-- Safety Records Service: what a DBA runs once so the service runs as role ${role} with least`,
    `-- privilege. Run it as a superuser (on a managed server, the admin user that made the role),`,
    `-- e.g. psql -v ON_ERROR_STOP=1 -d <database> -f setup.sql`,
    `--`,
    `-- Two parts: the first in the app's database (DATABASE_URL), the second in the service's own`,
    `-- database (SERVICE_DATABASE_URL: its mirror, views, outbox, deliveries, keys). With one`,
    `-- database (SERVICE_DATABASE_URL unset), run both in the app's database.`,
    `-- Print one part alone with --part app or --part service.`,
    ``
  ]
  const app = [
    `-- Part 1, in the app's database. It creates nothing in schema app, changes no app table,`,
    `-- and gives the role no schema, no table and no write there: only what following the app`,
    `-- needs (replication, SELECT on the columns it reads for the first snapshot, the publication).`,
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
    `-- 2. Reading the app's tables: SELECT on the columns the service reads, nothing more.`,
    `--    Never granted (never sent, so never read): files, photos, signatures, voice notes,`,
    `--    workers' phones and e-mails, QR codes, medical data:`,
    ...never,
    `grant usage on schema app to ${role};`,
    ...APP_TABLES.map(
      (t) => `grant select (${PUBLISHED_COLUMNS[t]!.map(ident).join(", ")}) on app.${ident(t)} to ${role};`
    ),
    ``,
    `-- 3. The publication capture reads: the same columns, NEVER columns left out, so they never`,
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
    ``
  ]
  const service = [
    `-- Part 2, in the service's own database (or, with one database, the app's). There the role`,
    `-- needs LOGIN only, no REPLICATION; on a server of its own, make it there too:`,
    `--      create role ${role} with login password '...';`,
    `-- (Or make the role this database's owner: its migrations then make both below themselves.)`,
    ``,
    `begin;`,
    ``,
    `-- 4. The service's own schema, owned by the role: its migrations make everything inside.`,
    `create schema if not exists service authorization ${role};`,
    ``,
    `-- 5. Trigram indexes for the name filters (pg_trgm, a trusted extension every provider offers).`,
    `create extension if not exists pg_trgm;`,
    ``,
    `commit;`,
    ``
  ]
  const footer = [
    `-- Then start the service with DATABASE_URL=postgres://${options.role}:<password>@<host>/<the app's database>`,
    `-- and SERVICE_DATABASE_URL=postgres://${options.role}:<password>@<host>/<the service's database>`,
    `-- (DATABASE_URL alone with one database; PUBLICATION=${publication} unless that is the default).`,
    `-- It creates its replication slot itself.`
  ]
  const lines = [...header, ...(part === "service" ? [] : app), ...(part === "app" ? [] : service), ...footer]
  return `${lines.join("\n")}\n`
}
