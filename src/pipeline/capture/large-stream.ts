// The rest of a transaction too large for a batch, or one with a TRUNCATE, taken from the
// stream into one open database transaction (large.ts) until its commit: two chunks in memory
// at most, one written while the next is decoded. A TRUNCATE deletes the table's mirrored rows
// a page of keys at a time, never all of its keys at once.
import type { Sql } from "postgres"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import { mirroredKeys } from "../projection/store.ts"
import { TABLES } from "../projection/tables.ts"
import { checkFence } from "../../platform/db/fence.ts"
import { advanceCheckpoint } from "./checkpoint.ts"
import { CaptureFenced } from "./errors.ts"
import { decodeChange } from "./decode.ts"
import { LargeTransaction } from "./large.ts"
import { relationProblems } from "./quarantine/contract.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"
import type { CaptureQuarantine, QuarantineDelta } from "./quarantine/state.ts"
import type { Resync } from "./resync.ts"
import type { ReplicationStream } from "./stream.ts"
import type { RowChange } from "./txn.ts"

/** Row changes written to the mirror at a time (two in memory: one written, one decoded). */
const LARGE_CHUNK = 2000
/** Keys of a truncated table deleted at a time. */
const TRUNCATE_PAGE = 1000

/**
 * A transaction's commit time (pgoutput's, microseconds since the Unix epoch, to the ms), never
 * before `floor`, the one taken before it. PostgreSQL stamps a commit before it writes the commit
 * record, so two transactions committing at once can reach the WAL in the other order of their
 * stamps; capture's times follow the WAL, so that committedAt never goes back along the stream.
 */
export const commitDate = (t: unknown, floor: Date | null = null): Date => {
  const at = new Date(Number((t as bigint) / 1000n))
  return floor !== null && floor > at ? floor : at
}

/** The commit times one capture run takes, in WAL order, each by commitDate over the one before. */
export class CommitClock {
  private last: Date | null
  /** `last`: the commit time stored with the checkpoint the run starts from. */
  constructor(last: Date | null) {
    this.last = last
  }
  take(t: unknown): Date {
    this.last = commitDate(t, this.last)
    return this.last
  }
}

/** The followed app tables a TRUNCATE message names. */
export const truncatedTables = (msg: Message & { tag: "truncate" }): ReadonlyArray<string> =>
  msg.relations.filter((rel) => rel.schema === "app" && rel.name in TABLES).map((rel) => rel.name)

/**
 * A Relation message of an app table: the contract marker it makes, or null (it fits, and fitted
 * before). `seenBroken` holds the tables a Relation message found broken (or the stored state
 * did): a later one that fits again is passed on; others that fit are not (most meet none).
 */
export const relationMarker = (
  msg: Message & { tag: "relation" },
  seenBroken: Set<string>
): QuarantineMarker | null => {
  if (msg.schema !== "app" || !(msg.name in TABLES)) return null
  const problems = relationProblems(msg.name, msg.columns)
  if (problems.length > 0) {
    seenBroken.add(msg.name)
    return { kind: "contract", table: msg.name, problems }
  }
  return seenBroken.delete(msg.name) ? { kind: "contract", table: msg.name, problems: null } : null
}

export interface LargeCommitted {
  readonly endLsn: Lsn
  readonly tally: Map<string, number>
  readonly delta: QuarantineDelta
  readonly incomplete: ReadonlyArray<readonly [string, string]>
  readonly changes: number
}

/**
 * Applies a transaction's changes so far (`first`, and `truncate` if that is what made it
 * large), then the rest of it from the stream, and its checkpoint, in one database transaction.
 * `committed`: the stored checkpoint; `accepted`: the last commit taken (one at or below it
 * was applied already: a bug).
 */
export const streamLarge = (
  sql: Sql,
  stream: ReplicationStream,
  first: ReadonlyArray<RowChange>,
  truncate: (Message & { tag: "truncate" }) | null,
  ctx: {
    readonly slot: string
    readonly committed: Lsn
    readonly accepted: Lsn
    /** The run's commit times (its transactions' before this one). */
    readonly clock: CommitClock
    readonly quarantine: CaptureQuarantine
    readonly resync: Resync
    readonly seenBroken: Set<string>
    /** What the transaction met so far besides its changes (a table's contract, a request), in order. */
    readonly markers: ReadonlyArray<QuarantineMarker>
  }
): Promise<LargeCommitted> =>
  sql.begin(async (tx) => {
    const big = new LargeTransaction(tx, ctx.quarantine)
    for (const m of ctx.markers) big.mark(m)
    let buffered: RowChange[] = [...first]
    let total = 0
    // A chunk is written while the next one is decoded: at most one in flight, so memory
    // holds two chunks. Each chunk reads the mirror as the one before left it (the
    // transaction's statements run in order).
    let inflight: Promise<void> | null = null
    const settled = async () => {
      if (inflight === null) return
      const p = inflight
      inflight = null
      await p
    }
    /** Everything buffered written, in order: before a change that reads the mirror as it stands. */
    const written = async () => {
      await settled()
      if (buffered.length > 0) await big.add(buffered)
      total += buffered.length
      buffered = []
    }
    const truncated = async (msg: Message & { tag: "truncate" }) => {
      await written()
      await big.init()
      for (const table of truncatedTables(msg)) total += await deleteAll(tx, big, table, ctx.resync)
    }
    if (truncate !== null) await truncated(truncate)
    for (;;) {
      if (buffered.length >= LARGE_CHUNK) {
        await settled()
        const p = big.add(buffered)
        p.catch(() => {}) // awaited by settled(); a failure must not go unhandled meanwhile
        inflight = p
        total += buffered.length
        buffered = []
      }
      const msg = await stream.next()
      if (msg.tag === "insert" || msg.tag === "update" || msg.tag === "delete") {
        const cs = decodeChange(msg)
        if (ctx.resync.open > 0) for (const c of cs) ctx.resync.note(c.table, c.key)
        buffered.push(...cs)
      } else if (msg.tag === "commit") {
        await written()
        const endLsn = parseLsn(msg.commitEndLsn!)
        const commitTime = ctx.clock.take(msg.commitTime)
        if (endLsn <= ctx.accepted) throw new Error("large transaction at or below the checkpoint")
        const fence = await checkFence(tx)
        if (!fence.writable) throw new CaptureFenced({ message: fence.reason! })
        const { tally, quarantine: delta } = await big.finish(endLsn, commitTime)
        await advanceCheckpoint(tx, ctx.slot, ctx.committed, endLsn, commitTime, ctx.resync.snapshot(endLsn))
        return { endLsn, tally, delta, incomplete: big.incomplete, changes: total }
      } else if (msg.tag === "relation") {
        const m = relationMarker(msg, ctx.seenBroken)
        if (m === null) continue
        await written()
        big.mark(m)
      } else if (msg.tag === "truncate") {
        await truncated(msg)
      }
    }
  })

/** Deletes every row the mirror holds of a truncated table (those written earlier in this transaction too), a page of keys at a time. */
const deleteAll = async (tx: Tx, big: LargeTransaction, table: string, resync: Resync): Promise<number> => {
  resync.truncated(table)
  let after = ""
  let n = 0
  for (;;) {
    const keys = await mirroredKeys(tx, table, { from: after, to: null }, true, TRUNCATE_PAGE)
    if (keys.length === 0) return n
    await big.add(keys.map((key): RowChange => ({ table, key, data: null })))
    n += keys.length
    after = keys[keys.length - 1]!
  }
}
