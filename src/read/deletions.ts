// GET /api/v1/deletions: records deleted in the last 30 days, so that a copy kept in step
// with the lists (sort=updatedAt&updatedAfter=...) can drop what is gone without listing
// everything again. Capture leaves a tombstone (service.deletions) when it deletes a view;
// tombstones older than 30 days are pruned with the delivery log (src/delivery/queries.ts).
// A deletion is listed when the key could read the record now: its resource is in the key's
// scopes and its module is on. Oldest first, keyset-paged on (deletedAt, id) like the lists.
//
// The group is added to ServiceApi in definition.ts; the handler is in deletions-handlers.ts.
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import type postgres from "postgres"
import { RESOURCES, type Resource } from "../domain/resources.ts"
import {
  CURSOR_ERROR_MESSAGES,
  decodeCursor,
  encodeCursor,
  pageJson,
  pageOf,
  type CursorBinding,
  type CursorKey,
  type CursorPosition
} from "./cursor.ts"
import { FILTER_DATE_FORMATS } from "../domain/dates.ts"
import { BadRequest, Forbidden } from "../faces/http/errors.ts"
import { DELETION_EXAMPLE } from "../faces/api/examples.ts"
import { keyStateRelation, type KeyState } from "../access/keys/key-check.ts"
import { CursorParam, dateParam, DEFAULT_LIMIT, LimitParam } from "../faces/api/query.ts"

// Not imported from definition.ts: that module imports this one.
const PREFIX = "/api/v1"

export const DELETIONS_WINDOW_DAYS = 30
export const DELETIONS_PARAMS = ["resource", "since", "limit", "cursor"] as const

const SinceParam = dateParam(
  `Only records deleted at or after this moment: ${FILTER_DATE_FORMATS}. Pass the deletedAt of the last deletion you saw (it comes again: deleting twice does no harm). Absent, or more than ${DELETIONS_WINDOW_DAYS} days ago: the last ${DELETIONS_WINDOW_DAYS} days.`
)

const ResourceParam = Schema.Literals(RESOURCES).annotate({
  description: "Only deletions of this resource; absent: of every resource the key can read.",
  message: `must be one of ${RESOURCES.join(", ")}`
})

export const DELETIONS_QUERY = {
  resource: Schema.optional(ResourceParam),
  since: Schema.optional(SinceParam),
  limit: Schema.optional(LimitParam),
  cursor: Schema.optional(CursorParam)
} as const

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

export const Deletion = Schema.Struct({
  resource: Schema.Literals(RESOURCES),
  id: Schema.String.annotate({ description: "The deleted record's id" }),
  deletedAt: Timestamp.annotate({
    description:
      "When the deletion was committed (or, after the service rebuilt its views, when it found the record gone)"
  })
}).annotate({ identifier: "Deletion", description: "A record that was deleted", examples: [DELETION_EXAMPLE] })

export class DeletionsGroup extends HttpApiGroup.make("deletions")
  .add(
    HttpApiEndpoint.get("list", `${PREFIX}/deletions`, {
      query: DELETIONS_QUERY,
      success: pageOf(Deletion, "Oldest first (by deletedAt, then id)"),
      error: [BadRequest, Forbidden]
    }).annotateMerge(
      OpenApi.annotations({
        summary: `Records deleted in the last ${DELETIONS_WINDOW_DAYS} days`,
        description: [
          `Records deleted in the last ${DELETIONS_WINDOW_DAYS} days that this key could read: of the resources in its scopes whose module is on now. Oldest first, paged like the record lists.`,
          "With the lists sorted by change (sort=updatedAt&updatedAfter=...) this keeps a copy in step: apply what changed, then drop what was deleted. A record deleted and then created again with the same id is no longer listed. A copy not synced for more than 30 days cannot learn every deletion: list everything again."
        ].join("\n\n")
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Deleted records, for keeping a copy in step" })) {}

// -----------------------------------------------------------------------------
// The listing

/** The query as decoded by DELETIONS_QUERY: since is a canonical UTC timestamp. */
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

export type DeletionsAnswer =
  | { readonly _tag: "Body"; readonly body: string }
  | { readonly _tag: "Refused"; readonly state: Exclude<KeyState, "ok">; readonly resource: Resource | undefined }
  | { readonly _tag: "BadRequest"; readonly message: string }
  | { readonly _tag: "Forbidden"; readonly message: string }

export interface DeletionsKey {
  readonly keyId: string
  readonly companyId: string
  readonly host: string | undefined
}

interface DeletionRow {
  readonly state: KeyState
  readonly k_scopes: ReadonlyArray<string> | null
  readonly resource: string | null
  readonly id: string | null
  readonly deleted: string | null
  readonly ts: string | null
}

const MILLIS = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

export const listDeletions = async (
  sql: postgres.Sql,
  cursorKey: CursorKey,
  key: DeletionsKey,
  query: DeletionsQuery
): Promise<DeletionsAnswer> => {
  const r = deletionsRequest(key.companyId, query)
  let position: CursorPosition | undefined
  if (query.cursor !== undefined) {
    const decoded = decodeCursor(cursorKey, r.binding, query.cursor)
    if ("error" in decoded) {
      // A refused key gets its 401/403 before any complaint about its cursor.
      const [k] = await sql<
        { state: KeyState }[]
      >`select s.state from ${keyStateRelation(sql, key.keyId, key.host, r.resource)}`
      if (k === undefined) return { _tag: "Refused", state: "unknown", resource: r.resource }
      if (k.state !== "ok") return { _tag: "Refused", state: k.state, resource: r.resource }
      return {
        _tag: "BadRequest",
        message:
          decoded.error === "other-list"
            ? "cursor belongs to another list: use it with the same resource and since as the page it came from"
            : CURSOR_ERROR_MESSAGES[decoded.error]
      }
    }
    position = decoded.position
  }
  const rows = await sql<DeletionRow[]>`
    select s.state, s.k_scopes, w.resource, w.id, w.deleted, w.ts
      from ${keyStateRelation(sql, key.keyId, key.host, r.resource)}
      left join lateral (
        select d.resource, d.id::text as id, to_char(d.deleted_at at time zone 'UTC', ${sql.unsafe(MILLIS)}) as deleted, d.deleted_at::text as ts
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
  const first = rows[0]
  if (first === undefined) return { _tag: "Refused", state: "unknown", resource: r.resource }
  if (first.state !== "ok") return { _tag: "Refused", state: first.state, resource: r.resource }
  if (r.resource !== undefined && !(first.k_scopes ?? []).includes(r.resource)) {
    return { _tag: "Forbidden", message: `this API key may not read ${r.resource}` }
  }
  const count = first.id === null ? 0 : rows.length
  // Resource names, uuids and timestamps need no escaping.
  const item = (d: (typeof rows)[number]) => `{"resource":"${d.resource}","id":"${d.id}","deletedAt":"${d.deleted}"}`
  const body = pageJson(rows, count, r.limit, item, (last) => encodeCursor(cursorKey, r.binding, last))
  return { _tag: "Body", body }
}
