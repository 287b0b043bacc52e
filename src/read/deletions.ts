// GET /api/v1/deletions: records deleted in the last 30 days, so that a copy kept in step
// with the lists (sort=updatedAt&updatedAfter=...) can drop what is gone without listing
// everything again. Capture leaves a tombstone (service.deletions) when it deletes a view;
// tombstones older than 30 days are pruned with the delivery log (src/webhooks/engine/housekeeping-queries.ts).
// A deletion is listed when the key could read the record now: its resource is in the key's
// scopes and its module is on. Oldest first, keyset-paged on (deletedAt, id) like the lists.
import { Context, Effect, Layer } from "effect"
import type { Forbidden, Invalid } from "../domain/errors.ts"
import type { Resource } from "../domain/resources.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import { keyStateRelation } from "../access/keys/key-check.ts"
import { CURSOR_ERROR_MESSAGES, encodeCursor, pageJson, pagePosition } from "./cursor.ts"
import type { CursorBinding } from "./cursor.ts"
import { badCursor, ISO_MILLIS, listRefusal, readSetup } from "./served.ts"
import type { FeedList, KeyStateRow, Read, Served } from "./served.ts"
import { DEFAULT_LIMIT, DELETIONS_WINDOW_DAYS } from "./lists.ts"

/** The query as its endpoint decodes it (faces/api/deletions-api.ts): since is a canonical UTC timestamp. */
export interface DeletionsQuery {
  readonly resource?: Resource | undefined
  readonly since?: string | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export interface DeletionsRequest {
  readonly resource: Resource | undefined
  readonly since: string | undefined
  readonly limit: number
  readonly binding: CursorBinding
}

/** A decoded query as a request. Pure. */
export const deletionsRequest = (companyId: string, query: DeletionsQuery): DeletionsRequest => {
  const { resource, since } = query
  return {
    resource,
    since,
    limit: query.limit ?? DEFAULT_LIMIT,
    binding: { companyId, resource: "deletions", filters: { resource, since } }
  }
}

export type DeletionsAnswer = Served<Invalid | Forbidden>

export interface DeletionsKey {
  readonly keyId: string
  readonly companyId: string
  readonly host: string | undefined
}

interface DeletionRow extends KeyStateRow {
  readonly resource: string | null
  readonly id: string | null
  readonly deleted: string | null
  readonly ts: string | null
}

export const listDeletions: FeedList<DeletionsKey, DeletionsQuery> = async (sql, cursorKey, key, query, seen) => {
  const r = deletionsRequest(key.companyId, query)
  const start = pagePosition(cursorKey, r.binding, query.cursor)
  if ("error" in start) {
    return badCursor(
      sql,
      key,
      r.resource,
      start.error === "other-list"
        ? "cursor belongs to another list: use it with the same resource and since as the page it came from"
        : CURSOR_ERROR_MESSAGES[start.error]
    )
  }
  const { position } = start
  const rows = await sql<DeletionRow[]>`
    select s.state, s.k_scopes, s.c_modules, w.resource, w.id, w.deleted, w.ts
      from ${keyStateRelation(sql, key.keyId, key.host, r.resource)}
      left join lateral (
        select d.resource, d.id::text as id, to_char(d.deleted_at at time zone 'UTC', ${sql.unsafe(ISO_MILLIS)}) as deleted, d.deleted_at::text as ts
          from service.deletions d
         where s.state = 'ok' and d.company_id = ${key.companyId}
           and d.resource = any(s.k_scopes) and d.resource = any(s.c_modules)
           ${r.resource === undefined ? sql`` : sql`and d.resource = ${r.resource}`}
           and d.deleted_at > now() - make_interval(days => ${DELETIONS_WINDOW_DAYS})
           ${r.since === undefined ? sql`` : sql`and d.deleted_at >= ${r.since}::timestamptz`}
           ${position === undefined ? sql`` : sql`and (d.deleted_at, d.id) > (${position.createdAt}::timestamptz, ${position.id}::uuid)`}
         order by d.deleted_at, d.id
         limit ${r.limit + 1}
      ) w on true`
  const refused = listRefusal(rows[0], seen, r.resource, (resource) => ({ _tag: "Scope", resource }))
  if (refused !== undefined) return refused
  const count = rows[0]!.id === null ? 0 : rows.length
  // Resource names, uuids and timestamps need no escaping.
  const item = (d: (typeof rows)[number]) => `{"resource":"${d.resource}","id":"${d.id}","deletedAt":"${d.deleted}"}`
  const body = pageJson(rows, count, r.limit, item, (last) => encodeCursor(cursorKey, r.binding, last))
  return { _tag: "Body", body }
}

export class Deletions extends Context.Service<
  Deletions,
  {
    /** A page of deletions: {"data":[...],"nextCursor":...}. */
    readonly list: (key: CurrentKeyShape, query: DeletionsQuery) => Read<Invalid | Forbidden>
  }
>()("service/read/Deletions") {
  static readonly layer = Layer.effect(
    Deletions,
    Effect.map(readSetup, ({ cursorKey, serve }) =>
      Deletions.of({
        list: (key, query) =>
          serve(key, query.resource, (db, seen) => listDeletions(db.sql, cursorKey, key, query, seen))
      })
    )
  )
}
