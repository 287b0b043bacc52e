// The capture loop: leadership, publication, slot health (bootstrap or loud rebuild), then
// the stream applied in batches. Each batch commits views, outbox and checkpoint together;
// only then is the checkpoint acknowledged to the server.
import type { Sql } from "postgres"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { connect } from "../db/Database.ts"
import { applyBatch } from "./apply.ts"
import { bootstrap } from "./bootstrap.ts"
import { readState, writeCheckpoint } from "./checkpoint.ts"
import { decodeChange } from "./decode.ts"
import { LargeTransaction } from "./large.ts"
import { LEADER_LOCK, leaderApplicationName, leaderInfo } from "./leader.ts"
import { formatLsn, parseLsn, type Lsn } from "./lsn.ts"
import { ensurePublication } from "./publication.ts"
import { setSlotFailover, slotInfo } from "./slot.ts"
import { ReplicationStream } from "./stream.ts"
// The same rebuild operators run (rebuild-views), here when the shapes' version changed.
import { rebuildViews } from "../operations/rebuild.ts"
import { PROJECTION_VERSION, storedProjectionVersion } from "../projection/version.ts"
import { TABLES } from "../projection/tables.ts"
import type { RowChange, Txn } from "./txn.ts"

export interface CaptureOptions {
  readonly url: string
  readonly slot: string
  readonly publication: string
  /** Create (or mark) the slot with `failover`, so standbys that sync slots keep it (17+). */
  readonly failover?: boolean
  /** Row changes applied together in one database transaction, at most. */
  readonly batchChanges: number
  /** A transaction with more changes than this is applied as it streams. */
  readonly largeTransaction?: number
  readonly heartbeatMs: number
  readonly log: (level: "info" | "warn" | "error", message: string, fields?: Record<string, unknown>) => void
}

/** Counters the status and metrics read. */
export class CaptureStats {
  /** leader: this process holds the leader lock; standby: it waits for it (or retries after an error). */
  role: "leader" | "standby" = "standby"
  leaderSince: Date | null = null
  running = false
  streaming = false
  checkpoint: Lsn = 0n
  lastAppliedAt: Date | null = null
  lastError: string | null = null
  /** Runs that failed (each retried with backoff). */
  errors = 0
  changes = 0
  batches = 0
  readonly events = new Map<string, number>()
  countEvents(kinds: Iterable<[string, number]>) {
    for (const [k, n] of kinds) this.events.set(k, (this.events.get(k) ?? 0) + n)
  }
}

/** pgoutput commit times are microseconds since the Unix epoch. */
const commitDate = (t: unknown) => new Date(Number((t as bigint) / 1000n))

export { LEADER_LOCK } from "./leader.ts"

/** How often a standby looks whether the leader lock is free. */
const STANDBY_POLL_MS = 2000

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms)
    signal.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true })
  })

/**
 * Waits as a standby until this process holds the leader lock, and returns the lock's
 * connection (null when aborted first). The lock lives on a connection of its own (not
 * sql.reserve(): postgres.js 3.4.9 can throw an uncatchable error when a reserved
 * connection's server goes away), made only when the lock looks free: a standby holds no
 * connection of its own, and the leader's connection start says since when it leads.
 */
const takeLeadership = async (sql: Sql, opts: CaptureOptions, signal: AbortSignal): Promise<Sql | null> => {
  const t0 = Date.now()
  let logged: number | null | undefined
  for (;;) {
    let holder = await leaderInfo(sql)
    if (holder === null) {
      const lock = connect(opts.url, 1, { keepForever: true })
      // Named as it takes the lock, so pg_stat_activity (a standby's log, `status`) tells which process leads.
      const rows = await lock<{ ok: boolean }[]>`
        select ok, case when ok then set_config('application_name', ${leaderApplicationName()}, false) end as name
        from (select pg_try_advisory_lock(${LEADER_LOCK}) as ok) t`.catch(async (e: unknown) => {
        await lock.end({ timeout: 1 }).catch(() => {})
        throw e
      })
      if (rows[0]?.ok) {
        opts.log("info", "capture leader: took over", logged === undefined ? {} : { waitedSeconds: Math.round((Date.now() - t0) / 1000) })
        return lock
      }
      // Another process took it first.
      await lock.end({ timeout: 1 }).catch(() => {})
      holder = await leaderInfo(sql)
    }
    // Once, and again only when another process leads.
    if (logged === undefined || (holder !== null && holder.pid !== logged)) {
      logged = holder?.pid ?? null
      opts.log("info", "capture standby: waiting for the leader lock", {
        leader: holder === null ? null : { pid: holder.pid, applicationName: holder.applicationName, clientAddress: holder.clientAddress, since: holder.since }
      })
    }
    await sleep(STANDBY_POLL_MS, signal)
    if (signal.aborted) return null
  }
}

/** Runs until `signal` aborts (resolves) or the connection fails (rejects: the caller retries). */
export const runCapture = async (sql: Sql, opts: CaptureOptions, signal: AbortSignal, stats: CaptureStats): Promise<void> => {
  let lock: Sql | null = null
  let lost: Error | null = null
  let stream: ReplicationStream | null = null
  let heartbeat: ReturnType<typeof setInterval> | undefined
  const onAbort = () => void stream?.close()
  try {
    lock = await takeLeadership(sql, opts, signal)
    if (lock === null) return
    const held = lock
    const lockPid = (await held<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid
    stats.role = "leader"
    stats.leaderSince = new Date()
    stats.running = true
    await ensurePublication(sql, opts.publication)
    let state = await readState(sql, opts.slot)
    const slot = await slotInfo(sql, opts.slot)
    if (!state || !slot.exists || slot.invalidation) {
      const gap = state ? (slot.exists ? `replication slot ${opts.slot} was invalidated (${slot.invalidation})` : `replication slot ${opts.slot} was lost`) : null
      if (gap) {
        opts.log("error", `${gap}: rebuilding every view from the app tables; events for changes after checkpoint ${formatLsn(state!.checkpoint)} and before the rebuild could not be derived and will not be sent`, { checkpoint: formatLsn(state!.checkpoint) })
      }
      const t0 = Date.now()
      const result = await bootstrap(sql, opts.url, opts.slot, gap, opts.failover ?? false)
      opts.log("info", gap ? "views rebuilt after slot loss" : "initial views built from existing rows (no events for them)", {
        rows: result.rows,
        views: result.views,
        consistentPoint: formatLsn(result.consistentPoint),
        ms: Date.now() - t0
      })
      state = await readState(sql, opts.slot)
      if (!state) throw new Error("bootstrap left no capture state")
    } else if (opts.failover && slot.failover === false) {
      await setSlotFailover(opts.url, opts.slot, true)
      opts.log("info", "replication slot marked for failover", { slot: opts.slot })
    }
    if (signal.aborted) return
    // Views stored in older shapes are rebuilt from the mirror before streaming resumes.
    const stored = await storedProjectionVersion(sql)
    if (stored !== PROJECTION_VERSION) {
      const t0 = Date.now()
      const r = await rebuildViews(sql)
      opts.log("info", "record shapes changed: every view rebuilt from the mirror", { from: stored, to: PROJECTION_VERSION, views: r.views, changed: r.changed, ms: Date.now() - t0 })
    }
    stats.checkpoint = state.checkpoint
    stream = new ReplicationStream(opts.url, opts.slot, opts.publication, state.checkpoint)
    signal.addEventListener("abort", onAbort, { once: true })
    await stream.start(state.checkpoint)
    stats.streaming = true
    stats.lastError = null // streaming again: what stopped it is over
    opts.log("info", "capture streaming", { slot: opts.slot, from: formatLsn(state.checkpoint) })
    // An idle database still moves the slot: a tiny transactional message every interval.
    // The lock belongs to its session: should that connection be gone or replaced (postgres.js
    // reconnects silently), another process may lead by now, so this one steps down.
    const stepDown = (why: string) => {
      if (lost !== null) return
      lost = new Error(`capture lost its leader lock (${why}); stepping down`)
      void stream?.close()
    }
    heartbeat = setInterval(() => {
      sql`select pg_logical_emit_message(true, 'safety-records-heartbeat', '')`.catch(() => {})
      held<{ pid: number }[]>`select pg_backend_pid() as pid`.then(
        ([r]) => r?.pid !== lockPid && stepDown("its connection was replaced"),
        () => stepDown("its connection failed")
      )
    }, opts.heartbeatMs)
    await consume(sql, stream, state.checkpoint, opts, signal, stats)
    if (lost !== null) throw lost
  } catch (e) {
    if (signal.aborted) return
    throw lost ?? e
  } finally {
    clearInterval(heartbeat)
    signal.removeEventListener("abort", onAbort)
    stats.streaming = false
    stats.running = false
    stats.role = "standby"
    stats.leaderSince = null
    await stream?.close()
    // Ending the lock's connection releases the lock, also when its server went away.
    await lock?.end({ timeout: 1 }).catch(() => {})
  }
}

/** The followed app tables a TRUNCATE message names. */
const truncatedTables = (msg: Message & { tag: "truncate" }): ReadonlyArray<string> =>
  msg.relations.filter((rel) => rel.schema === "app" && rel.name in TABLES).map((rel) => rel.name)

const consume = async (sql: Sql, stream: ReplicationStream, start: Lsn, opts: CaptureOptions, signal: AbortSignal, stats: CaptureStats) => {
  const large = opts.largeTransaction ?? 10_000
  let checkpoint = start
  let pending: Txn[] = []
  let pendingChanges = 0
  let current: { xid: number; changes: RowChange[] } | null = null
  let busy = false
  stream.idle = () => !busy && current === null && pending.length === 0 && stream.pending === 0

  const flush = async () => {
    if (pending.length === 0) return
    const batch = pending
    const last = batch[batch.length - 1]!
    const result = await sql.begin(async (tx) => {
      const r = await applyBatch(tx, batch)
      await writeCheckpoint(tx, opts.slot, last.endLsn, last.commitTime)
      return r
    })
    pending = []
    pendingChanges = 0
    checkpoint = last.endLsn
    await stream.ack(checkpoint)
    stats.checkpoint = checkpoint
    stats.lastAppliedAt = new Date()
    stats.changes += result.changes
    stats.batches++
    const tally = new Map<string, number>()
    for (const e of result.events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
    stats.countEvents(tally)
  }

  // Streams the rest of an oversized transaction into one open database transaction.
  const applyLarge = async (first: RowChange[]) => {
    await flush()
    let buffered: RowChange[] = first
    let total = 0
    const committed = await sql.begin(async (tx) => {
      const big = new LargeTransaction(tx)
      for (;;) {
        if (buffered.length >= 1000) {
          await big.add(buffered)
          total += buffered.length
          buffered = []
        }
        const msg = await stream.next()
        if (msg.tag === "insert" || msg.tag === "update" || msg.tag === "delete") {
          buffered.push(...decodeChange(msg))
        } else if (msg.tag === "commit") {
          if (buffered.length > 0) await big.add(buffered)
          total += buffered.length
          const endLsn = parseLsn(msg.commitEndLsn!)
          const commitTime = commitDate(msg.commitTime)
          if (endLsn <= checkpoint) throw new Error("large transaction at or below the checkpoint")
          const tally = await big.finish(endLsn, commitTime)
          await writeCheckpoint(tx, opts.slot, endLsn, commitTime)
          return { endLsn, tally }
        } else if (msg.tag === "truncate") {
          // What this transaction wrote so far is in the mirror already (in this database
          // transaction): every mirrored row of the tables goes, in chunks.
          if (buffered.length > 0) await big.add(buffered)
          total += buffered.length
          buffered = []
          for (const table of truncatedTables(msg)) {
            const keys = await tx<{ key: string }[]>`select key from service.rows where tbl = ${table}`
            for (let i = 0; i < keys.length; i += 1000) {
              const chunk = keys.slice(i, i + 1000).map(({ key }): RowChange => ({ table, key, data: null }))
              await big.add(chunk)
              total += chunk.length
            }
          }
        }
      }
    })
    checkpoint = committed.endLsn
    await stream.ack(checkpoint)
    stats.checkpoint = checkpoint
    stats.lastAppliedAt = new Date()
    stats.changes += total
    stats.batches++
    stats.countEvents(committed.tally)
  }

  // A transaction grown past what memory should hold goes on as a large one, applied as it streams.
  const spillIfLarge = async () => {
    if (current === null || current.changes.length <= large) return
    const first = current.changes
    current = null
    await applyLarge(first)
  }

  while (!signal.aborted) {
    busy = false
    const msg: Message = await stream.next()
    busy = true
    switch (msg.tag) {
      case "begin":
        current = { xid: msg.xid, changes: [] }
        break
      case "insert":
      case "update":
      case "delete": {
        if (!current) break
        current.changes.push(...decodeChange(msg))
        await spillIfLarge()
        break
      }
      case "truncate": {
        // Every row of the truncated tables goes, as deletes in this transaction, in order:
        // those mirrored before it, and those this transaction wrote before the TRUNCATE.
        await flush()
        if (!current) break
        for (const table of truncatedTables(msg)) {
          const keys = new Set((await sql<{ key: string }[]>`select key from service.rows where tbl = ${table}`).map((r) => r.key))
          for (const c of current.changes) if (c.table === table) keys.add(c.key)
          for (const key of keys) current.changes.push({ table, key, data: null })
        }
        await spillIfLarge()
        break
      }
      case "commit": {
        const endLsn = parseLsn(msg.commitEndLsn!)
        if (current && endLsn > checkpoint) {
          pending.push({ xid: current.xid, endLsn, commitTime: commitDate(msg.commitTime), changes: current.changes })
          pendingChanges += current.changes.length
        }
        current = null
        // Flush when the batch is full, or when nothing else is waiting (latency over batching).
        if (pendingChanges >= opts.batchChanges || stream.pending === 0) await flush()
        break
      }
      default:
        break
    }
  }
}
