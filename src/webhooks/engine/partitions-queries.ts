// The partitions' SQL: each engine process says it is alive, takes its share of the outbox's
// partitions under a lease renewed by the heartbeat, and gives them up at shutdown.
import type { Sql } from "postgres"
import { PARTITIONS_CHANNEL } from "../../platform/db/channels.ts"
import { PARTS, type Pos } from "./positions.ts"

export type OwnedPart = { readonly part: number; readonly cursor: Pos; readonly recorded: Pos }

export type HeartbeatResult = {
  /** Live engine processes, this one included. */
  readonly live: number
  /** How many partitions this process should own. */
  readonly share: number
  /** The partitions this process owns now, those just taken included. */
  readonly owned: ReadonlyArray<OwnedPart>
}

type PartRow = { part: number; commit_lsn: string; seq: number; recorded_lsn: string; recorded_seq: number }
const owned = (r: PartRow): OwnedPart => ({
  part: r.part,
  cursor: { lsn: r.commit_lsn, seq: r.seq },
  recorded: { lsn: r.recorded_lsn, seq: r.recorded_seq }
})

/**
 * Says this process is alive, renews the leases of its partitions, and takes free ones (never
 * owned, released, or whose owner stopped renewing) up to its share. Leases are on the
 * database's clock: they are about processes being alive, not about the schedule.
 */
export const heartbeat = async (sql: Sql, owner: string, leaseMs: number): Promise<HeartbeatResult> => {
  const [l] = await sql<{ live: number }[]>`
    with me as (
      insert into service.webhook_engines (id, alive_until) values (${owner}, now() + ${leaseMs} * interval '1 millisecond')
      on conflict (id) do update set alive_until = excluded.alive_until
    ), gone as (
      delete from service.webhook_engines where alive_until < now() - interval '1 hour'
    )
    select 1 + count(*)::int as live from service.webhook_engines where alive_until > now() and id <> ${owner}`
  const live = Math.max(1, l!.live)
  const share = Math.ceil(PARTS / live)
  // Each statement on its own, locking in partition order like the writes: no deadlock, and
  // no lock held across round trips.
  const mine = await sql<PartRow[]>`
    with lk as materialized (
      select part from service.webhook_fanout_parts where owner = ${owner} order by part for update
    )
    update service.webhook_fanout_parts p set lease_until = now() + ${leaseMs} * interval '1 millisecond'
    from lk where p.part = lk.part
    returning p.part, p.commit_lsn::text, p.seq, p.recorded_lsn::text, p.recorded_seq`
  let taken: ReadonlyArray<PartRow> = []
  if (mine.length < share) {
    taken = await sql<PartRow[]>`
      update service.webhook_fanout_parts p set owner = ${owner}, lease_until = now() + ${leaseMs} * interval '1 millisecond'
      where p.part in (
        select part from service.webhook_fanout_parts
        where owner is null or lease_until is null or lease_until <= now()
        order by part limit ${share - mine.length}
        for update skip locked)
      returning p.part, p.commit_lsn::text, p.seq, p.recorded_lsn::text, p.recorded_seq`
  }
  return { live, share, owned: [...mine, ...taken].map(owned).sort((a, b) => a.part - b.part) }
}

/** Gives up this process's partitions (shutdown), so that others take them at once. */
export const leaveFanout = async (sql: Sql, owner: string): Promise<void> => {
  await sql.begin(async (tx) => {
    await tx`
      with lk as materialized (select part from service.webhook_fanout_parts where owner = ${owner} order by part for update)
      update service.webhook_fanout_parts p set owner = null, lease_until = null from lk where p.part = lk.part`
    await tx`delete from service.webhook_engines where id = ${owner}`
    await tx`select pg_notify(${PARTITIONS_CHANNEL}, '')`
  })
}
