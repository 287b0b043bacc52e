// The exact check that makes remembered keys safe: every statement that serves a request
// starts from the key's row and its company and yields a state; data is read only when
// the state is ok. Revocation, expiry, the Host binding, the company's API and tier and
// the module are thus decided by the database in the same round trip as the data.
//
// A fragment on a postgres.js handle, not an Effect over Sql: it is spliced into the read
// API's own statements, which run on its own pool (platform/db/api-pool.ts) on the hot path
// (bench:api); an Effect per statement there costs measured throughput (docs/design.md).
import type postgres from "postgres"
import type { Resource } from "../../domain/resources.ts"

export type KeyState = "ok" | "unknown" | "revoked" | "expired" | "host" | "company" | "module"
export type RefusedState = Exclude<KeyState, "ok">

/**
 * The check as SQL text over three SQL expressions: the key's id (uuid), the request's Host
 * (text, null when it sent none) and the resource (text, null for endpoints of no
 * resource). A relation `s` with the column `state` (and the key's and company's columns
 * prefixed k_ and c_): one row, or none if the key's row is gone (keys are revoked, never
 * deleted, so that is "unknown"). Text, so that a statement serving a batch of requests can
 * apply it to each of its rows (src/read/views.ts).
 */
export const keyStateSql = (keyId: string, host: string, resource: string): string => `(
  select case
           when k.revoked_at is not null then 'revoked'
           when k.expires_at is not null and k.expires_at <= now() then 'expired'
           when exists (select 1 from service.companies h where lower(h.host) = (${host})::text and h.id <> k.company_id) then 'host'
           when c.id is null or not c.api_enabled or c.tier <> 'company' then 'company'
           when (${resource})::text is not null and not ((${resource})::text = any(c.modules)) then 'module'
           else 'ok'
         end as state,
         k.name as k_name, k.expires_at as k_expires_at, k.webhooks as k_webhooks, k.scopes as k_scopes,
         c.name as c_name, c.modules as c_modules
    from service.api_keys k
    left join service.companies c on c.id = k.company_id
   where k.id = (${keyId})::uuid
  offset 0 -- computed once, not once per record row
) s`

const OF_PARAMETERS = keyStateSql("kq.key_id", "kq.host", "kq.resource")

/** The relation `s` for one request's key, Host and resource, as a fragment of a tagged statement. */
export const keyStateRelation = (
  sql: postgres.Sql,
  keyId: string,
  host: string | undefined,
  resource: Resource | undefined
) => sql`(select ${keyId}::uuid as key_id, ${host ?? null}::text as host, ${resource ?? null}::text as resource) kq
  cross join lateral ${sql.unsafe(OF_PARAMETERS)}`

/** The check's row: the state, with the key's and its company's details as they are now. */
export interface KeyCheckRow {
  readonly state: KeyState
  readonly k_name: string | null
  readonly k_expires_at: Date | null
  readonly k_webhooks: boolean | null
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_name: string | null
  readonly c_modules: ReadonlyArray<string> | null
}

const GONE: KeyCheckRow = {
  state: "unknown",
  k_name: null,
  k_expires_at: null,
  k_webhooks: null,
  k_scopes: null,
  c_name: null,
  c_modules: null
}

/** The check on its own, one statement: the key's state now for this Host and resource. */
export const checkKey = async (
  sql: postgres.Sql,
  keyId: string,
  host: string | undefined,
  resource: Resource | undefined
): Promise<KeyCheckRow> => {
  const [row] = await sql<KeyCheckRow[]>`select s.* from ${keyStateRelation(sql, keyId, host, resource)}`
  return row ?? GONE
}
