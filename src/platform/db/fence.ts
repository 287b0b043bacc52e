// The schema fence (docs/design.md, "The schema fence"). The service's database records the
// schema generation its migrations reached and the oldest release that may still write to it
// (service.schema_fence). A migration that changes how rows must be written raises that
// release (`-- migrate: fence x.y.z`) in the transaction that changes the rules, so that
// processes of an older release, still running beside the new one, stop writing first.
//
// Two checks, one rule:
// - a process checks the fence when it starts and before each batch it captures and each
//   claim of deliveries (checkFence): too old, it writes nothing more and says which release
//   it is and which the database needs;
// - the database itself refuses a write to the tables below from a process too old to know
//   the rules (fence_guard, a statement trigger), whatever it checked before: a batch that began
//   before the fence rose, or a release older than the fence, which never checks. Every
//   connection of the service says its release (the `srs.release` setting, set when it
//   connects); a session named as the service's that says none is of a release before the
//   fence existed (0.1.0). Other sessions (a DBA's, a tool's) are not the fence's business.
import { Data } from "effect"
import type { Tx } from "./Database.ts"
import { compareReleases, RELEASE, type Release } from "../release.ts"

/** The connection setting that carries a process's release. */
export const RELEASE_SETTING = "srs.release"
/** What every release before the fence reported as its version, and the fence's floor. */
export const PRE_FENCE_RELEASE = "0.1.0"
/** The SQLSTATE of a write the fence refused. */
export const FENCE_REFUSED = "SRF01"

/**
 * Tables whose rows are written by rules that migrations change: the mirror, views, outbox,
 * tombstones and tenancy, capture's state (its checkpoint, quarantine, re-reads and queued
 * retries), and deliveries with fan-out's partitions (an engine fenced out loses its leases to
 * newer ones).
 */
export const FENCED_TABLES = [
  "rows",
  "views",
  "events",
  "deletions",
  "companies",
  "users",
  "capture_state",
  "capture_quarantine",
  "capture_contract",
  "capture_resync",
  "capture_retries",
  "capture_rereads",
  "webhook_deliveries",
  "webhook_fanout_parts",
  "record_changes",
  "stream_epochs"
] as const

/** Bumped whenever the guard's SQL below changes: an older release never replaces a newer guard. */
const GUARD_VERSION = 1
const GUARD_COMMENT = `schema fence guard v${GUARD_VERSION}`

const GUARD_SQL = `
create or replace function service.release_key(v text) returns int[] language sql immutable parallel safe as $$
  select case when v ~ '^[0-9]+[.][0-9]+[.][0-9]+$'
    then string_to_array(v, '.')::int[] else array[0, 0, 0] end
$$;

create or replace function service.fence_guard() returns trigger language plpgsql as $$
declare
  mine text := nullif(current_setting('${RELEASE_SETTING}', true), '');
  needed text;
begin
  if mine is null then
    if current_setting('application_name') not like 'safety-records-service%' then
      return null;
    end if;
    mine := '${PRE_FENCE_RELEASE}';
  end if;
  select oldest_writer into needed from service.schema_fence;
  if needed is not null and service.release_key(mine) < service.release_key(needed) then
    raise exception 'schema fence: this database takes writes to service.% from release % or newer; this process runs release %',
      tg_table_name, needed, mine
      using errcode = '${FENCE_REFUSED}',
            hint = 'Replace it with a process of the release the database needs (docs/deployment.md#upgrades).';
  end if;
  return null;
end $$;

comment on function service.fence_guard() is '${GUARD_COMMENT}';
`

/**
 * The fence's table, its guard function (unless a newer release installed a newer one) and
 * the guard on every fenced table that exists. Runs in the runner's bootstrap transaction,
 * before any migration, so that a migration raising the fence is guarded from its first
 * commit; the runner calls ensureGuards again after each migration for the tables it made.
 */
export const installFence = async (tx: Tx) => {
  await tx.unsafe(`
    create table if not exists service.schema_fence (
      id boolean primary key default true check (id),
      generation integer not null,
      oldest_writer text not null,
      raised_by text,
      changed_at timestamptz not null default now()
    )`)
  await tx`
    insert into service.schema_fence (generation, oldest_writer)
    select coalesce(max(substring(name from '^[0-9]+')::int), 0), ${PRE_FENCE_RELEASE} from service.schema_migrations
    on conflict (id) do nothing`
  const [g] = await tx<{ comment: string | null }[]>`
    select obj_description(to_regprocedure('service.fence_guard()'), 'pg_proc') as comment`
  const installed = Number(/v(\d+)$/.exec(g?.comment ?? "")?.[1] ?? 0)
  if (installed < GUARD_VERSION) await tx.unsafe(GUARD_SQL)
  await ensureGuards(tx)
}

/** Puts the guard on the fenced tables that exist and lack it. */
export const ensureGuards = async (tx: Tx) => {
  const missing = await tx<{ name: string }[]>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'service' and c.relkind in ('r', 'p') and c.relname = any(${[...FENCED_TABLES]})
       and not exists (select 1 from pg_trigger t where t.tgrelid = c.oid and t.tgname = 'fence_guard')`
  for (const { name } of missing)
    await tx.unsafe(`
      create trigger fence_guard before insert or update or delete or truncate on service.${name}
        for each statement execute function service.fence_guard()`)
}

/** Raises the oldest release that may write to `release` (never lowers it), naming the migration. */
export const raiseFence = async (tx: Tx, release: string, by: string) => {
  const [f] = await tx<{ oldest_writer: string }[]>`select oldest_writer from service.schema_fence for update`
  if (f !== undefined && compareReleases(f.oldest_writer, release) >= 0) return
  await tx`update service.schema_fence set oldest_writer = ${release}, raised_by = ${by}, changed_at = now()`
}

/** Records the schema generation a migration reached. */
export const recordGeneration = async (tx: Tx, generation: number) => {
  await tx`update service.schema_fence set generation = greatest(generation, ${generation}), changed_at = now()`
}

/** What the database's fence says. */
export interface SchemaFence {
  /** The schema generation its migrations reached. */
  readonly generation: number
  /** The oldest release that may write. */
  readonly oldestWriter: string
  /** The migration that last raised it, or null when none has. */
  readonly raisedBy: string | null
  readonly changedAt: string
}

/** The database's fence; null when no release with a fence has migrated it yet. */
export const readFence = async (sql: Tx): Promise<SchemaFence | null> => {
  try {
    const [f] = await sql<{ generation: number; oldest_writer: string; raised_by: string | null; changed_at: Date }[]>`
      select generation, oldest_writer, raised_by, changed_at from service.schema_fence`
    return f === undefined
      ? null
      : {
          generation: f.generation,
          oldestWriter: f.oldest_writer,
          raisedBy: f.raised_by,
          changedAt: f.changed_at.toISOString()
        }
  } catch (e) {
    if ((e as { code?: string }).code === "42P01") return null // no such table yet
    throw e
  }
}

/** Whether this release may write to a database behind this fence, and if not, why, in an operator's words. */
export interface FenceVerdict {
  readonly writable: boolean
  readonly release: Release
  readonly database: SchemaFence | null
  readonly reason: string | null
}

export const judgeFence = (release: Release, database: SchemaFence | null): FenceVerdict => {
  const writable = database === null || compareReleases(release.version, database.oldestWriter) >= 0
  return {
    writable,
    release,
    database,
    reason: writable
      ? null
      : `the service's database (schema generation ${database!.generation}) takes writes from release ${database!.oldestWriter} or newer${database!.raisedBy === null ? "" : ` (since ${database!.raisedBy})`}; this process runs release ${release.version} (schema generation ${release.generation}): it writes nothing, replace it with release ${database!.oldestWriter} or newer`
  }
}

/**
 * The check a writer makes before each batch it captures and each claim of deliveries: one
 * statement. Not writable: write nothing (the database would refuse it anyway), say
 * `reason`, and leave the work to a process of the release the database needs.
 */
export const checkFence = async (sql: Tx, release: Release = RELEASE): Promise<FenceVerdict> =>
  judgeFence(release, await readFence(sql))

/** A writer that found itself fenced out, as an error it can fail its work with. */
export class SchemaFenced extends Data.TaggedError("SchemaFenced")<{ readonly verdict: FenceVerdict }> {
  override get message() {
    return this.verdict.reason ?? "schema fence"
  }
}

/** True for a write the database's fence refused (FENCE_REFUSED). */
export const isFenceRefusal = (e: unknown): boolean =>
  typeof e === "object" && e !== null && (e as { code?: string }).code === FENCE_REFUSED
