// Statements as Effects. Rules take the database from the context instead of a handle in
// every signature; `transaction` opens one on a reserved connection and every `query` inside
// it (however deep) joins it, so a rule and its activity entry still commit together.
//
// The hot paths keep postgres.js handles on purpose (capture's batch and its pipelined
// statements, the delivery engine's claim/record, the read API's raw JSON reads): there an
// Effect per statement costs measured throughput (docs/design.md, "Where the raw handle stays").
import { Context, Effect, Exit, Layer } from "effect"
import type postgres from "postgres"
import { Database, type Tx } from "./Database.ts"
import { guarded } from "./guarded.ts"
import { AppSql } from "./app-sql.ts"

export { AppSql, appSqlLayer } from "./app-sql.ts"

export interface SqlShape {
  /** The pool. Statements go through `query`; this is for LISTEN and tools that need a handle. */
  readonly pool: postgres.Sql
}

export class Sql extends Context.Service<Sql, SqlShape>()("platform/Sql") {
  /** From the service's Database. */
  static readonly layer = Layer.effect(
    Sql,
    Effect.map(Database, ({ sql }) => ({ pool: sql }))
  )
  /** Over a pool the caller owns (tools, tests). */
  static readonly fromPool = (pool: postgres.Sql) => Layer.succeed(Sql, { pool })
}

/** The transaction the current fiber runs in, if any (set by `transaction` only). */
const CurrentTx = Context.Reference<Tx | undefined>("platform/Sql/CurrentTx", { defaultValue: () => undefined })

/**
 * Runs statements on the caller's transaction, or else the pool. A database failure is a
 * defect (the faces answer 500 / exit 1 and log it); an expected outcome such as a unique
 * violation is caught inside `f` and returned as a value.
 */
export const query = <A>(f: (sql: Tx) => Promise<A>): Effect.Effect<A, never, Sql> =>
  Effect.flatMap(CurrentTx, (tx) =>
    tx !== undefined ? Effect.promise(() => f(tx)) : Effect.flatMap(Sql, ({ pool }) => Effect.promise(() => f(pool)))
  )

/**
 * A statement on the app's database: its tables, its catalog, its WAL (logical messages, the
 * slot). With one database it is `query` (in the caller's transaction, if any); with the
 * service's own database it runs on the app's pool, never inside the service's transaction,
 * since no transaction spans two databases.
 */
export const appQuery = <A>(f: (sql: Tx) => Promise<A>): Effect.Effect<A, never, Sql> =>
  Effect.flatMap(AppSql, ({ pool }) => (pool === undefined ? query(f) : Effect.promise(() => f(pool))))

/** Whether the app's tables are in a database of their own (SERVICE_DATABASE_URL). */
export const appSeparate: Effect.Effect<boolean> = Effect.map(AppSql, ({ pool }) => pool !== undefined)

/**
 * Runs `self` in one transaction: committed when it succeeds, rolled back when it fails or is
 * interrupted. Inside another `transaction` it joins the outer one (no savepoint): the outer
 * decides.
 *
 * Interrupted (a SIGTERM during a rebuild), the statement the transaction is running is
 * cancelled first: postgres.js would queue the rollback behind it, and a long one would hold
 * the shutdown until it ended. The cancel cannot land on the rollback: PostgreSQL drops a
 * cancel that reaches a backend waiting for its next command, and the rollback is sent only
 * once the cancel has been delivered. Once the transaction has ended its handle refuses
 * statements, so work still running in a promise the fiber left behind fails instead of
 * running on a connection back in the pool, outside any transaction.
 */
export const transaction = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R | Sql> =>
  Effect.flatMap(CurrentTx, (outer) =>
    outer !== undefined
      ? self
      : Effect.flatMap(Sql, ({ pool }) =>
          Effect.acquireUseRelease(
            Effect.promise(async () => {
              const conn = await pool.reserve()
              try {
                // One round trip: the backend's id and its transaction's (for a cancel) read just
                // before the BEGIN, so that a transaction's first statement is still its own (SET
                // TRANSACTION). A backend numbers its transactions one after the other: the BEGIN's
                // is the next after this statement's (cancelRunning).
                const [[backend]] = await Promise.all([
                  conn<{ pid: number; vxid: string | null }[]>`
                    select pg_backend_pid() as pid, (select virtualxid from pg_locks
                      where pid = pg_backend_pid() and locktype = 'virtualxid') as vxid`,
                  conn`begin`
                ])
                return ending(conn, backend!.pid, nextVxid(backend!.vxid))
              } catch (e) {
                conn.release()
                throw e
              }
            }),
            (t) =>
              self.pipe(
                Effect.provideService(CurrentTx, t.tx),
                Effect.tap(() => Effect.promise(() => t.conn`commit`))
              ),
            (t, exit) =>
              Effect.promise(async () => {
                t.end()
                if (Exit.isSuccess(exit)) return
                if (Exit.hasInterrupts(exit)) await cancelRunning(pool, t.pid, t.vxid)
                await t.conn`rollback`
              }).pipe(
                // A connection that failed mid-transaction is closed by postgres.js; nothing to undo.
                Effect.catchDefect(() => Effect.void),
                Effect.ensuring(Effect.sync(() => t.conn.release()))
              )
          )
        )
  )

/** A statement on a transaction's handle after it ended. */
export class TransactionEnded extends Error {
  constructor() {
    super("statement on a transaction that has ended (committed, rolled back or interrupted)")
    this.name = "TransactionEnded"
  }
}

/**
 * A reserved connection in a transaction, and the handle statements go through: the same
 * postgres.js handle (tagged templates, helpers, `unsafe`) until `end`, then one that throws.
 */
const ending = (conn: postgres.ReservedSql, pid: number, vxid: string | null) => {
  let ended = false
  const check = () => {
    if (ended) throw new TransactionEnded()
  }
  const tx = guarded(conn, check) as unknown as Tx
  return {
    conn,
    tx,
    pid,
    vxid,
    end: () => {
      ended = true
    }
  }
}

/** The virtual transaction id a backend gives its next transaction ("backend/local"; local ids skip 0 as they wrap). */
export const nextVxid = (vxid: string | null): string | null => {
  const m = vxid === null ? null : /^(\d+)\/(\d+)$/.exec(vxid)
  if (m === null) return null
  const next = (Number(m[2]) + 1) % 2 ** 32
  return `${m[1]}/${next === 0 ? 1 : next}`
}

/**
 * Cancels what the backend runs now, if anything, and returns once the cancel is delivered (or
 * after 2 s: a pool with no free connection must not hold the rollback up). The cancel reaches
 * the backend only while it is still in this transaction (its virtual transaction id's lock):
 * one left waiting in the pool's queue that runs later, once the connection serves another
 * request, does nothing.
 */
const cancelRunning = (pool: postgres.Sql, pid: number, vxid: string | null) =>
  Promise.race([
    (vxid === null
      ? Promise.resolve()
      : pool`
          select pg_cancel_backend(l.pid) from pg_locks l
          where l.pid = ${pid} and l.locktype = 'virtualxid' and l.virtualxid = ${vxid} and l.granted`
    ).then(
      () => {},
      () => {}
    ),
    new Promise<void>((resolve) => setTimeout(resolve, 2_000).unref())
  ])

/** Whether the current fiber is inside `transaction` (a rule that must not run alone can check). */
export const inTransaction: Effect.Effect<boolean> = Effect.map(CurrentTx, (tx) => tx !== undefined)
