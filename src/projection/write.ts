// Bulk writes of a batch's results: mirror rows, views, and the tenancy tables the API reads.
import type { Sql, TransactionSql } from "postgres"
import type { MirrorRow, Store } from "./store.ts"
import type { ProjectedView } from "./project.ts"
import type { RecordRef } from "./dependencies.ts"

type Tx = TransactionSql<Record<string, unknown>>

export const writeMirror = async (tx: Tx, upserts: ReadonlyArray<MirrorRow>, deletes: ReadonlyArray<{ tbl: string; key: string }>) => {
  if (deletes.length > 0) {
    await tx`
      delete from service.rows r using json_to_recordset(${JSON.stringify(deletes)}::text::json) as d(tbl text, key text)
      where r.tbl = d.tbl and r.key = d.key`
  }
  if (upserts.length > 0) {
    const rows = upserts.map((r) => ({ tbl: r.tbl, key: r.key, company_id: r.companyId, parent_id: r.parentId, data: JSON.stringify(r.data) }))
    await tx`
      insert into service.rows (tbl, key, company_id, parent_id, data)
      select tbl, key, company_id, parent_id, data
      from json_to_recordset(${JSON.stringify(rows)}::text::json) as x(tbl text, key text, company_id uuid, parent_id uuid, data text)
      on conflict (tbl, key) do update
        set company_id = excluded.company_id, parent_id = excluded.parent_id, data = excluded.data`
  }
}

/**
 * When the changes written happened: the commit time of a capture batch's last transaction,
 * or, for views projected from the mirror (bootstrap, rebuild), the time of the mirror's
 * state (null: now). A view projected from the mirror for the first time takes its createdAt
 * when it has no updatedAt: when it last changed before is not known.
 */
export type ChangeTime = { readonly commit: Date } | { readonly mirror: Date | null }

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
  const commit = "commit" in time ? time.commit : null
  const at = "commit" in time ? time.commit : time.mirror
  if (gone.length > 0) {
    await tx`
      with d as (
        delete from service.views v using json_to_recordset(${JSON.stringify(gone)}::text::json) as g(resource text, id uuid, at timestamptz)
        where v.resource = g.resource and v.id = g.id
        returning v.resource, v.id, v.company_id, g.at
      )
      insert into service.deletions (resource, id, company_id, deleted_at)
      select resource, id, company_id, date_trunc('milliseconds', coalesce(d.at, ${at}::timestamptz, now())) from d
      on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at`
  }
  if (views.length > 0) {
    const rows = views.map((v) => ({
      resource: v.resource,
      id: v.id,
      company_id: v.companyId,
      created_at: v.createdAt,
      updated_at: v.updatedAt,
      name: v.name,
      status: v.status,
      body: v.body
    }))
    // A record that comes back (deleted, then its id inserted again) is no longer deleted.
    await tx`
      with up as (
        insert into service.views (resource, id, company_id, created_at, updated_at, changed_at, name, status, body)
        select resource, id, company_id, created_at, updated_at,
               date_trunc('milliseconds', coalesce(updated_at, ${commit}::timestamptz, created_at)), name, status, body
        from json_to_recordset(${JSON.stringify(rows)}::text::json) as x(resource text, id uuid, company_id uuid,
          created_at timestamptz, updated_at timestamptz, name text, status text, body text)
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
        returning resource, id
      )
      delete from service.deletions t using up where t.resource = up.resource and t.id = up.id`
  }
}

/**
 * After projecting every view from the mirror (bootstrap, rebuild): deletes the views whose
 * record is no longer there, with tombstones as capture would leave (deleted at `at`, the
 * time of the mirror's state; null: now). Returns how many.
 */
export const removeOrphanViews = async (
  tx: Tx,
  resources: ReadonlyArray<string>,
  tables: ReadonlyArray<string>,
  at: Date | null
): Promise<number> => {
  const removed = await tx`
    with d as (
      delete from service.views v
      where not exists (
        select 1 from unnest(${resources as string[]}::text[], ${tables as string[]}::text[]) as m(resource, tbl)
        join service.rows r on r.tbl = m.tbl and r.key = v.id::text
        where m.resource = v.resource)
      returning v.resource, v.id, v.company_id
    )
    insert into service.deletions (resource, id, company_id, deleted_at)
    select resource, id, company_id, date_trunc('milliseconds', coalesce(${at}::timestamptz, now())) from d
    on conflict (resource, id) do update set company_id = excluded.company_id, deleted_at = excluded.deleted_at
    returning 1`
  return removed.count
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

/** Rewrites service.companies for the given companies from the batch's final state. */
export const writeCompanies = async (tx: Tx, store: Store, companyIds: Iterable<string>) => {
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

export const writeUsers = async (tx: Tx, store: Store, userIds: Iterable<string>) => {
  const upserts: Array<Record<string, unknown>> = []
  const gone: string[] = []
  for (const id of userIds) {
    const u = store.get("users", id)
    if (!u) gone.push(id)
    else upserts.push({ id, company_id: u.data.company_id, name: u.data.name, email: u.data.email, role: u.data.role })
  }
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
