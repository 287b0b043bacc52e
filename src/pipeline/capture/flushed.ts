// Capture's batches commit without waiting for the service database's disk (asynchronous
// commit: docs/design.md, "Capture commits asynchronously"), so the slot must not confirm a
// batch's end before that database's WAL holding it is flushed: a crash of that server before
// then loses the batch, and the slot, had it confirmed it, could not give it again.
//
// Confirmations wait here. The WAL's insert position, read after a batch committed, is past
// its commit record; once the flushed position reaches it, the batch is durable. One small
// statement per round while something waits (none while nothing does), a round every
// ROUND_MS: the database's WAL writer flushes an asynchronous commit within a few hundred
// milliseconds (wal_writer_delay), and any synchronous commit after it flushes it at once.
import type { Sql } from "postgres"
import { type Lsn, parseLsn } from "../../platform/db/lsn.ts"

const ROUND_MS = 50

export class FlushedAcks {
  private readonly sql: Sql
  private readonly send: (lsn: Lsn) => Promise<void>
  /** The latest checkpoint committed, to be confirmed. */
  private wanted: Lsn
  /** The latest confirmed: durable in the service's database. */
  private sure: Lsn
  /** A checkpoint committed before the WAL's insert position was `need`: durable once flushed past it. */
  private waiting: { readonly lsn: Lsn; readonly need: Lsn } | null = null
  private running = false
  private stopped = false

  /** `start`: the stored checkpoint, itself confirmed only once durable (a batch committed just
   *  before a restart of capture may not be yet). */
  constructor(sql: Sql, send: (lsn: Lsn) => Promise<void>, start: Lsn) {
    this.sql = sql
    this.send = send
    this.wanted = 0n
    this.sure = 0n
    this.stored(start)
  }

  /** What the slot may be told: stored, and durable (0: nothing yet, an answer that says nothing). */
  get confirmed(): Lsn {
    return this.sure
  }

  /** A checkpoint whose transaction has committed (asynchronously or not): confirmed once durable. */
  stored(lsn: Lsn): void {
    if (lsn <= this.wanted) return
    this.wanted = lsn
    if (!this.running && !this.stopped) void this.rounds()
  }

  /** A checkpoint known durable now (its transaction committed synchronously, after every batch before it). */
  async durable(lsn: Lsn): Promise<void> {
    if (lsn > this.wanted) this.wanted = lsn
    await this.confirm(lsn)
  }

  stop(): void {
    this.stopped = true
  }

  private async rounds(): Promise<void> {
    this.running = true
    try {
      while (!this.stopped && this.wanted > this.sure) {
        const want = this.wanted
        let insert: Lsn
        let flushed: Lsn
        try {
          const [r] = await this.sql<{ i: string; f: string }[]>`
            select pg_current_wal_insert_lsn()::text as i, pg_current_wal_flush_lsn()::text as f`
          insert = parseLsn(r!.i)
          flushed = parseLsn(r!.f)
        } catch {
          // The database is unreachable: the batches fail too, and capture starts again. Try later.
          await sleep(ROUND_MS * 10)
          continue
        }
        const w = this.waiting
        if (w !== null && flushed >= w.need) await this.confirm(w.lsn)
        if (want > this.sure) {
          // Everything inserted before this read is on disk: so is every batch committed before it.
          if (flushed >= insert) await this.confirm(want)
          else if (this.waiting === null) this.waiting = { lsn: want, need: insert }
        }
        if (this.wanted > this.sure) await sleep(ROUND_MS)
      }
    } finally {
      this.running = false
    }
  }

  private async confirm(lsn: Lsn): Promise<void> {
    if (this.waiting !== null && this.waiting.lsn <= lsn) this.waiting = null
    if (lsn <= this.sure) return
    this.sure = lsn
    await this.send(lsn)
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref?.())
