// Writing events into the outbox and waking delivery at commit.
import type { TransactionSql } from "postgres"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import type { EventKind } from "../../domain/event-kinds.ts"
import type { Resource } from "../../domain/resources.ts"
import { SEPARATOR } from "../projection/columns.ts"
import { eventId } from "./ids.ts"

export const EVENTS_CHANNEL = "service_events"

export interface OutboxEvent {
  readonly companyId: string
  readonly event: EventKind
  readonly resource: Resource
  readonly recordId: string
  readonly commitLsn: Lsn
  readonly seq: number
  readonly payload: string
  readonly createdAt: Date
}

/**
 * Inserts events and notifies at commit. (commit_lsn, seq) is unique: capture writes a
 * transaction's events in the database transaction that moves the checkpoint past it, and
 * only while the checkpoint is where it left it (src/pipeline/capture/checkpoint.ts), so an event
 * is never written twice; were it, the insert would fail rather than keep a second copy.
 */
export const writeEvents = async (tx: TransactionSql<Record<string, unknown>>, events: ReadonlyArray<OutboxEvent>) => {
  await Promise.all(eventWrites(events)(tx))
}

/**
 * An event's payload in SQL, for the event row aliased `e`: its own copy, or (null) the body
 * its record's view holds. Read in one statement with the event row, it is the body of the
 * event's commit: when a view's body changes or the view goes, sql/031's triggers copy the old
 * body into the events pointing at it, in that transaction (docs/design.md#design-decisions,
 * "An event points at its record's view"). `prefix`: for a relation that renamed the event's
 * resource and record_id columns (`event_resource`).
 */
export const eventPayload = (e: string, prefix = "") =>
  `coalesce(${e}.payload, (select v.body from service.views v where v.resource = ${e}.${prefix}resource and v.id = ${e}.${prefix}record_id))`

/**
 * writeEvents' statements, their parameters built now and run by the returned function.
 * `viewed`: events whose payload is the body of their record's view as written earlier in
 * the same transaction (the view's statement must go first): they keep no copy of it, and
 * point at the view instead (payload null) until the view's body changes.
 */
export const eventWrites = (
  events: ReadonlyArray<OutboxEvent>,
  viewed: (e: OutboxEvent) => boolean = () => false
): ((tx: TransactionSql<Record<string, unknown>>) => Array<Promise<unknown>>) => {
  if (events.length === 0) return () => []
  // Every column cannot hold the separator (src/pipeline/projection/columns.ts): ids, the service's
  // names, LSNs, numbers, timestamps and JSON payloads. Built in one pass (packed's form);
  // a transaction's events share its LSN and commit time, formatted once.
  let id = "",
    company = "",
    event = "",
    resource = "",
    record = "",
    lsn = "",
    seq = "",
    payload = "",
    created = ""
  let lastLsn: Lsn | null = null
  let lsnText = ""
  let lastAt: Date | null = null
  let atText = ""
  for (let i = 0; i < events.length; i++) {
    const e = events[i]!
    if (e.commitLsn !== lastLsn) lsnText = formatLsn((lastLsn = e.commitLsn))
    if (e.createdAt !== lastAt) atText = (lastAt = e.createdAt).toISOString()
    const sep = i === 0 ? "" : SEPARATOR
    // From the event's place, not drawn: a batch written again gives its events the same ids (ids.ts).
    id += sep + eventId(e.createdAt.getTime(), e.commitLsn, e.seq)
    company += sep + e.companyId
    event += sep + e.event
    resource += sep + e.resource
    record += sep + e.recordId
    lsn += sep + lsnText
    seq += sep + e.seq
    payload += sep + (viewed(e) ? "" : e.payload)
    created += sep + atText
  }
  const count = String(events.length)
  return (tx) => [
    tx`
      insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
      select x.id, x.company_id, x.event, x.resource, x.record_id, x.commit_lsn, x.seq, x.payload, x.created_at
      from unnest(string_to_array(${id}, chr(30))::uuid[], string_to_array(${company}, chr(30))::uuid[],
        string_to_array(${event}, chr(30)), string_to_array(${resource}, chr(30)), string_to_array(${record}, chr(30))::uuid[],
        string_to_array(${lsn}, chr(30))::pg_lsn[], string_to_array(${seq}, chr(30))::int[], string_to_array(${payload}, chr(30), ''),
        string_to_array(${created}, chr(30))::timestamptz[]) as x(id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)`.execute(),
    tx`select pg_notify(${EVENTS_CHANNEL}, ${count})`.execute()
  ]
}
