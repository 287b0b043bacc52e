// The publication (created before the slot, with column lists so NEVER columns are never
// published) and the durable pgoutput slot: its health, and creating it with an exported
// snapshot so the initial views and the stream meet exactly at its consistent point.
import pg from "pg"
import type { Sql } from "postgres"
import { PUBLISHED_COLUMNS } from "../domain/records/index.ts"
import { APP_TABLES } from "../projection/tables.ts"
import { parseLsn, type Lsn } from "./lsn.ts"

const ident = (s: string) => {
  if (!/^[a-z_][a-z0-9_]*$/.test(s)) throw new Error(`not a plain identifier: ${s}`)
  return s
}

export const publicationTables = () =>
  APP_TABLES.map((t) => `app.${ident(t)} (${PUBLISHED_COLUMNS[t]!.map(ident).join(", ")})`).join(", ")

/** Creates the publication, or brings its tables and column lists up to date. */
export const ensurePublication = async (sql: Sql, name: string) => {
  const [exists] = await sql`select 1 from pg_publication where pubname = ${name}`
  const tables = publicationTables()
  if (exists) await sql.unsafe(`alter publication ${ident(name)} set table ${tables}`)
  else await sql.unsafe(`create publication ${ident(name)} for table ${tables} with (publish = 'insert, update, delete, truncate')`)
}

export interface SlotInfo {
  readonly exists: boolean
  readonly active: boolean
  readonly walStatus: string | null
  readonly invalidation: string | null
  readonly confirmedFlush: Lsn | null
}

export const slotInfo = async (sql: Sql, slot: string): Promise<SlotInfo> => {
  const [row] = await sql<{ active: boolean; wal_status: string | null; confirmed_flush_lsn: string | null; invalidation: string | null }[]>`
    select active, wal_status, confirmed_flush_lsn::text,
           ${sql.unsafe("to_jsonb(s)->>'invalidation_reason'")} as invalidation
    from pg_replication_slots s where slot_name = ${slot}`
  if (!row) return { exists: false, active: false, walStatus: null, invalidation: null, confirmedFlush: null }
  return {
    exists: true,
    active: row.active,
    walStatus: row.wal_status,
    invalidation: row.invalidation ?? (row.wal_status === "lost" ? "wal_removed" : null),
    confirmedFlush: row.confirmed_flush_lsn ? parseLsn(row.confirmed_flush_lsn) : null
  }
}

export const dropSlot = async (sql: Sql, slot: string) => {
  await sql`select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = ${slot} and not active`
}

export interface ExportedSlot {
  readonly consistentPoint: Lsn
  readonly snapshot: string
  /** Ends the replication connection; the snapshot is valid until then. */
  readonly release: () => Promise<void>
}

/** CREATE_REPLICATION_SLOT ... (SNAPSHOT 'export') on a replication connection kept open. */
export const createSlotWithSnapshot = async (url: string, slot: string): Promise<ExportedSlot> => {
  const client = new pg.Client({ connectionString: url, replication: "database" } as pg.ClientConfig)
  await client.connect()
  try {
    const res = await client.query(`CREATE_REPLICATION_SLOT "${ident(slot)}" LOGICAL pgoutput (SNAPSHOT 'export')`)
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
