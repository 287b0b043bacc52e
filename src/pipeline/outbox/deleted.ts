// Deleted means gone (docs/privacy.md, "Deleted records"): when a record is deleted, the
// copies of it that its stored events carry keep only its identifiers, in the transaction
// that applies the delete, so the events feed, retries, Send Again and replays never send its
// data again. The deletions feed lists it as before (service.deletions).
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { DESTINATIONS_CHANNEL } from "../../platform/db/channels.ts"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { scrubToIdentifiers } from "../../domain/records/deleted.ts"
import { isResource } from "../../domain/resources.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { eventPayload } from "./events.ts"

/** Resources some event carries: only their deletions have stored copies to scrub. */
const WITH_EVENTS: ReadonlySet<string> = new Set(Object.values(EVENT_RESOURCE))

/** Records scrubbed per statement. */
const CHUNK = 1000

/** Whether some resource of `refs` has events at all (most deletions need no statement). */
export const mayHaveEvents = (refs: ReadonlyArray<RecordRef>): boolean => refs.some((r) => WITH_EVENTS.has(r.resource))

/**
 * Rewrites the stored payloads of every outbox event about these deleted records to their
 * identifiers (the events written earlier in the same transaction included). Returns how many
 * changed.
 */
export const scrubDeletedRecords = async (tx: Tx, refs: ReadonlyArray<RecordRef>): Promise<number> => {
  const gone = refs.filter((r) => WITH_EVENTS.has(r.resource))
  let total = 0
  const changedIds: string[] = []
  for (let i = 0; i < gone.length; i += CHUNK) {
    const part = gone.slice(i, i + CHUNK)
    const rows = await tx<{ id: string; resource: string; payload: string }[]>`
      select e.id::text, e.resource, ${tx.unsafe(eventPayload("e"))} as payload from service.events e
      join unnest(${part.map((r) => r.resource)}::text[], ${part.map((r) => r.id)}::uuid[]) as d(resource, id)
        on e.record_id = d.id and e.resource = d.resource`
    const changed = rows.flatMap((r) => {
      if (!isResource(r.resource)) return []
      const payload = scrubToIdentifiers(r.resource, r.payload)
      return payload === r.payload ? [] : [{ id: r.id, payload }]
    })
    if (changed.length === 0) continue
    await tx`
      update service.events e set payload = x.payload
      from json_to_recordset(${JSON.stringify(changed)}::text::json) as x(id uuid, payload text)
      where e.id = x.id`
    total += changed.length
    for (const c of changed) changedIds.push(c.id)
  }
  // Deliveries the engine holds in memory were read with the old payload: at commit it hands
  // back those not yet sending, and reads them again, scrubbed. Only when one of these events
  // may be there (not fanned out yet, or with a delivery still to send): a record deleted long
  // after its events went out does not disturb the engine.
  if (changedIds.length > 0) {
    const [waiting] = await tx<{ any: boolean }[]>`
      select exists (
        select 1 from service.events e
        where e.id = any(${changedIds}::uuid[]) and (
          (e.commit_lsn, e.seq) >= (select commit_lsn, seq from service.webhook_fanout)
          -- as the two partial unique indexes of (event, destination) read them
          or exists (select 1 from service.webhook_deliveries d
                     where d.event_id = e.id and d.endpoint_id is not null and d.state = 'pending')
          or exists (select 1 from service.webhook_deliveries d
                     where d.event_id = e.id and d.subscription_id is not null and d.state = 'pending'))
      ) as any`
    if (waiting?.any) await tx`select pg_notify(${DESTINATIONS_CHANNEL}, 'events')`
  }
  return total
}
