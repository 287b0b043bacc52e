// Which destinations are failing now (webhook.failing raised, webhook.recovered not yet), as
// the engine keeps them in memory: a success of one of these is its recovery, and a fully
// failed delivery of any other its failing, so the hot path asks a set, not the database.
// Re-read when a destination's alert state changes (sql/060's notice) and every few seconds;
// the database decides each change (raise.ts), so a stale set costs a late alert, never two.
import type { Sql } from "postgres"

export const ALERTS_CHANNEL = "service_webhook_alerts"

export type Failing = {
  readonly has: (destination: string) => boolean
  /** Reads the set again. */
  readonly reload: () => Promise<void>
  /** Marks a change this process raised, before the next read. */
  readonly set: (destination: string, failing: boolean) => void
}

export const makeFailing = (sql: Sql): Failing => {
  let ids = new Set<string>()
  return {
    has: (id) => ids.has(id),
    set: (id, failing) => void (failing ? ids.add(id) : ids.delete(id)),
    reload: async () => {
      const rows = await sql<{ id: string }[]>`
        select id::text from service.webhook_endpoints where failing_since is not null
        union all select id::text from service.webhook_subscriptions where failing_since is not null`
      ids = new Set(rows.map((r) => r.id))
    }
  }
}
