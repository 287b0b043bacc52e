// Reading records from service.views, for GET /api/v1/<resource> and /<resource>/{id}. A
// view's body is the exact JSON the API returns, so an answer is assembled from the stored
// text, never parsed and re-serialised: a list answer is '{"data":[' + bodies +
// '],"nextCursor":...}'. Paging is keyset on the index (company_id, resource, created_at
// desc, id desc): page N costs what page 1 costs; a list by change time (sort=updatedAt, for
// syncs) is keyset on views_changed the same way. Each statement also re-checks the key
// (access/keys/key-check.ts), so serving a request is one round trip, and requests that
// arrive together share that round trip (batch.ts).
import { Context, Effect, Layer } from "effect"
import { invalid, notFound, type Forbidden, type Invalid, type NotFound, type Unauthorized } from "../domain/errors.ts"
import { isUuid } from "../domain/ids.ts"
import type { Resource } from "../domain/resources.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import { keyStateRelation, keyStateSql, type KeyState } from "../access/keys/key-check.ts"
import type postgres from "postgres"
import { makeBatcher } from "./batch.ts"
import { CURSOR_ERROR_MESSAGES, decodeCursor, encodeCursor, type CursorPosition } from "./cursor.ts"
import { dayKeys, dayRanges, listRequest, namePattern, type ListQuery } from "./lists.ts"
import { answer, readSetup, type Json, type Read, type Served } from "./served.ts"
import type { ReadDb } from "./routing.ts"

// -----------------------------------------------------------------------------
// Batch statements (batch.ts). Each row of `r` is one request: its key, Host and resource
// for the key check, then what it asks for; `n`, its ordinality, tells whose an answer row
// is. Results are read raw: columns arrive as the bytes PostgreSQL sent, and only what is
// needed is decoded (see pageAnswer).

/** Records of a name-filtered list looked at along the page index before the trigram index is asked. */
const NAME_WALK = 5000

/** Most day keys a range of a name filter's looks at; a longer range takes the name's matches whatever their day. */
const MAX_DAY_KEYS = 200

/** Most requests answered by one statement. */
const MAX_GETS = 64
const MAX_PAGES = 16

interface GetItem {
  readonly keyId: string
  readonly host: string | undefined
  readonly resource: Resource
  readonly companyId: string
  readonly id: string
}

const GET_BATCH = `
  select r.n, s.state, '{"data":' || v.body || '}' as body
    from unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::uuid[]) with ordinality as r(key_id, host, resource, company_id, id, n)
   cross join lateral ${keyStateSql("r.key_id", "r.host", "r.resource")}
    left join lateral (
      select v.body from service.views v
       where s.state = 'ok' and v.resource = r.resource and v.id = r.id and v.company_id = r.company_id
    ) v on true`

/** A page of a list without a name or status filter. */
interface PageItem {
  readonly keyId: string
  readonly host: string | undefined
  readonly resource: Resource
  readonly companyId: string
  /** Bounds of created_at, exclusive: -infinity and infinity when the request gave none. */
  readonly after: string
  readonly before: string
  /** The cursor's position, exclusive: infinity and the greatest uuid on a first page. */
  readonly positionAt: string
  readonly positionId: string
  readonly limit: number
}

const OPEN_AFTER = "-infinity"
const OPEN_BEFORE = "infinity"
const FIRST_POSITION_ID = "ffffffff-ffff-ffff-ffff-ffffffffffff"

// Every bound is a condition (an open one is infinite), so that every page of every list is
// the same range scan of views_page: page N costs what page 1 costs. Timestamps travel as
// text: the cursor's has microseconds, which a JS Date would lose. A page's rows come out
// in the order of its own scan, newest first, as with the single statement below. One more
// record than the page is read: if it is there, there is a next page. The resource is named
// twice: as the rows hold it, and by its number, which keys the page indexes (sql/034).
const PAGE_BATCH = `
  select r.n, s.state, w.id, w.body, w.ts
    from unnest($1::uuid[], $2::text[], $3::text[], $4::uuid[], $5::text[], $6::text[], $7::text[], $8::uuid[], $9::int[])
         with ordinality as r(key_id, host, resource, company_id, after, before, position_at, position_id, lim, n)
   cross join lateral ${keyStateSql("r.key_id", "r.host", "r.resource")}
    left join lateral (
      select v.id::text as id, v.body, v.created_at::text as ts
        from service.views v
       where s.state = 'ok' and v.company_id = r.company_id and v.resource = r.resource
         and service.resource_no(v.resource) = service.resource_no(r.resource)
         and v.created_at > r.after::timestamptz and v.created_at < r.before::timestamptz
         and (v.created_at, v.id) < (r.position_at::timestamptz, r.position_id)
       order by v.created_at desc, v.id desc
       limit r.lim + 1
    ) w on true`

/** A page's row as read (raw): the key's state, then id, body and created_at, null when refused or empty. */
type PageRow = readonly [
  state: Buffer,
  id: Buffer | null,
  body: Buffer | null,
  ts: Buffer | null,
  changed?: Buffer | null
]

/** A row of the name filter's walk (service.name_walk): a match, or the walk's last record (no body) and its days. */
type WalkRow = readonly [
  state: Buffer,
  id: Buffer | null,
  body: Buffer | null,
  ts: Buffer | null,
  firstDay: Buffer | null,
  lastDay: Buffer | null,
  oldestDay: Buffer | null
]

/** States, ids and timestamps are ASCII. */
const textOf = (b: Buffer) => b.toString("latin1")

/** Whether a statement's rows are the key's refusal (or no row at all: its key is gone). */
const refused = (rows: ReadonlyArray<PageRow>) => rows[0] === undefined || textOf(rows[0][0]) !== "ok"

/**
 * The list answer from a page's rows (up to limit + 1), or the key's refusal. A get's answer
 * is one value PostgreSQL made ('{"data":' || body || '}') and goes out as the bytes it came
 * in as; a page is joined here, as a string: joining bytes would take a fresh off-heap
 * buffer per answer, and V8 meets that much external memory with full collections (at 300
 * lists/s: 13 mark-compacts in 10 s instead of 3, p99 16 ms instead of 10).
 */
const pageAnswer = (
  rows: ReadonlyArray<PageRow>,
  limit: number,
  cursorOf: (position: CursorPosition) => string,
  sync?: { readonly after: string | undefined }
): Served<never> => {
  const state = (rows[0] === undefined ? "unknown" : textOf(rows[0][0])) as KeyState
  if (state !== "ok") return { _tag: "Refused", state }
  const count = rows[0]![2] === null ? 0 : rows.length
  const more = count > limit
  const n = more ? limit : count
  let body = '{"data":['
  for (let i = 0; i < n; i++) {
    if (i > 0) body += ","
    body += rows[i]![2]!.toString("utf8")
  }
  if (more) {
    const last = rows[n - 1]!
    body += `],"nextCursor":"${cursorOf({ createdAt: textOf(last[3]!), id: textOf(last[1]!) })}"`
  } else {
    body += '],"nextCursor":null'
  }
  if (sync !== undefined) {
    // Where the next sync starts: known once the walk is over (the last page). Nothing
    // changed: where this one started. The change times are whole milliseconds.
    const next = more
      ? null
      : n > 0
        ? textOf(rows[n - 1]![4]!)
        : sync.after === undefined
          ? null
          : `${sync.after.slice(0, 23)}Z`
    body += `,"nextUpdatedAfter":${next === null ? "null" : `"${next}"`}`
  }
  return { _tag: "Body", body: `${body}}` }
}

export class Views extends Context.Service<
  Views,
  {
    /** A page of the list: {"data":[...],"nextCursor":...}. */
    readonly list: (key: CurrentKeyShape, resource: Resource, query: ListQuery) => Read<Invalid>
    /** One record: {"data":{...}}. */
    readonly get: (key: CurrentKeyShape, resource: Resource, id: string) => Read<NotFound>
  }
>()("service/read/Views") {
  static readonly layer = Layer.effect(
    Views,
    Effect.gen(function* () {
      const { keys, cursorKey, router } = yield* readSetup

      // Each batch statement takes its parameters as one array per column, a value per request.
      // Written out for each: a helper mapping column functions over the items cost a quarter
      // more server CPU per list in bench:api, most of it in garbage collection. One pair of
      // batchers per pool: the primary's, and each standby's (routing.ts).
      const batchersFor = (sql: postgres.Sql) => {
        const gets = makeBatcher(async (items: ReadonlyArray<GetItem>) => {
          const rows = (await sql
            .unsafe(
              GET_BATCH,
              [
                items.map((g) => g.keyId),
                items.map((g) => g.host ?? null),
                items.map((g) => g.resource),
                items.map((g) => g.companyId),
                items.map((g) => g.id)
              ],
              { prepare: true }
            )
            .raw()) as unknown as ReadonlyArray<readonly [n: Buffer, state: Buffer, body: Buffer | null]>
          // A request whose key row is gone gets no row at all: unknown.
          const answers = new Array<Served<never> | undefined>(items.length).fill({ _tag: "Refused", state: "unknown" })
          for (const [n, stateText, body] of rows) {
            const state = textOf(stateText) as KeyState
            answers[Number(textOf(n)) - 1] =
              state !== "ok" ? { _tag: "Refused", state } : body === null ? undefined : { _tag: "Body", body }
          }
          return answers
        }, MAX_GETS)

        const pages = makeBatcher(async (items: ReadonlyArray<PageItem>) => {
          const rows = (await sql
            .unsafe(
              PAGE_BATCH,
              [
                items.map((p) => p.keyId),
                items.map((p) => p.host ?? null),
                items.map((p) => p.resource),
                items.map((p) => p.companyId),
                items.map((p) => p.after),
                items.map((p) => p.before),
                items.map((p) => p.positionAt),
                items.map((p) => p.positionId),
                items.map((p) => p.limit)
              ],
              { prepare: true }
            )
            .raw()) as unknown as ReadonlyArray<readonly [n: Buffer, ...PageRow]>
          const answers = items.map((): Array<PageRow> => [])
          for (const [n, ...row] of rows) answers[Number(textOf(n)) - 1]!.push(row)
          return answers
        }, MAX_PAGES)
        return { gets, pages }
      }
      // Weak: a standby's pools are replaced when it is lost (platform/db/read-replicas.ts).
      const batchers = new WeakMap<postgres.Sql, ReturnType<typeof batchersFor>>()
      const on = (sql: postgres.Sql) => {
        let b = batchers.get(sql)
        if (b === undefined) batchers.set(sql, (b = batchersFor(sql)))
        return b
      }

      const list = Effect.fnUntraced(function* (key: CurrentKeyShape, resource: Resource, query: ListQuery) {
        const r = listRequest(key.companyId, resource, query)
        let position: CursorPosition | undefined
        if (query.cursor !== undefined) {
          const decoded = decodeCursor(cursorKey, r.binding, query.cursor)
          if ("error" in decoded) {
            // A refused key gets its 401/403 before any complaint about its cursor.
            yield* keys.standing(key, resource)
            return yield* invalid(CURSOR_ERROR_MESSAGES[decoded.error])
          }
          position = decoded.position
        }
        const cursorOf = (last: CursorPosition) => encodeCursor(cursorKey, r.binding, last)
        const plain = r.updatedAfter === undefined && r.updatedBefore === undefined && !r.byChange
        if (plain && r.name === undefined && r.statuses === undefined) {
          const item: PageItem = {
            keyId: key.keyId,
            host: key.host,
            resource,
            companyId: key.companyId,
            after: r.createdAfter ?? OPEN_AFTER,
            before: r.createdBefore ?? OPEN_BEFORE,
            positionAt: position?.createdAt ?? OPEN_BEFORE,
            positionId: position?.id ?? FIRST_POSITION_ID,
            limit: r.limit
          }
          const served = yield* Effect.promise(() =>
            router.run(key, resource, (db) =>
              on(db.sql)
                .pages.load(item)
                .then((rows) => pageAnswer(rows, r.limit, cursorOf))
            )
          )
          return yield* answer(served, keys.refusal, key, resource)
        }
        // A status or a name filter has an index of its own, which a statement planned for
        // any batch would not use: such a list gets a statement of its own. So does a list
        // by change time (views_changed), a sync's, which is not the hot path.
        const byChange = r.byChange
        // The pieces of a list's statements, on one pool.
        const partsOn = (db: postgres.Sql) => {
          const order = byChange ? db`v.changed_at, v.id` : db`v.created_at desc, v.id desc`
          // The company's records of the resource in range, as `v`, but for the name and status filters.
          const bounds = db`v.company_id = ${key.companyId} and v.resource = ${resource}
                     and service.resource_no(v.resource) = service.resource_no(${resource})
                     ${r.createdAfter === undefined ? db`` : db`and v.created_at > ${r.createdAfter}::timestamptz`}
                     ${r.createdBefore === undefined ? db`` : db`and v.created_at < ${r.createdBefore}::timestamptz`}
                     ${r.updatedAfter === undefined ? db`` : db`and v.changed_at > ${r.updatedAfter}::timestamptz`}
                     ${r.updatedBefore === undefined ? db`` : db`and v.changed_at < ${r.updatedBefore}::timestamptz`}
                     ${
                       position === undefined
                         ? db``
                         : byChange
                           ? db`and (v.changed_at, v.id) > (${position.createdAt}::timestamptz, ${position.id}::uuid)`
                           : db`and (v.created_at, v.id) < (${position.createdAt}::timestamptz, ${position.id}::uuid)`
                     }`
          const columns = db`v.id::text as id, v.body, ${byChange ? db`v.changed_at::text` : db`v.created_at::text`} as ts
                         ${byChange ? db`, to_char(v.changed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as changed` : db``}`
          const named =
            r.name === undefined
              ? db``
              : db`and v.name is not null and service.fold_name(v.name) like service.fold_name(${namePattern(r.name)})`
          const page = (matching: ReturnType<typeof db>) =>
            db`
              select s.state, w.id, w.body, w.ts${byChange ? db`, w.changed` : db``}
                from ${keyStateRelation(db, key.keyId, key.host, resource)}
                left join lateral (${matching}) w on true`.raw() as unknown as Promise<ReadonlyArray<PageRow>>
          return { order, bounds, columns, named, page }
        }
        const read = (pools: ReadDb) => {
          const db = r.name === undefined ? pools.sql : pools.planned
          const { order, bounds, columns, named, page } = partsOn(db)
          // A name, newest first: the walk (sql/040_name_days.sql, service.name_walk) reads the
          // newest NAME_WALK records along the page index, which hold a page of any name one
          // record in a hundred has. When they hold less, the older matches are looked for day
          // range by day range from the walk's last record: as many days as the walk covered,
          // then ranges 4 times longer each (lists.ts, dayRanges), until a page is found.
          // views_name_days gives a range's matches through its day keys (lists.ts, dayKeys),
          // and only those are read and sorted, about a page's worth, never every match the
          // company has. Each statement has one plan whatever the statistics say: the walk
          // sorts nothing (sorting is off in it), and the ranges' inner statement has one index
          // it can use (offset 0 keeps the bounds out of it). Both are planned once, on the
          // generic pool.
          const byName = async (): Promise<ReadonlyArray<PageRow>> => {
            const g = partsOn(pools.sql)
            // Timestamps go as text: as timestamptz, postgres.js would make each a JS Date,
            // which knows no infinity and no microseconds.
            const walked = (await pools.sql`
              select s.state, w.id, w.body, w.ts, w.first_day::text, w.last_day::text, w.oldest_day::text
                from ${keyStateRelation(pools.sql, key.keyId, key.host, resource)}
                left join lateral service.name_walk(s.state = 'ok', ${key.companyId}::uuid, ${resource}::text,
                  ${r.createdAfter ?? OPEN_AFTER}::text::timestamptz, ${r.createdBefore ?? OPEN_BEFORE}::text::timestamptz,
                  ${position?.createdAt ?? OPEN_BEFORE}::text::timestamptz, ${position?.id ?? FIRST_POSITION_ID}::uuid,
                  ${namePattern(r.name!)}::text, ${NAME_WALK}::int, ${r.limit + 1}::int) w on true`.raw()) as unknown as ReadonlyArray<WalkRow>
            // The matches, and the walk's last record when they are less than a page (its body
            // is null): with none, the walk saw every record.
            const found: Array<PageRow> = []
            let boundary: WalkRow | undefined
            for (const row of walked) {
              if (row[2] !== null) found.push([row[0], row[1], row[2], row[3]])
              else if (row[1] !== null) boundary = row
            }
            const none: ReadonlyArray<PageRow> = walked.map((row) => [row[0], null, null, null])
            if (refused(none)) return none
            if (boundary === undefined || boundary[6] === null) return found.length > 0 ? found : none.slice(0, 1)
            const [, id, , at, firstDay, lastDay, oldestDay] = boundary
            const walkedTo = Number(textOf(lastDay!))
            let last: ReadonlyArray<PageRow> = none.slice(0, 1)
            const ranges = dayRanges(Number(textOf(oldestDay)), walkedTo, Number(textOf(firstDay!)) - walkedTo + 1)
            // A range of centuries (a record dated in year 1) would take thousands of keys:
            // such a range takes the name's matches whatever their day, then keeps its days'.
            const inner = (from: number, to: number) => {
              const keys = dayKeys(key.companyId, resource, from, to)
              return keys.length > MAX_DAY_KEYS
                ? {
                    days: pools.sql``,
                    upTo: pools.sql`and service.view_days(v.created_at, 1) between ${from} and ${to}`
                  }
                : {
                    days: pools.sql`and service.name_days(v.company_id, v.resource, v.created_at) && ${keys}::text[]`,
                    upTo: pools.sql``
                  }
            }
            for (const [from, to] of ranges) {
              const need = r.limit + 1 - found.length
              const { days, upTo } = inner(from, to)
              last = await g.page(pools.sql`
                select ${g.columns} from (
                  select v.resource, v.id from (
                    select v.resource, v.id, v.company_id, v.created_at, v.changed_at from service.views v
                     where s.state = 'ok' and v.name is not null
                       and service.fold_name(v.name) like service.fold_name(${namePattern(r.name!)})
                       ${days}
                    offset 0
                  ) v
                   where ${g.bounds} and (v.created_at, v.id) < (${textOf(at!)}::text::timestamptz, ${textOf(id!)}::uuid) ${upTo}
                   order by v.created_at desc, v.id desc
                   limit ${need}
                ) m join service.views v on v.resource = m.resource and v.id = m.id
                 order by v.created_at desc, v.id desc
                 limit ${need}`)
              if (refused(last)) return last
              for (const row of last) if (row[1] !== null) found.push(row)
              if (found.length > r.limit) break
            }
            return found.length > 0 ? found : last
          }
          const statuses = r.statuses
          const rows = (async (): Promise<ReadonlyArray<PageRow>> => {
            if (statuses !== undefined) {
              // Each status its own ordered range of views_status_page, merged: one status or a
              // group (open: open and in_progress), the same plan whatever the statistics say
              // (a filter on the page index or a sort of every match are what they could pick).
              return page(db`
                select ${columns}
                  from unnest(${statuses as string[]}::text[]) st(status)
                  cross join lateral (
                    select v.* from service.views v
                     where s.state = 'ok' and ${bounds} and v.status = st.status
                     order by ${order}
                     limit ${r.limit + 1}
                  ) v
                 order by ${order}
                 limit ${r.limit + 1}`)
            }
            if (r.name === undefined) {
              return page(db`
                select ${columns} from service.views v
                 where s.state = 'ok' and ${bounds}
                 order by ${order}
                 limit ${r.limit + 1}`)
            }
            if (!byChange) return byName()
            // By change time (a sync's list, not the hot path): first along views_changed, the
            // NAME_WALK records changed first only; when those hold less than a page, the
            // trigram index finds the name's records.
            const walked = await page(db`
              select ${columns} from (
                select v.* from service.views v
                 where s.state = 'ok' and ${bounds}
                 order by ${order}
                 limit ${NAME_WALK}
              ) v
               where true ${named}
               order by ${order}
               limit ${r.limit + 1}`)
            if (refused(walked) || walked.length > r.limit) return walked
            // The page is picked from all the matches' keys (offset 0: found through the
            // trigram index, not walked in order), and only its records are read whole.
            return page(db`
              select ${columns} from (
                select v.resource, v.id from (
                  select v.resource, v.id, v.created_at, v.changed_at from service.views v
                   where s.state = 'ok' and ${bounds} ${named}
                  offset 0
                ) v
                 order by ${order}
                 limit ${r.limit + 1}
              ) m join service.views v on v.resource = m.resource and v.id = m.id
               order by ${order}
               limit ${r.limit + 1}`)
          })()
          return rows.then((rows) =>
            pageAnswer(rows, r.limit, cursorOf, byChange ? { after: r.updatedAfter } : undefined)
          )
        }
        const served = yield* Effect.promise(() => router.run(key, resource, read))
        return yield* answer(served, keys.refusal, key, resource)
      })

      const none = (resource: Resource, id: string) => Effect.fail(notFound(`no ${resource} record with id ${id}`))

      const get = (key: CurrentKeyShape, resource: Resource, id: string) => {
        // An id of another shape names no record; the key's refusal still comes first.
        if (!isUuid(id)) return Effect.andThen(keys.standing(key, resource), none(resource, id))
        const item: GetItem = { keyId: key.keyId, host: key.host, resource, companyId: key.companyId, id }
        return Effect.flatMap(
          Effect.promise(() =>
            router.run(key, resource, (db) =>
              on(db.sql)
                .gets.load(item)
                .then((served): Served<"none"> => served ?? { _tag: "Failed", error: "none" })
            )
          ),
          (served): Effect.Effect<Json, NotFound | Unauthorized | Forbidden> =>
            served._tag === "Failed" ? none(resource, id) : answer(served, keys.refusal, key, resource)
        )
      }

      return Views.of({ list, get })
    })
  )
}
