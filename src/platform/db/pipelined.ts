// A transaction whose BEGIN goes out with its first statements. postgres.js's `begin` waits for
// BEGIN's answer before it runs the body: one round trip more per transaction. Capture pays it
// once per batch, on the way of every change to its readers (docs/benchmarks.md, "Stream").
import type postgres from "postgres"
import type { Transaction } from "./Database.ts"

/** How long a ROLLBACK may take before the connection is given back anyway. */
const ROLLBACK_WAIT_MS = 2_000

/**
 * The connection itself failed (closed, reset, refused, ended by the server): the server has
 * ended the transaction with the session, and a ROLLBACK would only wait for a reconnection.
 */
const connectionGone = (e: unknown): boolean => {
  const { code, severity } = (e ?? {}) as { code?: unknown; severity?: unknown }
  return (
    (typeof code === "string" && (code.startsWith("CONNECT") || /^E[A-Z]+$/.test(code))) ||
    severity === "FATAL" ||
    severity === "PANIC"
  )
}

/**
 * Runs `body` in a transaction on a connection of `sql`'s pool: BEGIN, then the statements
 * `body` issues (pipelined, as inside `begin`), COMMIT once it resolves, ROLLBACK if it throws.
 */
export const pipelinedTransaction = async <A>(
  sql: postgres.Sql<Record<string, unknown>>,
  body: (tx: Transaction) => Promise<A>
): Promise<A> => {
  const conn = await sql.reserve()
  // postgres.js (3.4.9) moves a reserved connection that closed to its closed ones, where the next
  // query reconnects it; released after that, it would go back among the open ones, dead, and
  // fail every query given to it from then on. A connection found gone is not released.
  let gone = false
  try {
    let out: A
    try {
      // BEGIN is sent now; body's statements queue behind it on the same connection.
      const begun = conn`begin`.execute()
      ;[, out] = await Promise.all([begun, body(conn as unknown as Transaction)])
    } catch (e) {
      // A statement failed (the transaction is aborted) or the body threw: undo it, unless the
      // connection is gone. Bounded: a connection that fails meanwhile must not hold the caller.
      gone = connectionGone(e)
      if (!gone) {
        let timer: ReturnType<typeof setTimeout> | undefined
        await Promise.race([
          conn`rollback`.catch(() => {}),
          new Promise<void>((resolve) => (timer = setTimeout(resolve, ROLLBACK_WAIT_MS)))
        ])
        clearTimeout(timer)
      }
      throw e
    }
    try {
      await conn`commit`
    } catch (e) {
      gone = connectionGone(e)
      throw e
    }
    return out
  } finally {
    if (!gone) conn.release()
  }
}
