// The operator's overview (`npm run admin -- status`): the releases (this tool's, what the
// database's schema fence takes, each process running), capture, the outbox backlog,
// deliveries due and failing, endpoints switched off and why, replays running, keys near
// expiry, each read by its concept; and the verdict scripts exit with. Read from the
// database only, so it works from any process while the service runs (or not).
import { Effect } from "effect"
import { keysNearExpiry, type KeyNearExpiry } from "../../access/keys/store.ts"
import { captureStatus, type CaptureStatus } from "../../pipeline/capture/status.ts"
import { leaderInfo, type LeaderInfo } from "../../pipeline/capture/leader.ts"
import { quarantineSummary, type QuarantineSummary } from "../../pipeline/capture/quarantine/operators.ts"
import { databaseNow } from "../../platform/db/health.ts"
import { measureReplicasOnce, type ReplicaReport } from "../../platform/db/read-replicas.ts"
import { query, Sql } from "../../platform/db/Sql.ts"
import { readFence, type SchemaFence } from "../../platform/db/fence.ts"
import { processesSeen, type ProcessInfo } from "../../platform/processes.ts"
import { compareReleases, RELEASE } from "../../platform/release.ts"
import { NO_READ_REPLICAS, type ReadReplicaSettings } from "../../platform/config.ts"
import type { ReplayView } from "../../webhooks/replay/jobs.ts"
import { replaysRunning } from "../../webhooks/replay/queries.ts"
import {
  deliveryCounts,
  endpointsSwitchedOff,
  outboxBacklog,
  type DeliveryCounts,
  type OutboxBacklog,
  type SwitchedOffEndpoint
} from "../../webhooks/status.ts"

export const KEY_EXPIRY_WARNING_DAYS = 14

export interface OperationsStatus {
  readonly at: string
  /** Which releases run: this tool's, what the database takes, and each process seen within the last minute. */
  readonly release: {
    /** This tool's release (package.json's version) and the schema generation it was built for. */
    readonly version: string
    readonly generation: number
    /** The database's schema generation and the oldest release it takes writes from; null before any release had a fence. */
    readonly database: SchemaFence | null
    readonly processes: ReadonlyArray<ProcessInfo>
  }
  readonly capture: CaptureStatus & {
    /** A capture process holds the leader lock (one per database). */
    readonly leaderRunning: boolean
    /** The session holding it (the others wait as standbys), or null. */
    readonly leader: LeaderInfo | null
    /** Records held in quarantine, and app tables whose contract is broken (docs/operations.md). */
    readonly quarantine: QuarantineSummary
  }
  readonly outbox: OutboxBacklog
  readonly deliveries: DeliveryCounts
  readonly endpointsSwitchedOff: ReadonlyArray<SwitchedOffEndpoint>
  /** Replays being sent now, oldest first, with their progress. */
  readonly replays: ReadonlyArray<ReplayView>
  readonly keysNearExpiry: ReadonlyArray<KeyNearExpiry>
  /** The read API's standbys (READ_DATABASE_URL), each measured now; empty when none is set. */
  readonly readReplicas: ReadonlyArray<ReplicaReport>
}

export const operationsStatus = Effect.fn("operationsStatus")(function* (
  slot: string,
  readReplicas: ReadReplicaSettings = NO_READ_REPLICAS
) {
  const { pool } = yield* Sql
  const [
    capture,
    leader,
    outbox,
    deliveries,
    endpointsOff,
    replays,
    keys,
    now,
    quarantine,
    standbys,
    fence,
    processes
  ] = yield* Effect.all(
    [
      captureStatus(slot),
      leaderInfo,
      outboxBacklog,
      deliveryCounts,
      endpointsSwitchedOff,
      replaysRunning,
      keysNearExpiry(KEY_EXPIRY_WARNING_DAYS),
      databaseNow,
      quarantineSummary(),
      Effect.promise(() => measureReplicasOnce(readReplicas, pool)),
      query((sql) => readFence(sql)),
      query((sql) => processesSeen(sql))
    ],
    { concurrency: "unbounded" }
  )
  const status: OperationsStatus = {
    at: now.toISOString(),
    release: { version: RELEASE.version, generation: RELEASE.generation, database: fence, processes },
    capture: { ...capture, leaderRunning: leader !== null, leader, quarantine },
    outbox,
    deliveries,
    endpointsSwitchedOff: endpointsOff,
    replays,
    keysNearExpiry: keys,
    readReplicas: standbys
  }
  return status
})

/** What `status` exits with, for scripts: 0 healthy, 1 degraded, 2 broken. */
export type Health = "healthy" | "degraded" | "broken"

export const HEALTH_EXIT_CODES: Readonly<Record<Health, number>> = { healthy: 0, degraded: 1, broken: 2 }

/** Capture further behind than this (seconds) is degraded (`status --lag-threshold`; the shipped alert uses the same). */
export const LAG_THRESHOLD_SECONDS = 60

export interface HealthVerdict {
  readonly state: Health
  /** Why, one sentence each; empty when healthy. */
  readonly reasons: ReadonlyArray<string>
}

/**
 * Broken: what needs an operator now (the slot is gone or lost its WAL: events in the gap are
 * lost for good; the database does not answer, see databaseDown). Degraded: what usually
 * mends itself or waits on someone else (capture behind or stalled, no capture leader, e.g.
 * while a standby takes over, the slot about to lose WAL, endpoints switched off, a read
 * replica skipped: its reads go to the primary meanwhile, a process of a release the
 * schema fence stopped: the rest of an upgrade).
 */
export const assessStatus = (
  s: OperationsStatus,
  options: { readonly lagThresholdSeconds?: number } = {}
): HealthVerdict => {
  const threshold = options.lagThresholdSeconds ?? LAG_THRESHOLD_SECONDS
  const c = s.capture
  const broken: string[] = []
  const degraded: string[] = []
  if (!c.slotExists) {
    if (c.checkpointLsn !== null)
      broken.push(
        `replication slot ${c.slot} is missing: it was lost (capture recreates it and rebuilds the views; events in the gap are not sent)`
      )
    else degraded.push(`replication slot ${c.slot} does not exist yet: capture has not started`)
  } else if (c.walStatus === "lost" || c.invalidationReason !== null) {
    broken.push(
      `replication slot ${c.slot} was invalidated (${c.invalidationReason ?? "wal_status lost"}): capture rebuilds; events in the gap are not sent`
    )
  } else if (c.behindSlot) {
    broken.push(
      `the service's database is behind replication slot ${c.slot}: its checkpoint ${c.checkpointLsn} is before the slot's confirmed ${c.confirmedLsn} (restored from an older backup?); capture refuses until npm run admin -- rebuild-views --fresh-snapshot (events for changes in between are not sent)`
    )
  } else if (c.walStatus === "unreserved") {
    degraded.push(
      `replication slot ${c.slot} is about to lose WAL (wal_status unreserved${c.safeWalBytes === null ? "" : `, ${c.safeWalBytes} bytes to go`})`
    )
  }
  for (const b of c.quarantine?.broken ?? [])
    broken.push(
      `capture: app.${b.table} no longer fits what the service reads (since ${b.since}), its records are held until it does: ${b.problems.join("; ")}`
    )
  for (const r of c.quarantine?.resyncing ?? [])
    if (!c.quarantine?.broken.some((b) => b.table === r.table))
      degraded.push(
        `capture is re-reading app.${r.table} from the app table since ${r.since} (${r.rows} rows so far): the records it held shape again when it is done`
      )
  const q = c.quarantine
  if (q !== undefined && q.count > 0)
    degraded.push(
      `capture holds ${q.count} record${q.count === 1 ? "" : "s"} in quarantine (capture quarantine list); the first: ${q.first === null ? "-" : `#${q.first.id} app.${q.first.table} ${q.first.key}: ${q.first.error}`}`
    )
  if (c.leader === null)
    degraded.push(
      "no capture leader: no process is capturing (a standby takes over within seconds; if none runs, start one)"
    )
  if (c.stalledAt !== null)
    degraded.push(
      `capture stalled since ${c.stalledAt} (${c.stallReconnects} reconnect${c.stallReconnects === 1 ? "" : "s"} so far): ${c.stallReason ?? "no reason recorded"}`
    )
  if (c.lagSeconds !== null && c.lagSeconds > threshold)
    degraded.push(`capture is ${Math.round(c.lagSeconds)} s behind (threshold ${threshold} s)`)
  for (const r of s.readReplicas ?? [])
    if (!r.usable)
      degraded.push(
        `read replica ${r.replica} is skipped (${r.problem ?? "unusable"}): the API reads from the other replicas or the primary`
      )
  const needed = s.release?.database?.oldestWriter
  for (const p of s.release?.processes ?? [])
    if (!p.writable || (needed !== undefined && compareReleases(p.release, needed) < 0))
      degraded.push(
        `process ${p.host}:${p.pid} runs release ${p.release}, older than the ${needed ?? "?"} the database takes writes from: it writes nothing; replace it`
      )
  if (s.endpointsSwitchedOff.length > 0) {
    degraded.push(
      `${s.endpointsSwitchedOff.length} webhook endpoint${s.endpointsSwitchedOff.length === 1 ? " is" : "s are"} switched off`
    )
  }
  return broken.length > 0
    ? { state: "broken", reasons: [...broken, ...degraded] }
    : degraded.length > 0
      ? { state: "degraded", reasons: degraded }
      : { state: "healthy", reasons: [] }
}

/** The verdict when the database does not answer (or refuses the service): broken. */
export const databaseDown = (error: unknown): HealthVerdict => ({
  state: "broken",
  reasons: [`database: ${error instanceof Error ? error.message : String(error)}`]
})
