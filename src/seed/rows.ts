// Batched inserts into the app's tables, as the app would write them: plain rows, one
// statement per batch, within the caller's transaction.
import type postgres from "postgres"

export type Row = Record<string, unknown>

/** Any postgres.js handle: a pool or a transaction. */
export type Sql = postgres.Sql | postgres.TransactionSql

// PostgreSQL takes at most 65535 parameters per statement.
const MAX_PARAMETERS = 60_000

export const insertRows = async (sql: Sql, table: string, rows: ReadonlyArray<Row>): Promise<number> => {
  if (rows.length === 0) return 0
  const columns = Object.keys(rows[0]!)
  const perBatch = Math.max(1, Math.floor(MAX_PARAMETERS / columns.length))
  for (let i = 0; i < rows.length; i += perBatch) {
    const batch = rows.slice(i, i + perBatch) as Array<Record<string, postgres.ParameterOrJSON<never>>>
    await sql`insert into ${sql(`app.${table}`)} ${sql(batch, columns)}`
  }
  return rows.length
}
