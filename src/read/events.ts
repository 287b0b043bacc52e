// GET /api/v1/events and /api/v1/events/{id}: integrators catch up on the last 30 days of
// events themselves (like Stripe's /v1/events). An event is listed when the key could
// subscribe to it: its record kind is in the key's scopes and its module is on now.
//
// Each event is shown as it was delivered: {"id","event","createdAt","data"} with data the
// outbox payload spliced in byte for byte (the record at that event's commit). Here id is
// the event's id. A webhook body's id is the delivery's id instead (one per event and
// destination), so a receiver matches the two by event, data.id and createdAt
// (the commit time, identical in both): one record fires one event of a kind per commit.
import { Context, Effect, Layer } from "effect"
import type postgres from "postgres"
import { notFound, type Forbidden, type Invalid, type NotFound } from "../domain/errors.ts"
import {
  ALERT_RESOURCE,
  EVENT_RESOURCE,
  isAlertKind,
  type EventKind,
  type WebhookEvent
} from "../domain/event-kinds.ts"
import { isUuid } from "../domain/ids.ts"
import type { Resource } from "../domain/resources.ts"
import { deliveryBody } from "../webhooks/net/body.ts"
import { eventPayload } from "../pipeline/outbox/events.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import { keyStateRelation } from "../access/keys/key-check.ts"
import { CURSOR_ERROR_MESSAGES, encodeCursor, pageJson, pagePosition } from "./cursor.ts"
import type { CursorBinding } from "./cursor.ts"
import { badCursor, ISO_MILLIS, listRefusal, readSetup, refusedBy } from "./served.ts"
import type { FeedList, KeyStateRow, Read, Served } from "./served.ts"
import type { KeySeen } from "./routing.ts"
import { DEFAULT_LIMIT, EVENTS_WINDOW_DAYS } from "./lists.ts"

/** The query as its endpoint decodes it (faces/api/events-api.ts): dates are canonical UTC timestamps. */
export interface EventsQuery {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
  readonly createdAfter?: string | undefined
  readonly createdBefore?: string | undefined
  readonly type?: WebhookEvent | undefined
}

export interface EventsRequest {
  readonly limit: number
  readonly createdAfter: string | undefined
  readonly createdBefore: string | undefined
  readonly type: WebhookEvent | undefined
  readonly binding: CursorBinding
}

/** The key as the feed needs it (CurrentKey has more). */
export interface FeedKey {
  readonly keyId: string
  readonly companyId: string
  readonly host: string | undefined
}

/** A decoded query as a request. Pure. */
export const eventsRequest = (companyId: string, query: EventsQuery): EventsRequest => {
  const { createdAfter, createdBefore, type } = query
  return {
    limit: query.limit ?? DEFAULT_LIMIT,
    createdAfter,
    createdBefore,
    type,
    binding: { companyId, resource: "events", filters: { createdAfter, createdBefore, type } }
  }
}

interface EventRow extends KeyStateRow {
  readonly id: string | null
  readonly event: string | null
  readonly created: string | null
  readonly payload: string | null
  readonly ts: string | null
}

const bodyOf = (r: EventRow) =>
  deliveryBody({ deliveryId: r.id!, event: r.event!, createdAt: r.created!, payload: r.payload! })

/** An event row's columns as the feed reads them. */
const eventColumns = (sql: postgres.Sql) =>
  sql`e.id::text as id, e.event, to_char(e.created_at at time zone 'UTC', ${sql.unsafe(ISO_MILLIS)}) as created, ${sql.unsafe(eventPayload("e"))} as payload, e.created_at::text as ts`

/**
 * The events a key may read within the feed's window: about records of its scopes in its
 * company's modules, and the alerts about its own subscriptions (docs/events.md#failure-alerts).
 */
const readableByKey = (sql: postgres.Sql, keyId: string) =>
  sql`(e.resource = any(s.k_scopes) and e.resource = any(s.c_modules)
    or e.resource = ${ALERT_RESOURCE} and exists (select 1 from service.webhook_alerts a where a.event_id = e.id and a.key_id = ${keyId}::uuid))
    and e.created_at > now() - make_interval(days => ${EVENTS_WINDOW_DAYS})`

export const listEvents: FeedList<FeedKey, EventsQuery> = async (sql, cursorKey, key, query, seen) => {
  const r = eventsRequest(key.companyId, query)
  const resource: Resource | undefined =
    r.type === undefined || isAlertKind(r.type) ? undefined : EVENT_RESOURCE[r.type]
  const start = pagePosition(cursorKey, r.binding, query.cursor)
  if ("error" in start) return badCursor(sql, key, resource, CURSOR_ERROR_MESSAGES[start.error])
  const { position } = start
  const rows = await sql<EventRow[]>`
    select s.state, s.k_scopes, s.c_modules, w.id, w.event, w.created, w.payload, w.ts
      from ${keyStateRelation(sql, key.keyId, key.host, resource)}
      left join lateral (
        select ${eventColumns(sql)}
          from service.events e
         where s.state = 'ok' and e.company_id = ${key.companyId}
           and ${readableByKey(sql, key.keyId)}
           ${r.type === undefined ? sql`` : sql`and e.event = ${r.type}`}
           ${r.createdAfter === undefined ? sql`` : sql`and e.created_at > ${r.createdAfter}::timestamptz`}
           ${r.createdBefore === undefined ? sql`` : sql`and e.created_at < ${r.createdBefore}::timestamptz`}
           ${position === undefined ? sql`` : sql`and (e.created_at, e.id) < (${position.createdAt}::timestamptz, ${position.id}::uuid)`}
         order by e.created_at desc, e.id desc
         limit ${r.limit + 1}
      ) w on true`
  const refused = listRefusal(rows[0], seen, resource, (resource) => ({
    _tag: "Scope",
    resource,
    // A type with a resource is a record event (alerts have none, so no scope refuses them).
    event: r.type as EventKind | undefined
  }))
  if (refused !== undefined) return refused
  const count = rows[0]!.id === null ? 0 : rows.length
  const body = pageJson(rows, count, r.limit, bodyOf, (last) => encodeCursor(cursorKey, r.binding, last))
  return { _tag: "Body", body }
}

/** One event the key could see in the list; 404 otherwise (another company's, too old, not readable). */
export const getEvent = async (
  sql: postgres.Sql,
  key: FeedKey,
  id: string,
  seen: (key: KeySeen) => void = () => {}
): Promise<Served<NotFound>> => {
  const wanted = isUuid(id) ? id.toLowerCase() : null
  const [row] = await sql<EventRow[]>`
    select s.state, s.k_scopes, s.c_modules, w.id, w.event, w.created, w.payload, w.ts
      from ${keyStateRelation(sql, key.keyId, key.host, undefined)}
      left join lateral (
        select ${eventColumns(sql)}
          from service.events e
         where s.state = 'ok' and ${wanted}::uuid is not null and e.id = ${wanted}::uuid and e.company_id = ${key.companyId}
           and ${readableByKey(sql, key.keyId)}
      ) w on true`
  const refused = refusedBy(row)
  if (refused !== undefined) return refused
  seen(row!)
  if (row!.id === null)
    return {
      _tag: "Failed",
      error: notFound(`no event with id ${id} in the last ${EVENTS_WINDOW_DAYS} days that this key can read`)
    }
  return { _tag: "Body", body: `{"data":${bodyOf(row!)}}` }
}

export class EventsFeed extends Context.Service<
  EventsFeed,
  {
    /** A page of the feed: {"data":[...],"nextCursor":...}. */
    readonly list: (key: CurrentKeyShape, query: EventsQuery) => Read<Invalid | Forbidden>
    /** One event: {"data":{...}}. */
    readonly get: (key: CurrentKeyShape, id: string) => Read<NotFound>
  }
>()("service/read/EventsFeed") {
  static readonly layer = Layer.effect(
    EventsFeed,
    Effect.map(readSetup, ({ cursorKey, serve }) =>
      EventsFeed.of({
        list: (key, query) => serve(key, undefined, (db, seen) => listEvents(db.sql, cursorKey, key, query, seen)),
        get: (key, id) => serve(key, undefined, (db, seen) => getEvent(db.sql, key, id, seen))
      })
    )
  )
}
