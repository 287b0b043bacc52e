// Where the seeding CLIs find the database, as the service does: DATABASE_URL, else the
// embedded server under DATA_DIR (started if no process runs it, and then stopped after).
import { setTimeout as sleep } from "node:timers/promises"
import type postgres from "postgres"
import { connect } from "../platform/db/Database.ts"
import { requirePostgresPatched } from "../platform/db/postgres-patch.ts"
import { startEmbedded } from "../platform/db/embedded.ts"

export interface OpenDatabase {
  readonly sql: postgres.Sql
  readonly embedded: boolean
  /** Ends the pool, and stops the embedded server if this process started it. */
  readonly close: () => Promise<void>
}

const port = (text: string | undefined, fallback: number) => {
  if (text === undefined || text === "") return fallback
  const n = Number(text)
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new Error(`EMBEDDED_PG_PORT must be a port number, not "${text}".`)
  return n
}

/** Connects (starting the embedded server if needed). The demo tools play the app: they
 *  need the app's tables, never the service's schema. */
export const openDatabase = async (poolSize = 4): Promise<OpenDatabase> => {
  requirePostgresPatched()
  const url = process.env.DATABASE_URL
  const server = url
    ? undefined
    : await startEmbedded({
        dataDir: process.env.DATA_DIR || "./.data",
        port: port(process.env.EMBEDDED_PG_PORT, 54329)
      })
  const sql = connect(url ?? server!.url, poolSize)
  const close = async () => {
    await sql.end({ timeout: 5 })
    // A terminal's Ctrl-C also reaches a server we started; never wait forever on its stop.
    if (server?.owned) await Promise.race([server.stop(), sleep(10_000)])
  }
  return { sql, embedded: server !== undefined, close }
}
