// Writing events into the outbox and waking delivery at commit.
import type { TransactionSql } from "postgres"
import { formatLsn, type Lsn } from "../capture/lsn.ts"
import type { EventKind } from "../domain/event-kinds.ts"
import type { Resource } from "../domain/resources.ts"
import { uuidv7 } from "./ids.ts"

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

/** Inserts events (duplicates by (commit_lsn, seq) are ignored) and notifies at commit. */
export const writeEvents = async (tx: TransactionSql<Record<string, unknown>>, events: ReadonlyArray<OutboxEvent>) => {
  if (events.length === 0) return
  const now = Date.now()
  const rows = events.map((e) => ({
    id: uuidv7(now),
    company_id: e.companyId,
    event: e.event,
    resource: e.resource,
    record_id: e.recordId,
    commit_lsn: formatLsn(e.commitLsn),
    seq: e.seq,
    payload: e.payload,
    created_at: e.createdAt.toISOString()
  }))
  await tx`
    insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
    select id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at
    from json_to_recordset(${JSON.stringify(rows)}::text::json) as x(id uuid, company_id uuid, event text, resource text,
      record_id uuid, commit_lsn pg_lsn, seq int, payload text, created_at timestamptz)
    on conflict (commit_lsn, seq) do nothing`
  await tx`select pg_notify(${EVENTS_CHANNEL}, ${String(events.length)})`
}
