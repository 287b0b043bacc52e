// Bulk writes of a batch's results: mirror rows, views, and the tenancy tables the API reads.
import type { Transaction as Tx, Tx as Handle } from "../../platform/db/Database.ts"
import type { PendingQuery, Row as SqlRow, Sql } from "postgres"
import { type MirrorRow, STAGING_TABLE, type Store } from "./store.ts"
import type { ProjectedView } from "./project.ts"
import type { RecordRef } from "./dependencies.ts"
import { packed } from "./columns.ts"
import { encodeMirrorData } from "./mirror-codec.ts"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import { EPOCH_NOTICE, RECORD_CHANGES_CHANNEL } from "../../platform/db/channels.ts"
import { redactPrivacyCase } from "../../domain/records/incidents.ts"

/** What a batch changes in the mirror: rows new to it, rows it has (or may have) that changed, rows gone. */
export interface MirrorChanges {
  /** Rows the mirror does not have: a plain insert (a conflict would be a bug, and fails). */
  readonly inserts?: ReadonlyArray<MirrorRow>
  /** Rows written whether or not the mirror has them. */
  readonly upserts?: ReadonlyArray<MirrorRow>
  readonly deletes?: ReadonlyArray<{ tbl: string; key: string }>
}

const mirrorColumns = (rows: ReadonlyArray<MirrorRow>) => ({
  tbl: packed(rows.map((r) => r.tbl)),
  key: rows.map((r) => r.key),
  company: packed(rows.map((r) => r.companyId)),
  parent: packed(rows.map((r) => r.parentId)),
  data: packed(rows.map((r) => encodeMirrorData(r.tbl, r.data)))
})

/**
 * The mirror's statements for a batch, their parameters built now (capture builds them while
 * the batch before is still being written) and run by the returned function. The keys are
 * text from the app (company_modules: company:module), so they go as a text[] parameter.
 */
export const mirrorWrites = (changes: MirrorChanges): ((tx: Tx) => Array<Promise<unknown>>) => {
  const deletes = changes.deletes ?? []
  const del = deletes.length > 0 ? { tbl: packed(deletes.map((d) => d.tbl)), key: deletes.map((d) => d.key) } : null
  const ins = changes.inserts && changes.inserts.length > 0 ? mirrorColumns(changes.inserts) : null
  const ups = changes.upserts && changes.upserts.length > 0 ? mirrorColumns(changes.upserts) : null
  return (tx) => {
    const out: Array<Promise<unknown>> = []
    if (del) {
      out.push(
        tx`
        delete from service.rows r using unnest(string_to_array(${del.tbl}, chr(30)), ${del.key}::text[]) as d(tbl, key)
        where r.tbl = d.tbl and r.key = d.key`.execute()
      )
    }
    if (ins) {
      out.push(
        tx`
        insert into service.rows (tbl, key, company_id, parent_id, data)
        select * from unnest(string_to_array(${ins.tbl}, chr(30)), ${ins.key}::text[], string_to_array(${ins.company}, chr(30), '')::uuid[],
          string_to_array(${ins.parent}, chr(30), '')::uuid[], string_to_array(${ins.data}, chr(30)))`.execute()
      )
    }
    if (ups) {
      out.push(
        tx`
        insert into service.rows (tbl, key, company_id, parent_id, data)
        select * from unnest(string_to_array(${ups.tbl}, chr(30)), ${ups.key}::text[], string_to_array(${ups.company}, chr(30), '')::uuid[],
          string_to_array(${ups.parent}, chr(30), '')::uuid[], string_to_array(${ups.data}, chr(30)))
        on conflict (tbl, key) do update
          set company_id = excluded.company_id, parent_id = excluded.parent_id, data = excluded.data
          -- a row written again as it is (its view no longer stands for it) leaves no dead tuple
          where service.rows.data is distinct from excluded.data
             or service.rows.company_id is distinct from excluded.company_id
             or service.rows.parent_id is distinct from excluded.parent_id`.execute()
      )
    }
    return out
  }
}

/** Held by each transaction that writes views and the mirror (keepsMirror): one at a time. */
const MIRROR_LOCK = 7_351_009_004 // arbitrary, stable: "writes the views and the mirror"

/**
 * Said first in a transaction that writes views and the mirror rows they stand for together
 * (capture's batches and large transactions, bootstrap, rebuild-views): the views' trigger then
 * keeps no copy of a changed view's old body in the mirror (sql/032), and the transaction waits
 * for any other such writer to commit. Without the wait, rebuild-views could read a view that a
 * capture batch then deletes, and write it back after (most records have no mirror row whose
 * lock would have kept them apart).
 */
export const keepsMirror = (tx: Handle): Promise<unknown> =>
  tx`select set_config('service.keeps_mirror', 'on', true), pg_advisory_xact_lock(${MIRROR_LOCK})`.execute()

/**
 * A large transaction's changes of view-backed rows, into its staging table (store.ts,
 * STAGING_TABLE) rather than the mirror: a row deleted there stays as data null, so that
 * reads in the transaction do not find it through its view, not yet deleted.
 */
export const stagingWrites = (changes: MirrorChanges): ((tx: Tx) => Array<Promise<unknown>>) => {
  const rows = [...(changes.inserts ?? []), ...(changes.upserts ?? [])]
  const all = rows.length + (changes.deletes?.length ?? 0)
  if (all === 0) return () => []
  const cols = mirrorColumns(rows)
  const deletes = changes.deletes ?? []
  return (tx) => [
    tx`
    insert into ${tx(STAGING_TABLE)} (tbl, key, company_id, parent_id, data)
    select * from unnest(string_to_array(${cols.tbl}, chr(30)), ${cols.key}::text[], string_to_array(${cols.company}, chr(30), '')::uuid[],
      string_to_array(${cols.parent}, chr(30), '')::uuid[], string_to_array(${cols.data}, chr(30)))
    union all
    select tbl, key, null, null, null from unnest(${deletes.map((d) => d.tbl)}::text[], ${deletes.map((d) => d.key)}::text[]) as d(tbl, key)
    on conflict (tbl, key) do update
      set company_id = excluded.company_id, parent_id = excluded.parent_id, data = excluded.data`.execute()
  ]
}

export const writeMirror = async (
  tx: Tx,
  upserts: ReadonlyArray<MirrorRow>,
  deletes: ReadonlyArray<{ tbl: string; key: string }>
) => {
  await Promise.all(mirrorWrites({ upserts, deletes })(tx))
}

/**
 * When the changes written happened: the commit time of a capture batch's last transaction,
 * or, for views projected from the mirror (bootstrap, rebuild), the time of the mirror's
 * state (null: now). A view projected from the mirror for the first time takes its createdAt
 * when it has no updatedAt: when it last changed before is not known.
 */
export type ChangeTime = CommitTime | { readonly mirror: Date | null }

/**
 * Changes at a commit (capture's): when, and where in the WAL the record changes are written
 * (sql/052). Each record's place comes from the app's WAL alone, never from how capture cut
 * it into batches: the transaction that last changed the record (its commit LSN, and the order
 * it touched the record in, `place`); a record the batch did not change itself (an inspection
 * a site's rename reached, one released from the quarantine) at the batch's last commit, after
 * every record that commit changed itself. So a batch written again after the service's
 * database lost it (a crash before its asynchronous commit reached the disk) puts every
 * record where a follower who read the lost one expects it (docs/design.md, "Capture commits
 * asynchronously").
 */
export interface CommitTime {
  readonly commit: Date
  readonly lsn: Lsn
  readonly place: (resource: string, id: string) => RecordPlace | undefined
}

/** Where a record's change is in the WAL: its transaction's commit, and its order in it. */
export interface RecordPlace {
  readonly lsn: Lsn
  readonly ord: number
  readonly commit: Date
}

/** After every record a transaction changed itself: records reached through another. */
const REACHED_ORD = 2 ** 30

/**
 * A record change's place and its `committedAt` (ms), from one source for every statement
 * that writes record changes: the stream orders by the place and shows the time, so the two
 * come from the same transaction, or committedAt could go back along the stream.
 */
const placeOf = (time: CommitTime, resource: string, id: string) => {
  const p = time.place(resource, id)
  return p === undefined
    ? { lsn: formatLsn(time.lsn), ord: REACHED_ORD, ms: time.commit.getTime() }
    : { lsn: formatLsn(p.lsn), ord: p.ord, ms: p.commit.getTime() }
}

/** Each view's place and its commit time in ms (placeOf), as text parameters. */
const placesOf = (time: CommitTime, refs: ReadonlyArray<{ readonly resource: string; readonly id: string }>) => {
  const places = refs.map((r) => placeOf(time, r.resource, r.id))
  return {
    lsn: packed(places.map((p) => p.lsn)),
    ord: packed(places.map((p) => String(p.ord))),
    ms: packed(places.map((p) => String(p.ms)))
  }
}

/**
 * Writes the views of a batch and deletes those whose record is gone, leaving a tombstone
 * for GET /api/v1/deletions (deleted_at: the gone record's own `at` when known, else the
 * change time).
 *
 * changed_at, the key of ?sort=updatedAt (sql/012_sync.sql): the record's updatedAt when the
 * write brings a new one (or creates the view); otherwise, when the view changed but its
 * updatedAt did not (a child row, a name shown inside it, an inspection, which has no
 * updatedAt), the change time, never earlier than a millisecond after the previous value:
 * a client that synced up to the previous value gets the record again.
 */
export const writeViews = async (
  tx: Tx,
  views: ReadonlyArray<ProjectedView>,
  gone: ReadonlyArray<RecordRef & { readonly at?: Date }>,
  time: ChangeTime = { mirror: null }
) => {
  await Promise.all(viewWrites(views, gone, time)(tx))
}

const viewColumns = (views: ReadonlyArray<ProjectedView>) =>
  views.length === 0
    ? null
    : {
        resource: packed(views.map((v) => v.resource)),
        id: packed(views.map((v) => v.id)),
        company: packed(views.map((v) => v.companyId)),
        created: packed(views.map((v) => v.createdAt)),
        updated: packed(views.map((v) => v.updatedAt)),
        // Names and statuses are text from the app: text[] parameters.
        name: views.map((v) => v.name),
        status: views.map((v) => v.status),
        body: packed(views.map((v) => v.body))
      }

/**
 * writeViews' statements, their parameters built now and run by the returned function (see
 * mirrorWrites). `fresh`: views of records the mirror did not have before (a view exists only
 * while its record's row does), inserted without looking for one to update.
 */
export const viewWrites = (
  views: ReadonlyArray<ProjectedView>,
  gone: ReadonlyArray<RecordRef & { readonly at?: Date; readonly company?: string }>,
  time: ChangeTime = { mirror: null },
  fresh: ReadonlyArray<ProjectedView> = []
): ((tx: Tx) => Array<Promise<unknown>>) => {
  const commit = "commit" in time ? time.commit : null
  const at = "commit" in time ? time.commit : time.mirror
  const numbering = "commit" in time ? time : null
  const goneJson =
    gone.length > 0
      ? JSON.stringify(numbering === null ? gone : gone.map((g) => ({ ...g, ...placeOf(numbering, g.resource, g.id) })))
      : null
  const ups = viewColumns(views)
  const ins = viewColumns(fresh)
  const upsPlaces = numbering !== null && views.length > 0 ? placesOf(numbering, views) : null
  const insPlaces = numbering !== null && fresh.length > 0 ? placesOf(numbering, fresh) : null
  return (tx) => {
    const out: Array<Promise<unknown>> = []
    if (goneJson !== null) {
      out.push(
        tx`
      with g as (
        select * from json_to_recordset(${goneJson}::text::json)
          as g(resource text, id uuid, at timestamptz, lsn pg_lsn, ord int, ms bigint, company uuid)
      ), v as (
        delete from service.views v using g where v.resource = g.resource and v.id = g.id
        returning v.resource, v.id, v.company_id
      ), d as (
        -- A record with a view, and one the batch made and deleted with none (its company given).
        select g.resource, g.id, coalesce(v.company_id, g.company) as company_id,
               date_trunc('milliseconds', coalesce(g.at, ${at}::timestamptz, now())) as at, g.lsn, g.ord, g.ms
        from g left join v on v.resource = g.resource and v.id = g.id
        where v.id is not null or g.company is not null
      )${written(tx, numbering, "delete", tx`select resource, id, company_id, lsn, ord, ms from d`)}
      insert into service.deletions (resource, id, company_id, deleted_at)
      select resource, id, company_id, at from d
      on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at`.execute()
      )
    }
    // A record that comes back (deleted, then its id inserted again) is no longer deleted.
    if (ins !== null) {
      out.push(
        tx`
      with up as (
        ${insertViews(tx, ins, commit)}
        returning resource, id, company_id
      )${written(tx, numbering, "upsert", placed(tx, ins, insPlaces))}
      delete from service.deletions t using up where t.resource = up.resource and t.id = up.id`.execute()
      )
    }
    if (ups !== null) {
      // A view whose bytes did not change is not written (the where of the update): it keeps
      // its row, and its changed_at; its record change moves all the same (placed).
      out.push(
        tx`
      with up as (
        ${insertViews(tx, ups, commit)}
        on conflict (resource, id) do update
          set company_id = excluded.company_id, created_at = excluded.created_at, name = excluded.name,
              status = excluded.status, body = excluded.body, updated_at = excluded.updated_at,
              changed_at = case
                when excluded.updated_at is not null and excluded.updated_at is distinct from service.views.updated_at
                  then excluded.changed_at
                else greatest(service.views.changed_at + interval '1 millisecond',
                              date_trunc('milliseconds', coalesce(${at}::timestamptz, now())))
              end
          where service.views.body is distinct from excluded.body
             or service.views.created_at is distinct from excluded.created_at
             -- corrective actions and inspections do not show their company
             or service.views.company_id is distinct from excluded.company_id
        returning resource, id, company_id
      )${written(tx, numbering, "upsert", placed(tx, ups, upsPlaces))}
      delete from service.deletions t using up where t.resource = up.resource and t.id = up.id`.execute()
      )
    }
    return out
  }
}

/**
 * The records a view statement shaped, each with its company, place and commit time (their
 * columns' order): every one, whether or not its view's bytes changed. Whether a view changed
 * depends on where the batch before ended, and a record's row in the stream must not: a batch
 * written again in other cuts (after the service's database lost it) would otherwise leave a
 * record where a follower who read the lost batch has passed it, with a state it never saw.
 */
const placed = (
  tx: Tx,
  v: { readonly resource: string; readonly id: string; readonly company: string },
  places: { readonly lsn: string; readonly ord: string; readonly ms: string } | null
) =>
  places === null
    ? tx``
    : tx`
        select p.resource, p.id, p.company_id, p.lsn, p.ord, p.ms
        from unnest(string_to_array(${v.resource}, chr(30)), string_to_array(${v.id}, chr(30))::uuid[],
                    string_to_array(${v.company}, chr(30))::uuid[], string_to_array(${places.lsn}, chr(30))::pg_lsn[],
                    string_to_array(${places.ord}, chr(30))::int[], string_to_array(${places.ms}, chr(30))::bigint[])
          as p(resource, id, company_id, lsn, ord, ms)`

/**
 * The record changes a view statement made (`rows`: resource, id, company_id, and placeOf's
 * lsn, ord and ms), as a CTE (sql/052; followers read them: docs/integrators.md). Only for
 * changes at a commit (capture's): a starting point (first start, rebuild) begins an epoch instead.
 */
const written = (tx: Tx, numbering: CommitTime | null, op: "upsert" | "delete", rows: PendingQuery<SqlRow[]>) =>
  numbering === null
    ? tx``
    : tx`, changed as (
        insert into service.record_changes (resource, id, company_id, op, commit_lsn, ord, committed_at)
        select resource, id, company_id, ${op}, lsn, ord, to_timestamp(ms / 1000.0)
        from (${rows}) r
        on conflict (resource, id) do update set company_id = excluded.company_id, op = excluded.op,
          commit_lsn = excluded.commit_lsn, ord = excluded.ord, committed_at = excluded.committed_at
      )`

/**
 * Moves the record changes of records a batch wrote with their own place to the batch's last
 * commit, after those it changed itself: inspections the batch changed and an equipment or site
 * change of its last transaction also reached (reshapeWide). Only forward.
 */
export const placeReached = async (tx: Tx, resource: string, ids: ReadonlyArray<string>, time: CommitTime) => {
  const lsn = formatLsn(time.lsn)
  await tx`
    update service.record_changes set commit_lsn = ${lsn}::pg_lsn, ord = ${REACHED_ORD}, committed_at = ${time.commit}
    where resource = ${resource} and id = any(${ids as string[]}::uuid[]) and commit_lsn < ${lsn}::pg_lsn`
}

/**
 * A starting point where changes were not numbered one by one (a first start, a lost slot's
 * rebuild, a fresh snapshot, views rewritten by rebuild-views): followers behind it copy again.
 * The changes placed before it are dropped: no follower reads past an epoch from behind it, and
 * they may name records the new starting point no longer has (removed without a change of theirs).
 */
export const beginEpoch = async (tx: Tx, checkpoint: Lsn, reason: string): Promise<void> => {
  await tx`insert into service.stream_epochs (checkpoint_lsn, reason) values (${formatLsn(checkpoint)}::pg_lsn, ${reason})`
  await tx`delete from service.record_changes where commit_lsn <= ${formatLsn(checkpoint)}::pg_lsn`
  // Followers waiting from before it learn at once that they must copy again (read/stream-wake.ts).
  await tx`select pg_notify(${RECORD_CHANGES_CHANNEL}, ${EPOCH_NOTICE})`
}

/** The insert of views from their columns (viewColumns), each column one text parameter. */
const insertViews = (tx: Tx, v: NonNullable<ReturnType<typeof viewColumns>>, commit: Date | null) => tx`
        insert into service.views (resource, id, company_id, created_at, updated_at, changed_at, name, status, body)
        select resource, id, company_id, created_at, updated_at,
               date_trunc('milliseconds', coalesce(updated_at, ${commit}::timestamptz, created_at)), name, status, body
        from unnest(string_to_array(${v.resource}, chr(30)), string_to_array(${v.id}, chr(30))::uuid[],
          string_to_array(${v.company}, chr(30))::uuid[], string_to_array(${v.created}, chr(30))::timestamptz[],
          string_to_array(${v.updated}, chr(30), '')::timestamptz[], ${v.name}::text[], ${v.status}::text[],
          string_to_array(${v.body}, chr(30))) as x(resource, id, company_id, created_at, updated_at, name, status, body)`

/**
 * After projecting every view from the mirror (bootstrap, rebuild): deletes the views whose
 * record is no longer there, with tombstones as capture would leave (deleted at `at`, the
 * time of the mirror's state; null: now). Returns the records removed.
 */
export const removeOrphanViews = async (
  tx: Tx,
  resources: ReadonlyArray<string>,
  tables: ReadonlyArray<string>,
  at: Date | null
): Promise<ReadonlyArray<{ readonly resource: string; readonly id: string }>> => {
  const removed = await tx`
    with d as (
      delete from service.views v
      where v.resource = any(${resources as string[]}::text[]) and not exists (
        select 1 from unnest(${resources as string[]}::text[], ${tables as string[]}::text[]) as m(resource, tbl)
        join service.rows r on r.tbl = m.tbl and r.key = v.id::text
        where m.resource = v.resource)
      returning v.resource, v.id, v.company_id
    )
    insert into service.deletions (resource, id, company_id, deleted_at)
    select resource, id, company_id, date_trunc('milliseconds', coalesce(${at}::timestamptz, now())) from d
    on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at
    returning resource, id::text`
  return removed as unknown as ReadonlyArray<{ readonly resource: string; readonly id: string }>
}

/**
 * A privacy case's views, as they stand, without the person's details (a held incident keeps
 * its last view: docs/privacy.md#privacy-cases). A body that changes moves its change time, so
 * a client syncing by it reads the record again.
 */
export const redactViews = async (
  tx: Tx,
  resource: "incidents",
  ids: ReadonlyArray<string>,
  time: CommitTime | null = null
): Promise<void> => {
  const rows = await tx<{ id: string; body: string }[]>`
    select id::text, body from service.views where resource = ${resource} and id = any(${ids as string[]}::uuid[])`
  const changed = rows.flatMap((r) => {
    const body = redactPrivacyCase(r.body)
    return body === r.body ? [] : [{ id: r.id, body, ...(time === null ? {} : placeOf(time, resource, r.id)) }]
  })
  if (changed.length === 0) return
  await tx`
    with up as (
      update service.views v set body = x.body,
        changed_at = greatest(v.changed_at + interval '1 millisecond', date_trunc('milliseconds', now()))
      from json_to_recordset(${JSON.stringify(changed)}::text::json) as x(id uuid, body text, lsn pg_lsn, ord int, ms bigint)
      where v.resource = ${resource} and v.id = x.id
      returning v.resource, v.id, v.company_id, x.lsn, x.ord, x.ms
    )${written(tx, time, "upsert", tx`select * from up`)}
    select count(*) from up`
}

/** Deletes tombstones older than `before` (GET /api/v1/deletions shows 30 days), in chunks; returns how many. */
export const pruneDeletions = async (sql: Sql, before: Date, chunk = 5_000): Promise<number> => {
  let pruned = 0
  for (;;) {
    const r = await sql`
      delete from service.deletions t using (
        select resource, id from service.deletions where deleted_at < ${before} limit ${chunk}
      ) old where t.resource = old.resource and t.id = old.id returning 1`
    pruned += r.length
    if (r.length < chunk) return pruned
  }
}

/** service.companies rows for the given companies from a store's final state (null: the company is gone). */
export const companyRows = (store: Store, companyIds: Iterable<string>) => {
  const upserts: Array<Record<string, unknown>> = []
  const gone: string[] = []
  for (const id of companyIds) {
    const c = store.get("companies", id)
    if (!c) {
      gone.push(id)
      continue
    }
    const modules = store
      .childrenOf("company_modules", id)
      .filter((m) => m.data.enabled === true)
      .map((m) => String(m.data.module))
      .sort()
    upserts.push({
      id,
      name: c.data.name,
      host: c.data.host,
      tier: c.data.tier,
      api_enabled: c.data.api_enabled,
      modules: `{${modules.join(",")}}`,
      created_at: c.data.created_at
    })
  }
  return { upserts, gone }
}

export const writeCompanyRows = async (tx: Tx, { upserts, gone }: ReturnType<typeof companyRows>) => {
  if (gone.length > 0) await tx`delete from service.companies where id = any(${gone}::uuid[])`
  if (upserts.length > 0) {
    await tx`
      insert into service.companies (id, name, host, tier, api_enabled, modules, created_at)
      select id, name, host, tier, api_enabled, modules, created_at
      from json_to_recordset(${JSON.stringify(upserts)}::text::json) as x(id uuid, name text, host text, tier text,
        api_enabled boolean, modules text[], created_at timestamptz)
      on conflict (id) do update set name = excluded.name, host = excluded.host, tier = excluded.tier,
        api_enabled = excluded.api_enabled, modules = excluded.modules, created_at = excluded.created_at`
  }
}

/** Rewrites service.companies for the given companies from the batch's final state. */
export const writeCompanies = (tx: Tx, store: Store, companyIds: Iterable<string>) =>
  writeCompanyRows(tx, companyRows(store, companyIds))

/** service.users rows for the given users from a store's final state. */
export const userRows = (store: Store, userIds: Iterable<string>) => {
  const upserts: Array<Record<string, unknown>> = []
  const gone: string[] = []
  for (const id of userIds) {
    const u = store.get("users", id)
    if (!u) gone.push(id)
    else upserts.push({ id, company_id: u.data.company_id, name: u.data.name, email: u.data.email, role: u.data.role })
  }
  return { upserts, gone }
}

export const writeUserRows = async (tx: Tx, { upserts, gone }: ReturnType<typeof userRows>) => {
  if (gone.length > 0) await tx`delete from service.users where id = any(${gone}::uuid[])`
  if (upserts.length > 0) {
    await tx`
      insert into service.users (id, company_id, name, email, role)
      select id, company_id, name, email, role
      from json_to_recordset(${JSON.stringify(upserts)}::text::json) as x(id uuid, company_id uuid, name text, email text, role text)
      on conflict (id) do update set company_id = excluded.company_id, name = excluded.name,
        email = excluded.email, role = excluded.role`
  }
}

export const writeUsers = (tx: Tx, store: Store, userIds: Iterable<string>) =>
  writeUserRows(tx, userRows(store, userIds))
