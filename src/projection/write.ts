// Bulk writes of a batch's results: mirror rows, views, and the tenancy tables the API reads.
import type { TransactionSql } from "postgres"
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

export const writeViews = async (tx: Tx, views: ReadonlyArray<ProjectedView>, gone: ReadonlyArray<RecordRef>) => {
  if (gone.length > 0) {
    await tx`
      delete from service.views v using json_to_recordset(${JSON.stringify(gone)}::text::json) as d(resource text, id uuid)
      where v.resource = d.resource and v.id = d.id`
  }
  if (views.length > 0) {
    const rows = views.map((v) => ({
      resource: v.resource,
      id: v.id,
      company_id: v.companyId,
      created_at: v.createdAt,
      name: v.name,
      status: v.status,
      body: v.body
    }))
    await tx`
      insert into service.views (resource, id, company_id, created_at, name, status, body)
      select resource, id, company_id, created_at, name, status, body
      from json_to_recordset(${JSON.stringify(rows)}::text::json) as x(resource text, id uuid, company_id uuid,
        created_at timestamptz, name text, status text, body text)
      on conflict (resource, id) do update
        set company_id = excluded.company_id, created_at = excluded.created_at, name = excluded.name,
            status = excluded.status, body = excluded.body
        where service.views.body is distinct from excluded.body
           or service.views.created_at is distinct from excluded.created_at`
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
