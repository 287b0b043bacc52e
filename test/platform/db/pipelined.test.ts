// Capture's batch transactions. pipelinedTransaction: BEGIN sent with the statements, COMMIT once
// the body resolves, ROLLBACK when it throws or a statement fails. pipelinedCommit: BEGIN, the
// statements and COMMIT sent before any answer, a failed statement undoing them all. A connection
// killed under either fails the caller at once rather than after a reconnection's wait.
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { connect } from "../../../src/platform/db/Database.ts"
import { pipelinedCommit, pipelinedTransaction } from "../../../src/platform/db/pipelined.ts"
import { useDatabase } from "../../support/fixtures.ts"

/**
 * Whether a pool whose connection was ended comes back: the insert succeeds within two tries (as
 * after postgres.js's own begin, the first statement may still meet the old connection's error).
 */
const insertsAgain = async (pool: postgres.Sql<Record<string, unknown>>, n: number): Promise<boolean> => {
  for (let tries = 0; tries < 2; tries++) {
    const ok = await pool`insert into t (n) values (${n})`.then(
      () => true,
      () => false
    )
    if (ok) return true
  }
  return false
}

describe("pipelinedTransaction", () => {
  const db = useDatabase({ migrated: false })
  // A pool of one: every statement after a transaction runs on the connection it used.
  let one: postgres.Sql<Record<string, unknown>>
  const all = () => db.sql<{ n: number }[]>`select n from t order by n`.then((rows) => rows.map((r) => r.n))

  beforeAll(async () => {
    await db.sql`create table t (n int primary key)`
    one = connect(db.url, 1)
  })
  afterAll(async () => {
    await one.end({ timeout: 2 })
  })

  it("commits every statement of the body, in the order issued, in one transaction", async () => {
    await db.sql`truncate t`
    const [txid, seen] = await pipelinedTransaction(one, async (tx) => {
      const [a, b, c] = await Promise.all([
        tx`select txid_current()::text as id`,
        tx`insert into t (n) values (1)`.execute(),
        tx`insert into t (n) select max(n) + 1 from t`.execute()
      ])
      void b
      void c
      const [after] = await tx<
        { id: string; n: number }[]
      >`select txid_current()::text as id, count(*)::int as n from t`
      expect(after!.id).toBe(a[0]!.id)
      return [a[0]!.id, after!.n] as const
    })
    expect(seen).toBe(2)
    expect(await all()).toEqual([1, 2])
    // The transaction has ended: the connection's next statement is in a transaction of its own.
    const [next] = await one<{ id: string }[]>`select txid_current()::text as id`
    expect(next!.id).not.toBe(txid)
  })

  it("a failing statement rolls back every statement before and after it, and the connection goes on", async () => {
    await db.sql`truncate t`
    const failed = pipelinedTransaction(one, async (tx) => {
      await Promise.all([
        tx`insert into t (n) values (10)`.execute(),
        tx`insert into t (n) values (10)`.execute(),
        tx`insert into t (n) values (11)`.execute()
      ])
    })
    await expect(failed).rejects.toMatchObject({ code: "23505" })
    expect(await all()).toEqual([])
    // Outside any transaction again (an open, aborted one would refuse this).
    await one`insert into t (n) values (12)`
    expect(await all()).toEqual([12])
  })

  it("a body that throws after its statements rolls them back", async () => {
    await db.sql`truncate t`
    const refused = pipelinedTransaction(one, async (tx) => {
      await tx`insert into t (n) values (20)`
      throw new Error("the checkpoint moved")
    })
    await expect(refused).rejects.toThrow("the checkpoint moved")
    expect(await all()).toEqual([])
  })

  it("a connection ended under the transaction fails it at once, nothing written, and the pool reconnects", async () => {
    await db.sql`truncate t`
    const t0 = Date.now()
    const killed = pipelinedTransaction(one, async (tx) => {
      const [me] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`
      await tx`insert into t (n) values (30)`
      await db.sql`select pg_terminate_backend(${me!.pid})`
      await tx`insert into t (n) values (31)`
    })
    await expect(killed).rejects.toBeDefined()
    // Not a reconnection's wait (postgres.js's connect timeout is 30 s) behind a ROLLBACK.
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(await all()).toEqual([])
    // The pool's connection comes back, not dead for good.
    expect(await insertsAgain(one, 32)).toBe(true)
    expect(await all()).toEqual([32])
    const [{ x }] = (await one`select 1 as x`) as unknown as [{ x: number }]
    expect(x).toBe(1)
  })
})

describe("pipelinedCommit", () => {
  const db = useDatabase({ migrated: false })
  // A pool of one that notes each statement as postgres.js sends it, and when each answer came.
  let one: postgres.Sql<Record<string, unknown>>
  let log: string[] = []
  const all = () => db.sql<{ n: number }[]>`select n from t order by n`.then((rows) => rows.map((r) => r.n))
  const noted = <T>(p: Promise<T>, name: string) =>
    p.then((v) => {
      log.push(`answered ${name}`)
      return v
    })

  beforeAll(async () => {
    await db.sql`create table t (n int primary key)`
    one = postgres(db.url, {
      max: 1,
      onnotice: () => {},
      debug: (_conn, query) => log.push(`sent ${query.trim().split(/\s+/)[0]!.toLowerCase()}`)
    })
    // Connected (postgres.js's own type query on connecting done) before the tests note anything.
    await one`select 1`
  })
  afterAll(async () => {
    await one.end({ timeout: 2 })
  })

  it("sends BEGIN, every statement and COMMIT before the first answer, and commits them in one transaction", async () => {
    await db.sql`truncate t`
    log = []
    const [first, , , last] = await pipelinedCommit(one, (tx) => [
      noted(tx<{ id: string }[]>`select txid_current()::text as id`.execute(), "select"),
      noted(tx`insert into t (n) values (1)`.execute(), "insert"),
      noted(tx`insert into t (n) values (2)`.execute(), "insert"),
      noted(tx<{ id: string }[]>`select txid_current()::text as id`.execute(), "select")
    ])
    expect(first[0]!.id).toBe(last[0]!.id)
    expect(await all()).toEqual([1, 2])
    expect(log.slice(0, 6)).toEqual([
      "sent begin",
      "sent select",
      "sent insert",
      "sent insert",
      "sent select",
      "sent commit"
    ])
    expect(log.slice(6)).toEqual(["answered select", "answered insert", "answered insert", "answered select"])
    // Ended: the connection's next statement is in a transaction of its own.
    const [next] = await one<{ id: string }[]>`select txid_current()::text as id`
    expect(next!.id).not.toBe(first[0]!.id)
  })

  it("a statement the database refuses undoes those before and after it; the first failure is thrown", async () => {
    await db.sql`truncate t`
    const failed = pipelinedCommit(one, (tx) => [
      tx`insert into t (n) values (10)`.execute(),
      tx`select 1 / 0`.execute(),
      tx`insert into t (n) values (11)`.execute()
    ])
    await expect(failed).rejects.toMatchObject({ code: "22012" })
    expect(await all()).toEqual([])
    // Outside any transaction again (an open, aborted one would refuse this).
    await one`insert into t (n) values (12)`
    expect(await all()).toEqual([12])
  })

  it("a check made in JavaScript over an answer fails the call but does not undo the transaction", async () => {
    // The contract its callers rely on: a rule that must undo the batch fails in SQL.
    await db.sql`truncate t`
    const checked = pipelinedCommit(one, (tx) => [
      tx`select 1 as x`.execute().then(() => {
        throw new Error("a check over the answer")
      }),
      tx`insert into t (n) values (40)`.execute()
    ])
    await expect(checked).rejects.toThrow("a check over the answer")
    expect(await all()).toEqual([40])
  })

  it("a statement issued after the body returned (behind an answer) is refused, not run after the COMMIT", async () => {
    await db.sql`truncate t`
    const late = pipelinedCommit(one, (tx) => [
      tx`insert into t (n) values (50)`.execute(),
      (async () => {
        await tx`select 1`
        await tx`insert into t (n) values (51)`
      })()
    ])
    await expect(late).rejects.toThrow("issued after its transaction's COMMIT was sent")
    // What went out before the COMMIT committed; the late statement never ran.
    expect(await all()).toEqual([50])
  })

  it("a body that throws before it has issued everything sends no COMMIT: what it issued is rolled back", async () => {
    await db.sql`truncate t`
    const refused = pipelinedCommit(one, (tx) => {
      void tx`insert into t (n) values (20)`.execute()
      throw new Error("built wrong")
    })
    await expect(refused).rejects.toThrow("built wrong")
    expect(await all()).toEqual([])
    await one`insert into t (n) values (21)`
    expect(await all()).toEqual([21])
  })

  it("a connection ended under the transaction fails it at once, nothing written, and the pool reconnects", async () => {
    await db.sql`truncate t`
    const [me] = await one<{ pid: number }[]>`select pg_backend_pid() as pid`
    const t0 = Date.now()
    // The last statement has a parameter and a text the connection has not prepared: postgres.js
    // sends it only once the ones before have answered, holding it in the reserved connection's
    // queue, where it stays, never settled, once that connection has closed.
    const killed = pipelinedCommit(one, (tx) => [
      tx`insert into t (n) values (30)`.execute(),
      tx`select pg_sleep(0.5)`.execute(),
      tx`insert into t (n) values (${31}::int * 1)`.execute()
    ])
    // Ended from outside while its statements run (the COMMIT already sent, not yet read).
    for (let i = 0; i < 50; i++) {
      const [busy] = await db.sql<
        { n: number }[]
      >`select count(*)::int as n from pg_stat_activity where pid = ${me!.pid} and query like '%pg_sleep%' and state = 'active'`
      if (busy!.n > 0) break
      await new Promise((r) => setTimeout(r, 20))
    }
    await db.sql`select pg_terminate_backend(${me!.pid})`
    await expect(killed).rejects.toBeDefined()
    expect(Date.now() - t0).toBeLessThan(10_000)
    expect(await all()).toEqual([])
    expect(await insertsAgain(one, 32)).toBe(true)
    expect(await all()).toEqual([32])
  })
})
