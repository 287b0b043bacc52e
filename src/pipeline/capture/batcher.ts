// The batcher: the stream's messages into transactions, transactions into batches, each batch
// prepared (batch.ts) while the one before is written, written with its checkpoint, and only
// then acknowledged to the server (docs/design.md, "Capture pipelines its batches"). Plain async
// code on purpose: it runs once per message, tens of thousands a second, where an effect per
// message costs throughput. Its state is explicit: where the stream stands (Position), what is
// taken and not yet prepared (pending), the one batch being written (writing), and the two
// positions in the WAL (accepted, committed); each message is one transition (take).
import { pipelinedCommit, pipelinedTransaction } from "../../platform/db/pipelined.ts"
import { FlushedAcks } from "./flushed.ts"
import type { Transaction } from "../../platform/db/Database.ts"
import type { Sql } from "postgres"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { formatLsn, parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import type { SpanRunner } from "../../platform/tracing.ts"
import { mirroredKeys, type Store } from "../projection/store.ts"
import { prepareBatch } from "./batch.ts"
import { checkFence } from "../../platform/db/fence.ts"
import { advanceCheckpoint, CheckpointMoved, confirmCheckpoint } from "./checkpoint.ts"
import { CaptureFenced } from "./errors.ts"
import { decodeChange } from "./decode.ts"
import { CommitClock, relationMarker, streamLarge } from "./large-stream.ts"
import { appOf, type CaptureOptions, type CaptureStats, type Tell } from "./options.ts"
import { PHASES } from "./profile.ts"
import {
  askToContinue,
  contractMarkerOf,
  CONTRACT_PREFIX,
  markerOf,
  QUARANTINE_PREFIX,
  type QuarantineMarker
} from "./quarantine/markers.ts"
import { reportDelta } from "./quarantine/report.ts"
import type { CaptureQuarantine, QuarantineDelta } from "./quarantine/state.ts"
import { RESYNC_PREFIX, type Resync } from "./resync.ts"
import type { ReplicationStream } from "./stream.ts"
import type { RowChange, Txn } from "./txn.ts"

/** Messages taken from the stream between two turns of the event loop while a batch is written. */
const TURN_EVERY = 200

/** Where the stream stands between two messages: between transactions, or inside one (small: held in memory). */
type Position =
  | { readonly in: "between" }
  | { readonly in: "transaction"; readonly xid: number; readonly changes: RowChange[]; markers?: QuarantineMarker[] }

const BETWEEN: Position = { in: "between" }

/** What a run gives its batcher. */
export interface BatcherContext {
  /** The service's database (capture's pool). */
  readonly sql: Sql
  readonly stream: ReplicationStream
  readonly opts: CaptureOptions
  readonly stats: CaptureStats
  readonly quarantine: CaptureQuarantine
  readonly resync: Resync
  readonly tell: Tell
  /** Called after each batch is stored (a stall noticed before is over). */
  readonly applied: () => Promise<void>
  /** Batches commit without waiting for the disk (flushed.ts; commitsAsynchronously). */
  readonly asyncCommit?: boolean
}

/**
 * Whether capture's batches may commit asynchronously: not when the service's database waits
 * for synchronous standbys (`synchronous_standby_names`), whose operator wants a commit to
 * survive a failover, which the slot's confirmations (flushed.ts, the local disk) do not see.
 */
export const commitsAsynchronously = async (sql: Sql): Promise<boolean> => {
  const [r] = await sql<{ names: string }[]>`select current_setting('synchronous_standby_names') as names`
  return r!.names.trim() === ""
}

/** Runs `f` in a span when tracing is on. */
const traced = <A>(
  span: SpanRunner | undefined,
  name: string,
  attributes: Readonly<Record<string, unknown>>,
  f: (annotate: (key: string, value: unknown) => void) => Promise<A>
) => (span === undefined ? f(() => {}) : span(name, attributes, f))

/** The ids of the events the given transactions wrote (for a batch's trace span: at most 100; none if the read fails). */
const eventIdsOf = async (sql: Sql, commitLsns: ReadonlyArray<Lsn>): Promise<string[]> =>
  sql<{ id: string }[]>`
    select id::text from service.events where commit_lsn = any(${commitLsns.map(formatLsn)}::pg_lsn[]) order by commit_lsn, seq limit 100`.then(
    (rows) => rows.map((r) => r.id),
    () => []
  )

export class Batcher {
  private readonly ctx: BatcherContext
  private readonly app: Sql
  private readonly large: number
  private position: Position = BETWEEN
  /** The last commit taken into a batch: later commits only are new. */
  private accepted: Lsn
  /** The stored checkpoint: where the last batch written left it. */
  private committed: Lsn
  /** Confirmations to the slot, each once its checkpoint is durable (flushed.ts). */
  private readonly acks: FlushedAcks
  /** Commit times, never going back along the WAL (commitDate). */
  private readonly clock: CommitClock
  /** Transactions taken, not yet prepared. */
  private pending: Txn[] = []
  private pendingChanges = 0
  /**
   * The batch being written, at most one: the next one is prepared meanwhile, reading its final
   * state where the database may not show it yet (projection/store.ts). A confirmed stretch of
   * WAL (keepalive) is written the same way, with no store.
   */
  private writing: { readonly store: Store | null; readonly done: Promise<void> } | null = null
  /** A message is being taken (the stream is not idle even with nothing queued). */
  private busy = false
  /** Tables a Relation message found broken (or the stored state did). */
  private readonly seenBroken: Set<string>

  /** `start`: the stored checkpoint; `lastCommitAt`: the commit time stored with it. */
  constructor(ctx: BatcherContext, start: Lsn, lastCommitAt: Date | null) {
    this.ctx = ctx
    this.app = appOf(ctx.sql, ctx.opts).sql
    this.large = ctx.opts.largeTransaction ?? 10_000
    this.accepted = start
    this.committed = start
    this.acks = new FlushedAcks(
      ctx.sql,
      (lsn) => ctx.stream.ack(lsn),
      start,
      (e) => ctx.stream.fail(e)
    )
    this.clock = new CommitClock(lastCommitAt)
    this.seenBroken = new Set(ctx.quarantine.broken.keys())
    const stream = ctx.stream
    stream.idle = () =>
      !this.busy &&
      this.position.in === "between" &&
      this.pending.length === 0 &&
      stream.pending === 0 &&
      this.writing === null
    stream.onKeepalive = (sent) => this.keepalive(sent)
  }

  /** Takes messages until the stream fails (the run then ends with that error) or `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { stream, opts } = this.ctx
    const profile = opts.profile
    let taken = 0
    try {
      // Which server the batches commit on, known before the first one (flushed.ts).
      await this.acks.ready
      while (!signal.aborted) {
        this.busy = false
        // Messages already received are taken without the event loop turning: while a batch is
        // being written, let it turn now and then, so its answers and its commit are not kept
        // waiting behind the decoding of the next one.
        if (++taken % TURN_EVERY === 0 && this.writing !== null) await new Promise<void>((r) => setImmediate(r))
        const tw = profile && stream.pending === 0 ? performance.now() : 0
        const msg = await stream.next()
        if (profile && tw > 0) profile.add(PHASES.stream, performance.now() - tw)
        this.busy = true
        await this.take(msg)
      }
    } finally {
      // A batch still being written finishes (or fails) before the run lets go of its lock.
      await this.settle().catch(() => {})
      this.acks.stop()
    }
  }

  /** One message: the transition it makes. */
  private async take(msg: Message): Promise<void> {
    const p = this.position
    switch (msg.tag) {
      case "begin":
        this.position = { in: "transaction", xid: msg.xid, changes: [] }
        return
      case "insert":
      case "update":
      case "delete":
        if (p.in === "transaction") return this.change(p, msg)
        return
      case "truncate":
        // Every row of the truncated tables goes, as deletes in this transaction, in order: those
        // mirrored before it, and those it wrote before the TRUNCATE. A table may hold any number:
        // the transaction goes on as a large one, deleting them a page at a time.
        if (p.in === "transaction") return this.spill(p, msg)
        return
      case "commit":
        return this.commit(p, msg)
      case "relation": {
        // The app changed a table under the service (or the publication changed): a column it
        // reads gone or retyped breaks that table's contract; its records are held until a later
        // Relation message shows it fits again (quarantine/).
        const m = relationMarker(msg, this.seenBroken)
        if (m !== null) this.mark(m)
        return
      }
      case "message":
        if (msg.transactional) return this.message(msg)
        return
      default:
        return
    }
  }

  private async change(p: Position & { in: "transaction" }, msg: Message & { tag: "insert" | "update" | "delete" }) {
    const profile = this.ctx.opts.profile
    const td = profile ? performance.now() : 0
    const cs = decodeChange(msg)
    for (let i = 0; i < cs.length; i++) p.changes.push(cs[i]!)
    if (this.ctx.resync.open > 0) for (const c of cs) this.ctx.resync.note(c.table, c.key)
    if (profile) profile.add(PHASES.decode, performance.now() - td)
    // A transaction grown past what memory should hold goes on as a large one, applied as it streams.
    if (p.changes.length > this.large) await this.spill(p, null)
  }

  private async commit(p: Position, msg: Message & { tag: "commit" }) {
    const endLsn = parseLsn(msg.commitEndLsn!)
    this.ctx.resync.passed(endLsn)
    if (p.in === "transaction" && endLsn > this.accepted) {
      this.pending.push({
        xid: p.xid,
        endLsn,
        commitTime: this.clock.take(msg.commitTime),
        changes: p.changes,
        ...(p.markers ? { markers: p.markers } : {})
      })
      this.pendingChanges += p.changes.length + (p.markers?.length ?? 0)
      this.accepted = endLsn
    }
    this.position = BETWEEN
    // Flush when the batch is full, or when nothing else is waiting (latency over batching).
    if (this.pendingChanges >= this.ctx.opts.batchChanges || this.ctx.stream.pending === 0) await this.flush()
  }

  /** A marker for the transaction being taken (met in stream order). */
  private mark(m: QuarantineMarker) {
    const p = this.position
    if (p.in !== "transaction") return
    ;(p.markers ??= []).push(m)
  }

  /** An operator's retry or discard, the contract watch's finding, a re-read's watermark (quarantine/, resync.ts). */
  private async message(msg: Message & { tag: "message" }) {
    const text = () => Buffer.from(msg.content).toString("utf8")
    if (msg.prefix === QUARANTINE_PREFIX) {
      const m = markerOf(text())
      if (m !== null) this.mark(m)
    } else if (msg.prefix === CONTRACT_PREFIX) {
      const m = contractMarkerOf(text())
      if (m !== null) this.mark(m)
    } else if (msg.prefix === RESYNC_PREFIX && this.position.in === "transaction") {
      const w = this.ctx.resync.message(text())
      if (w === null) return
      const chunk = await this.ctx.resync.high(w.id, w.rows, (table, from, to) => this.mirrored(table, from, to))
      const p = this.position as Position
      if (chunk === null || p.in !== "transaction") return
      for (const c of chunk.changes) p.changes.push(c)
      if (chunk.marker !== null) this.mark(chunk.marker)
      this.ctx.quarantine.rereads.push(...chunk.again)
    }
  }

  /** Keys of a table's range in the mirror, everything taken so far written (a resync's high watermark). */
  private async mirrored(table: string, from: string, to: string | null) {
    await this.drain()
    return mirroredKeys(this.ctx.sql, table, { from, to })
  }

  /** Everything taken so far is written: before the mirror is read or written outside a batch. */
  private async drain() {
    await this.flush()
    await this.settle()
  }

  /** Waits until the batch being written is stored; throws its error. */
  private async settle() {
    const w = this.writing
    if (w === null) return
    await w.done
    if (this.writing === w) this.writing = null
  }

  /** Starts writing: the next batch waits for it; a failure fails the stream (the loop hears of it even while it waits). */
  private write(store: Store | null, done: Promise<void>) {
    const w = { store, done }
    this.writing = w
    done.then(
      () => {
        if (this.writing === w) this.writing = null
      },
      (e: unknown) => this.ctx.stream.fail(e instanceof Error ? e : new Error(String(e)))
    )
  }

  /**
   * A keepalive the server wants answered. With everything received applied, nothing for
   * capture lies between the checkpoint and what the server sent: that position is stored as
   * the checkpoint first, then confirmed, so the slot never confirms what the service's
   * database does not hold (checkpoint.ts, behindSlotProblem). Confirming it matters: a
   * walsender waits for it before its PostgreSQL can shut down. If the store fails with one
   * database (that server is shutting down), it is confirmed anyway: nothing can be behind the
   * slot there; with two, the slot waits for the next answer.
   */
  private keepalive(sent: Lsn) {
    const { stream, sql, opts, stats } = this.ctx
    if (!stream.idle() || sent <= this.committed) {
      void stream.ack(this.acks.confirmed)
      return
    }
    const from = this.committed
    if (sent > this.accepted) this.accepted = sent
    this.write(
      null,
      confirmCheckpoint(sql, opts.slot, from, sent).then(
        async () => {
          if (this.committed === from) this.committed = sent
          stats.checkpoint = this.committed
          // Stored with a synchronous commit, after every batch before it: durable now.
          await this.acks.durable(this.committed)
        },
        async (e: unknown) => {
          if (opts.app !== undefined || e instanceof CheckpointMoved) throw e
          await this.acks.durable(sent)
        }
      )
    )
  }

  /** Prepares the pending transactions as a batch and starts writing it once the batch before is stored. */
  private async flush() {
    if (this.pending.length === 0) return
    const { sql, opts, quarantine, asyncCommit = false } = this.ctx
    const profile = opts.profile
    let batch = this.pending
    this.pending = []
    this.pendingChanges = 0
    const t0 = performance.now()
    let prepared = await prepareBatch(sql, batch, this.writing?.store ?? null, quarantine)
    let cut: number | null = null
    if ("cutAt" in prepared) {
      cut = prepared.cutAt
      // A batch ends with its first equipment or site change (batch.ts, cutAfterWide): the
      // transactions up to it go first, as a batch of their own; the rest follows.
      const rest = batch.slice(cut)
      this.pending = [...rest, ...this.pending]
      this.pendingChanges += rest.reduce((n, t) => n + t.changes.length + (t.markers?.length ?? 0), 0)
      batch = batch.slice(0, cut)
      prepared = await prepareBatch(sql, batch, this.writing?.store ?? null, quarantine)
      // Its first part ends with that change: it cannot be cut again.
      if ("cutAt" in prepared) throw new Error(`capture bug: a batch's first part was cut again at ${prepared.cutAt}`)
    }
    const t1 = performance.now()
    profile?.add(PHASES.prepare, t1 - t0)
    if (this.writing !== null) {
      await this.settle()
      profile?.add(PHASES.waiting, performance.now() - t1)
    }
    const from = this.committed
    const last = batch[batch.length - 1]!
    const windows = this.ctx.resync.snapshot(last.endLsn)
    const attributes = {
      "capture.slot": opts.slot,
      "capture.transactions": batch.length,
      "capture.checkpoint": formatLsn(last.endLsn)
    }
    this.write(
      prepared.store,
      traced(opts.span, "capture.batch", attributes, async (annotate) => {
        const begun = performance.now()
        let opened = 0
        let answered = 0
        // The fence, then the checkpoint: each fails the transaction before anything is written,
        // the one when the database takes writes only from a newer release (its guard refuses
        // them; checkFence says why), the other when another process moved the checkpoint. All
        // statements go out at once, answered in order.
        const statements = (tx: Transaction) =>
          [
            // Followers and the next batch need not wait for the disk: the slot does (flushed.ts).
            asyncCommit ? tx`set local synchronous_commit = off`.execute() : Promise.resolve(),
            checkFence(tx).then((fence) => {
              if (!fence.writable) throw new CaptureFenced({ message: fence.reason! })
            }),
            advanceCheckpoint(tx, opts.slot, from, last.endLsn, last.commitTime, windows),
            ...prepared.write(tx)
          ] as const
        if (prepared.oneRound) {
          // Nothing reads what the batch wrote: COMMIT goes with the statements, one round trip.
          opened = begun
          await pipelinedCommit(sql, statements)
          answered = performance.now()
        } else {
          // BEGIN goes out with the statements (pipelined.ts); COMMIT after what reads them back.
          await pipelinedTransaction(sql, async (tx) => {
            opened = performance.now()
            await Promise.all(statements(tx))
            await prepared.reshape(tx)
            answered = performance.now()
          })
        }
        if (profile) {
          const end = performance.now()
          profile.add(PHASES.write, end - begun)
          profile.add(PHASES.begin, opened - begun)
          profile.add(PHASES.statements, answered - opened)
          profile.add(PHASES.commit, end - answered)
        }
        const tally = new Map<string, number>()
        for (const e of prepared.events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
        annotate("capture.changes", prepared.changes)
        annotate("capture.events", prepared.events.length)
        // Read only for a span: the next batch's write waits behind this.
        if (opts.span !== undefined && prepared.events.length > 0)
          annotate("event.ids", await eventIdsOf(sql, [...new Set(prepared.events.map((e) => e.commitLsn))]))
        await this.stored(last.endLsn, prepared.changes, tally, prepared.quarantine, prepared.store.incomplete)
      })
    )
    // The rest of a cut batch is prepared while its first part is written.
    if (cut !== null) await this.flush()
  }

  /**
   * The rest of the transaction being taken, as a large one (large-stream.ts): its changes so
   * far, then the stream's until its commit, in one database transaction with the checkpoint.
   */
  private async spill(p: Position & { in: "transaction" }, truncate: (Message & { tag: "truncate" }) | null) {
    const { sql, stream, opts, quarantine, resync } = this.ctx
    await this.drain()
    this.position = BETWEEN
    const done = await traced(
      opts.span,
      "capture.batch",
      { "capture.slot": opts.slot, "capture.transactions": 1, "capture.large": true },
      async (annotate) => {
        const c = await streamLarge(sql, stream, p.changes, truncate, {
          slot: opts.slot,
          committed: this.committed,
          accepted: this.accepted,
          clock: this.clock,
          quarantine,
          resync,
          seenBroken: this.seenBroken,
          markers: p.markers ?? []
        })
        annotate("capture.checkpoint", formatLsn(c.endLsn))
        annotate("capture.changes", c.changes)
        const events = [...c.tally.values()].reduce((a, b) => a + b, 0)
        annotate("capture.events", events)
        if (opts.span !== undefined && events > 0) annotate("event.ids", await eventIdsOf(sql, [c.endLsn]))
        return c
      }
    )
    this.accepted = done.endLsn
    await this.stored(done.endLsn, done.changes, done.tally, done.delta, done.incomplete)
  }

  /**
   * A batch is stored with its checkpoint: the checkpoint moves and is acknowledged; what the
   * batch held and released is said once; rows it applied without values the mirror lacks too
   * are read again (resync.ts); retries left over go on in a batch of their own.
   */
  private async stored(
    endLsn: Lsn,
    changes: number,
    tally: Map<string, number>,
    delta: QuarantineDelta,
    incomplete: ReadonlyArray<readonly [string, string]>
  ) {
    const { stats, quarantine, resync, tell } = this.ctx
    this.committed = endLsn
    resync.applied(this.committed)
    if (incomplete.length > 0) quarantine.rereads.push(...incomplete)
    // Retries queued past this batch's share: a request makes the next batch, without waiting for traffic.
    if (quarantine.retriesQueued) {
      await this.ctx.opts.beforeContinue?.()
      await askToContinue(this.app)
    }
    quarantine.settled(delta)
    // New work for the re-read job (asks waiting for a table that does not fit wake it when it fits).
    if (incomplete.length > 0 || (delta.rereadsAsked?.length ?? 0) > 0 || delta.resync.length > 0) resync.kick()
    stats.quarantined += delta.held.length
    reportDelta(tell, delta)
    this.acks.stored(this.committed)
    stats.checkpoint = this.committed
    stats.lastAppliedAt = new Date()
    stats.changes += changes
    stats.batches++
    stats.countEvents(tally)
    await this.ctx.applied()
  }
}
