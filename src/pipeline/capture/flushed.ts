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
//
// A position means something only on the server that wrote it: after a crash the server comes
// back from its last flushed WAL and writes new WAL over the same positions, so a batch lost in
// the crash would look flushed soon after (an idle server shows flushed = inserted at once).
// Each round also reads when the server started; if that changed since the run began, what
// waits may be lost: nothing more is confirmed and the run fails (`lost`), the next one starting
// from the checkpoint the database kept, with the slot giving the rest again.
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
  private readonly lost: (e: Error) => void
  /** When the server started, read as the run began (null: not read, the first round's then). */
  private server: string | null = null
  /** Settles once the server's start is read (or could not be): batches wait for it. */
  readonly ready: Promise<void>

  /** `start`: the stored checkpoint, itself confirmed only once durable (a batch committed just
   *  before a restart of capture may not be yet). `lost`: the server restarted, the run must end. */
  constructor(sql: Sql, send: (lsn: Lsn) => Promise<void>, start: Lsn, lost: (e: Error) => void = () => {}) {
    this.sql = sql
    this.send = send
    this.lost = lost
    this.wanted = 0n
    this.sure = 0n
    this.ready = this.sql<{ s: string }[]>`select pg_postmaster_start_time()::text as s`.then(
      ([r]) => {
        this.server ??= r!.s
      },
      () => {} // unreachable: the run's first write fails too
    )
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
          await this.ready
          const [r] = await this.sql<{ i: string; f: string; s: string }[]>`
            select pg_current_wal_insert_lsn()::text as i, pg_current_wal_flush_lsn()::text as f,
                   pg_postmaster_start_time()::text as s`
          this.server ??= r!.s
          if (r!.s !== this.server) {
            this.stopped = true
            this.lost(
              new Error(
                `the service's database restarted (at ${r!.s}) while capture waited for its batches to be flushed: those not flushed before may be lost, so none is confirmed; capture starts again from the checkpoint the database kept`
              )
            )
            return
          }
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
