// What the service holds at the end of a history, against what the oracle says it must: views,
// events (each once, its payload as of its commit, scrubbed where the rules say), tombstones,
// the quarantine, the record changes followers read, and a scan of every table of the service's for text that must be gone.
import type postgres from "postgres"
import { eventPayload } from "../../../src/pipeline/outbox/events.ts"
import { resourceOfTable } from "../../../src/domain/resources.ts"
import type { Expected, ExpectedEvent } from "./oracle.ts"

export interface Actual {
  readonly views: ReadonlyMap<string, string>
  readonly events: ReadonlyArray<{ kind: string; resource: string; id: string; payload: string; at: number }>
  readonly tombstones: ReadonlySet<string>
  readonly quarantine: ReadonlySet<string>
  /** Forbidden text found: marker -> where. */
  readonly leaks: ReadonlyArray<string>
  /** Where the record changes followers read disagree with the views and events. */
  readonly changes: ReadonlyArray<string>
}

export const readActual = async (sql: postgres.Sql, forbidden: ReadonlyMap<string, string>): Promise<Actual> => {
  const views = await sql<{ resource: string; id: string; body: string }[]>`
    select resource, id::text, body from service.views`
  const events = await sql<{ kind: string; resource: string; id: string; payload: string; at: number }[]>`
    select e.event as kind, e.resource, e.record_id::text as id, ${sql.unsafe(eventPayload("e"))} as payload,
           (extract(epoch from e.created_at) * 1000)::float8 as at
    from service.events e order by e.commit_lsn, e.seq`
  const deletions = await sql<{ resource: string; id: string }[]>`select resource, id::text from service.deletions`
  const held = await sql<{ tbl: string; key: string }[]>`select tbl, key from service.capture_quarantine`
  // The record changes (GET /api/v1/stream's ground) agree with what is served: a record's latest
  // change is an upsert exactly where a view is. That no change is missed is for a follower to
  // say, reading along the history (follower.ts): an event need not come with a change, when its
  // batch left the record as it was.
  const changes = await sql<{ k: string; why: string }[]>`
    select v.resource || '/' || v.id as k, 'has a view but its latest change is a delete' as why
    from service.views v join service.record_changes c using (resource, id)
    where c.op = 'delete'

    union all
    select c.resource || '/' || c.id, 'its latest change is an upsert but it has no view'
    from service.record_changes c
    where c.op = 'upsert' and not exists (select 1 from service.views v where v.resource = c.resource and v.id = c.id)`
  const leaks: string[] = []
  if (forbidden.size > 0) {
    const tables = await sql<{ name: string }[]>`
      select tablename as name from pg_tables where schemaname = 'service' order by 1`
    const markers = [...forbidden.keys()]
    for (const { name } of tables) {
      const found = await sql<{ m: string }[]>`
        select m from unnest(${markers}::text[]) as m
        where exists (select 1 from ${sql(`service.${name}`)} t where strpos(t::text, m) > 0)`
      for (const { m } of found) leaks.push(`${m} (${forbidden.get(m)}) in service.${name}`)
    }
  }
  return {
    views: new Map(views.map((v) => [`${v.resource}/${v.id}`, v.body])),
    events: events.map((e) => ({ ...e, at: Math.round(e.at) })),
    tombstones: new Set(deletions.map((d) => `${d.resource}/${d.id}`)),
    quarantine: new Set(held.map((h) => `${resourceOfTable(h.tbl) ?? h.tbl}/${h.key}`)),
    leaks,
    changes: changes.map((c) => `record change: ${c.k} ${c.why}`)
  }
}

const fits = (e: ExpectedEvent, at: number) =>
  typeof e.at === "number" ? e.at === at : at >= e.at[0] - 1 && at <= e.at[1] + 1

const brief = (s: string) => (s.length > 400 ? `${s.slice(0, 400)}…` : s)

/** Every way the service differs from the oracle, one line each (none: it agrees). */
export const differences = (expected: Expected, actual: Actual): string[] => {
  const out: string[] = []
  for (const [k, body] of expected.views) {
    const got = actual.views.get(k)
    if (got === undefined) out.push(`view ${k} missing; expected ${brief(body)}`)
    else if (got !== body && got !== expected.viewsOr.get(k))
      out.push(`view ${k} differs:\n    expected ${brief(body)}\n    actual   ${brief(got)}`)
  }
  for (const [k, body] of actual.views)
    if (!expected.views.has(k)) out.push(`view ${k} should not exist: ${brief(body)}`)

  // Events: each expected one matched once by kind, record, payload and commit time.
  const left = [...expected.events]
  const extra: (typeof actual.events)[number][] = []
  for (const a of actual.events) {
    const i = left.findIndex(
      (e) => e.kind === a.kind && e.resource === a.resource && e.id === a.id && e.payload === a.payload && fits(e, a.at)
    )
    if (i >= 0) left.splice(i, 1)
    else extra.push(a)
  }
  for (const a of extra) {
    const near = left.find((e) => e.kind === a.kind && e.id === a.id)
    out.push(
      `event ${a.kind} ${a.id} at ${new Date(a.at).toISOString()} not expected: ${brief(a.payload)}` +
        (near === undefined ? "" : `\n    nearest expected at ${JSON.stringify(near.at)}: ${brief(near.payload)}`)
    )
  }
  for (const e of left) {
    if (extra.some((a) => a.kind === e.kind && a.id === e.id)) continue // said above
    out.push(`event ${e.kind} ${e.id} at ${JSON.stringify(e.at)} missing: ${brief(e.payload)}`)
  }

  for (const k of expected.tombstones.required) if (!actual.tombstones.has(k)) out.push(`tombstone for ${k} missing`)
  for (const k of actual.tombstones)
    if (!expected.tombstones.allowed.has(k)) out.push(`tombstone for ${k}, which was not deleted`)
  for (const k of expected.poisoned) if (!actual.quarantine.has(k)) out.push(`${k} cannot be shaped, but is not held`)
  for (const k of actual.quarantine) if (!expected.held.has(k)) out.push(`${k} is held, but should not be`)
  for (const l of actual.leaks) out.push(`leak: ${l}`)
  out.push(...actual.changes)
  return out
}
