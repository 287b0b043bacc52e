// Reading records from service.views. A view's body is the exact JSON the API returns, so
// a page is assembled from the stored text, never parsed and re-serialised: the list
// answer is '{"data":[' + bodies + '],"nextCursor":...}'. Paging is keyset on the index
// (company_id, resource, created_at desc, id desc): page N costs what page 1 costs. Each
// statement also re-checks the key (key-check.ts), so serving a request is one round trip.
import { randomBytes } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import type postgres from "postgres"
import { Database } from "../db/Database.ts"
import type { Resource } from "../domain/resources.ts"
import type { CurrentKeyShape } from "./current-key.ts"
import { CURSOR_ERROR_MESSAGES, cursorKey as makeCursorKey, decodeCursor, encodeCursor, type CursorBinding, type CursorPosition } from "./cursor.ts"
import { parseFilterDate } from "./dates.ts"
import { BadRequest } from "./errors.ts"
import { keyStateRelation, type KeyState } from "./key-check.ts"
import { ApiPool } from "./pool.ts"
import { DEFAULT_LIMIT, namePattern, parseLimit, statusesFor, type ListQueryInput } from "./query.ts"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (s: string) => UUID.test(s)

/** What a list asks for once its parameters are checked: pure, testable without a database. */
export interface ListRequest {
  readonly limit: number
  readonly createdAfter: string | undefined
  readonly createdBefore: string | undefined
  readonly name: string | undefined
  readonly statuses: ReadonlyArray<string> | undefined
  readonly binding: CursorBinding
}

/** Turns checked query text into a list request, or names the parameter that is wrong. */
export const listRequest = (
  companyId: string,
  resource: Resource,
  query: ListQueryInput
): { readonly ok: ListRequest } | { readonly bad: string } => {
  const limit = query.limit === undefined ? DEFAULT_LIMIT : parseLimit(query.limit)
  if (limit === undefined) return { bad: "limit" }
  const after = query.createdAfter === undefined ? undefined : parseFilterDate(query.createdAfter)
  if (query.createdAfter !== undefined && after === undefined) return { bad: "createdAfter" }
  const before = query.createdBefore === undefined ? undefined : parseFilterDate(query.createdBefore)
  if (query.createdBefore !== undefined && before === undefined) return { bad: "createdBefore" }
  const statuses = query.status === undefined ? undefined : statusesFor(query.status)
  if (query.status !== undefined && statuses === undefined) return { bad: "status" }
  if (query.name !== undefined && query.name.trim() === "") return { bad: "name" }
  return {
    ok: {
      limit,
      createdAfter: after?.iso,
      createdBefore: before?.iso,
      name: query.name,
      statuses,
      binding: {
        companyId,
        resource,
        filters: {
          createdAfter: after?.iso,
          createdBefore: before?.iso,
          name: query.name?.toLowerCase(),
          status: query.status
        }
      }
    }
  }
}

interface PageRow {
  readonly state: KeyState
  readonly id: string | null
  readonly body: string | null
  readonly ts: string | null
}

/** A JSON answer, or the key's state when the check in the statement refused it. */
export type Served = { readonly _tag: "Body"; readonly body: string } | { readonly _tag: "Refused"; readonly state: KeyState }

export interface KeyCheckRow {
  readonly state: KeyState
  readonly k_name: string | null
  readonly k_expires_at: Date | null
  readonly k_webhooks: boolean | null
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_name: string | null
  readonly c_modules: ReadonlyArray<string> | null
}

const UNKNOWN: KeyCheckRow = { state: "unknown", k_name: null, k_expires_at: null, k_webhooks: null, k_scopes: null, c_name: null, c_modules: null }

export class Views extends Context.Service<
  Views,
  {
    /** The list answer as JSON text. */
    readonly list: (key: CurrentKeyShape, resource: Resource, query: ListQueryInput) => Effect.Effect<Served, BadRequest>
    /** The get answer as JSON text; undefined when there is no such record. */
    readonly get: (key: CurrentKeyShape, resource: Resource, id: string) => Effect.Effect<Served | undefined>
    /** The key's state now, with its and its company's current details. */
    readonly check: (key: CurrentKeyShape, resource: Resource | undefined) => Effect.Effect<KeyCheckRow>
  }
>()("service/api/Views") {
  static readonly layer = Layer.effect(
    Views,
    Effect.gen(function* () {
      const { sql } = yield* ApiPool
      // Lists filtered by name are planned for their pattern (a rare name is best found
      // with the trigram index, a common one by walking the page index), so they use the
      // shared pool, whose statements are planned per execution when that pays.
      const { sql: planned } = yield* Database
      const cursorKey = makeCursorKey(yield* Effect.promise(() => settingSecret(sql, "cursor_hmac_key")))

      const check = (key: CurrentKeyShape, resource: Resource | undefined) =>
        Effect.promise(async () => {
          const [row] = await sql<KeyCheckRow[]>`select * from ${keyStateRelation(sql, key.keyId, key.host, resource)}`
          return row ?? UNKNOWN
        })

      const list = Effect.fnUntraced(function* (key: CurrentKeyShape, resource: Resource, query: ListQueryInput) {
        const parsed = listRequest(key.companyId, resource, query)
        if ("bad" in parsed) return yield* new BadRequest({ error: `query parameter "${parsed.bad}" is invalid` })
        const r = parsed.ok
        let position: CursorPosition | undefined
        if (query.cursor !== undefined) {
          const decoded = decodeCursor(cursorKey, r.binding, query.cursor)
          if ("error" in decoded) {
            const state = yield* check(key, resource)
            if (state.state !== "ok") return { _tag: "Refused", state: state.state } as const
            return yield* new BadRequest({ error: CURSOR_ERROR_MESSAGES[decoded.error] })
          }
          position = decoded.position
        }
        const db = r.name === undefined ? sql : planned
        const rows = yield* Effect.promise(
          () => db<PageRow[]>`
            select s.state, w.id, w.body, w.ts
              from ${keyStateRelation(db, key.keyId, key.host, resource)}
              left join lateral (
                select v.id::text as id, v.body, v.created_at::text as ts
                  from service.views v
                 where s.state = 'ok' and v.company_id = ${key.companyId} and v.resource = ${resource}
                   ${r.createdAfter === undefined ? db`` : db`and v.created_at > ${r.createdAfter}::timestamptz`}
                   ${r.createdBefore === undefined ? db`` : db`and v.created_at < ${r.createdBefore}::timestamptz`}
                   ${r.name === undefined ? db`` : db`and v.name is not null and service.fold_name(v.name) like service.fold_name(${namePattern(r.name)})`}
                   ${r.statuses === undefined ? db`` : db`and v.status = any(${r.statuses as string[]}::text[])`}
                   ${position === undefined ? db`` : db`and (v.created_at, v.id) < (${position.createdAt}::timestamptz, ${position.id}::uuid)`}
                 order by v.created_at desc, v.id desc
                 limit ${r.limit + 1}
              ) w on true`
        )
        if (rows.length === 0 || rows[0]!.state !== "ok") return { _tag: "Refused", state: rows[0]?.state ?? "unknown" } as const
        // One more record than the page means there is a next page.
        const count = rows[0]!.id === null ? 0 : rows.length
        const more = count > r.limit
        const n = more ? r.limit : count
        let body = '{"data":['
        for (let i = 0; i < n; i++) {
          if (i > 0) body += ","
          body += rows[i]!.body
        }
        if (more) {
          const last = rows[n - 1]!
          body += `],"nextCursor":"${encodeCursor(cursorKey, r.binding, { createdAt: last.ts!, id: last.id! })}"}`
        } else {
          body += '],"nextCursor":null}'
        }
        return { _tag: "Body", body } as const
      })

      const get = Effect.fnUntraced(function* (key: CurrentKeyShape, resource: Resource, id: string) {
        if (!isUuid(id)) {
          const state = yield* check(key, resource)
          return state.state === "ok" ? undefined : ({ _tag: "Refused", state: state.state } as const)
        }
        const [row] = yield* Effect.promise(
          () => sql<{ state: KeyState; body: string | null }[]>`
            select s.state, w.body
              from ${keyStateRelation(sql, key.keyId, key.host, resource)}
              left join lateral (
                select v.body from service.views v
                 where s.state = 'ok' and v.resource = ${resource} and v.id = ${id}::uuid and v.company_id = ${key.companyId}
              ) w on true`
        )
        if (row === undefined || row.state !== "ok") return { _tag: "Refused", state: row?.state ?? "unknown" } as const
        return row.body === null ? undefined : ({ _tag: "Body", body: `{"data":${row.body}}` } as const)
      })

      return Views.of({ list, get, check })
    })
  )
}

/** A random 32-byte secret kept in service.settings, created on first use by whichever process comes first. */
export const settingSecret = async (sql: postgres.Sql, name: string): Promise<Buffer> => {
  await sql`
    insert into service.settings (name, value) values (${name}, ${randomBytes(32).toString("base64")})
    on conflict (name) do nothing`
  const [row] = await sql<{ value: string }[]>`select value from service.settings where name = ${name}`
  return Buffer.from(row!.value, "base64")
}
