// Transactions that send BEGIN with their first statements. postgres.js's `begin` waits for
// BEGIN's answer before it runs the body, and for the body's answers before COMMIT: two round
// trips more per transaction. Capture pays them once per batch, on the way of every change to
// its readers (docs/benchmarks.md, "Stream"). `pipelinedTransaction` saves the first;
// `pipelinedCommit`, for statements that do not wait on one another's answers, both.
import type postgres from "postgres"
import type { Transaction } from "./Database.ts"
import { guarded } from "./guarded.ts"

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

/** Undoes the transaction on `conn`, waiting at most ROLLBACK_WAIT_MS: a connection that fails meanwhile must not hold the caller. */
const rollback = async (conn: postgres.ReservedSql<Record<string, unknown>>) => {
  let timer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([
    conn`rollback`.catch(() => {}),
    new Promise<void>((resolve) => (timer = setTimeout(resolve, ROLLBACK_WAIT_MS)))
  ])
  clearTimeout(timer)
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
  // A reserved connection that closed is the pool's again (it reconnects it for the next query):
  // one found gone is not released (postgres-patch.ts makes such a release a no-op too; unpatched,
  // it put the connection among the open ones a second time).
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
      if (!gone) await rollback(conn)
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

/** The first of `settled`'s failures in statement order: the cause (those after it only say the transaction was aborted). */
const firstFailure = (settled: ReadonlyArray<PromiseSettledResult<unknown>>): { reason: unknown } | null => {
  for (const r of settled) if (r.status === "rejected") return { reason: r.reason }
  return null
}

/**
 * Every promise's outcome, or the first failure that says the connection is gone: the transaction
 * ended with the session, and the statements queued behind it fail too, without adding anything
 * (postgres-patch.ts: unpatched, a reserved connection's queued statements never settled).
 */
const settledUnlessGone = (ps: ReadonlyArray<Promise<unknown>>): Promise<Array<PromiseSettledResult<unknown>>> =>
  new Promise((resolve, reject) => {
    const out = new Array<PromiseSettledResult<unknown>>(ps.length)
    let left = ps.length
    const settle = (i: number, r: PromiseSettledResult<unknown>) => {
      out[i] = r
      if (--left === 0) resolve(out)
    }
    for (let i = 0; i < ps.length; i++)
      ps[i]!.then(
        (value) => settle(i, { status: "fulfilled", value }),
        (reason: unknown) => {
          if (connectionGone(reason)) reject(reason)
          settle(i, { status: "rejected", reason })
        }
      )
  })

/**
 * BEGIN, the statements `body` issues and COMMIT, sent together: one round trip. `body` must
 * issue every statement before it returns, none waiting on another's answer. A statement that
 * fails aborts the transaction, the ones after it fail, and PostgreSQL answers the COMMIT of an
 * aborted transaction by rolling it back, without an error: so whatever the database refuses
 * undoes the whole, with no ROLLBACK to send. A rule that must undo it therefore fails in SQL;
 * a promise that rejects in JavaScript over an answer does not undo anything. Resolves with
 * the statements' results once committed; otherwise throws the first failure, in statement order.
 */
export const pipelinedCommit = async <const T extends ReadonlyArray<Promise<unknown>>>(
  sql: postgres.Sql<Record<string, unknown>>,
  body: (tx: Transaction) => T
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> => {
  const conn = await sql.reserve()
  let gone = false
  try {
    const begun = conn`begin`.execute()
    let statements: T
    // A statement issued once body has returned would follow the COMMIT, outside the
    // transaction (a read-then-write helper's second statement): refused, so that the caller
    // fails instead of committing half of what it meant.
    let open = true
    const refuse = () => {
      if (!open)
        throw new Error(
          "a statement was issued after its transaction's COMMIT was sent: pipelinedCommit takes only statements issued at once"
        )
    }
    const tx = guarded(conn, refuse)
    try {
      statements = body(tx as unknown as Transaction)
      open = false
    } catch (e) {
      open = false
      // body threw before it issued everything: no COMMIT was sent; undo what it issued.
      await begun.catch((b: unknown) => {
        gone = connectionGone(b)
      })
      if (!gone) await rollback(conn)
      throw e
    }
    const committed = conn`commit`.execute()
    let answers: Array<PromiseSettledResult<unknown>>
    try {
      answers = await settledUnlessGone([begun, committed, ...statements])
    } catch (e) {
      gone = true
      throw e
    }
    const [b, c, ...settled] = answers as [PromiseSettledResult<unknown>, PromiseSettledResult<unknown>]
    const failed = firstFailure([b, ...settled, c])
    if (failed !== null) throw failed.reason
    // Every statement answered and COMMIT did too: it says ROLLBACK only if the transaction was aborted.
    const tag = (c as PromiseFulfilledResult<{ command?: string }>).value.command
    if (tag !== "COMMIT") throw new Error(`the transaction ended with ${tag ?? "no answer"} instead of COMMIT`)
    return settled.map((r) => (r as PromiseFulfilledResult<unknown>).value) as {
      -readonly [K in keyof T]: Awaited<T[K]>
    }
  } finally {
    if (!gone) conn.release()
  }
}
