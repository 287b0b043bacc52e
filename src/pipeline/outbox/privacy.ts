// When an incident becomes a privacy case, the copies of it that earlier events carry lose
// the withheld fields too: the events feed, Send Again and replay serve those copies, and a
// privacy case is never to be sent with the person's details again (docs/privacy.md#privacy-cases).
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { DESTINATIONS_CHANNEL } from "../../platform/db/channels.ts"
import { redactPrivacyCase } from "../../domain/records/incidents.ts"
import { eventPayload } from "./events.ts"

/** Rewrites the stored payloads of every outbox event about these incidents. Returns how many changed. */
export const scrubPrivacyCases = async (tx: Tx, incidentIds: ReadonlyArray<string>): Promise<number> => {
  if (incidentIds.length === 0) return 0
  const rows = await tx<{ id: string; payload: string }[]>`
    select e.id::text, ${tx.unsafe(eventPayload("e"))} as payload from service.events e
    where e.resource = 'incidents' and e.record_id = any(${[...incidentIds]}::uuid[])`
  const changed = rows.flatMap((r) => {
    const payload = redactPrivacyCase(r.payload)
    return payload === r.payload ? [] : [{ id: r.id, payload }]
  })
  if (changed.length > 0) {
    await tx`
      update service.events e set payload = x.payload
      from json_to_recordset(${JSON.stringify(changed)}::text::json) as x(id uuid, payload text)
      where e.id = x.id`
    // Deliveries the engine already holds in memory were read with the old payload: at
    // commit it hands back those not yet sending, and reads them again, scrubbed.
    await tx`select pg_notify(${DESTINATIONS_CHANNEL}, 'events')`
  }
  return changed.length
}
