// The durable pgoutput slot: its health, and creating it with an exported snapshot so the
// initial views and the stream meet exactly at its consistent point. With `failover` (17+)
// the slot can be synchronised to physical standbys and so survives a primary failover.
import pg from "pg"
import { Effect } from "effect"
import { appQuery } from "../../platform/db/Sql.ts"
import { parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import { ident } from "./publication.ts"

export interface SlotInfo {
  readonly exists: boolean
  readonly active: boolean
  readonly walStatus: string | null
  readonly invalidation: string | null
  readonly confirmedFlush: Lsn | null
  /** pg_replication_slots.failover (PostgreSQL 17+; null before). */
  readonly failover: boolean | null
}

/** The slot as the app's database has it. */
export const slotInfo = Effect.fn("slotInfo")(function* (slot: string) {
  const [row] = yield* appQuery(
    (sql) => sql<
      {
        active: boolean
        wal_status: string | null
        confirmed_flush_lsn: string | null
        invalidation: string | null
        failover: string | null
      }[]
    >`
    select active, wal_status, confirmed_flush_lsn::text,
           ${sql.unsafe("to_jsonb(s)->>'invalidation_reason'")} as invalidation,
           ${sql.unsafe("to_jsonb(s)->>'failover'")} as failover
    from pg_replication_slots s where slot_name = ${slot}`
  )
  if (!row)
    return {
      exists: false,
      active: false,
      walStatus: null,
      invalidation: null,
      confirmedFlush: null,
      failover: null
    } satisfies SlotInfo
  return {
    exists: true,
    active: row.active,
    walStatus: row.wal_status,
    invalidation: row.invalidation ?? (row.wal_status === "lost" ? "wal_removed" : null),
    confirmedFlush: row.confirmed_flush_lsn ? parseLsn(row.confirmed_flush_lsn) : null,
    failover: row.failover === null ? null : row.failover === "true"
  } satisfies SlotInfo
})

export const dropSlot = (slot: string) =>
  appQuery(
    (sql) =>
      sql`select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = ${slot} and not active`
  ).pipe(Effect.asVoid)

export interface ExportedSlot {
  readonly consistentPoint: Lsn
  readonly snapshot: string
  /** Ends the replication connection; the snapshot is valid until then. */
  readonly release: () => Promise<void>
}

const replicationClient = (url: string) =>
  new pg.Client({ connectionString: url, replication: "database" } as pg.ClientConfig)

/** Turns an existing slot's failover flag on or off (PostgreSQL 17+), keeping its position. */
export const setSlotFailover = async (url: string, slot: string, failover: boolean): Promise<void> => {
  const client = replicationClient(url)
  await client.connect()
  try {
    await client.query(`ALTER_REPLICATION_SLOT "${ident(slot)}" (FAILOVER ${failover ? "true" : "false"})`)
  } finally {
    await client.end().catch(() => {})
  }
}

/** CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export') on a replication connection kept open. */
export const createSlotWithSnapshot = async (url: string, slot: string, failover = false): Promise<ExportedSlot> => {
  const client = replicationClient(url)
  await client.connect()
  try {
    const res = await client.query(
      `CREATE_REPLICATION_SLOT "${ident(slot)}" LOGICAL pgoutput (SNAPSHOT 'export'${failover ? ", FAILOVER" : ""})`
    )
    const row = res.rows[0] as { consistent_point: string; snapshot_name: string }
    return {
      consistentPoint: parseLsn(row.consistent_point),
      snapshot: row.snapshot_name,
      release: () => client.end()
    }
  } catch (e) {
    await client.end().catch(() => {})
    throw e
  }
}
