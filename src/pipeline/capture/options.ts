// What a capture run is given (its options) and what it counts (its stats, which status and
// /metrics read), shared by the run (run.ts), its batcher (batcher.ts) and its watches (watch.ts).
import type { Sql } from "postgres"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { SpanRunner } from "../../platform/tracing.ts"
import type { CaptureProfile } from "./profile.ts"

export interface CaptureOptions {
  /** The service's own database: the leader lock's connections. */
  readonly url: string
  /**
   * The app's database when it is not the service's (SERVICE_DATABASE_URL): its URL (the
   * replication stream, the slot's snapshot) and a pool (its catalog, the slot, the messages
   * capture writes into its WAL). Absent: `url` and the pool capture runs on.
   */
  readonly app?: { readonly url: string; readonly sql: Sql }
  readonly slot: string
  readonly publication: string
  /** Create (or mark) the slot with `failover`, so standbys that sync slots keep it (17+). */
  readonly failover?: boolean
  /** Row changes applied together in one database transaction, at most. */
  readonly batchChanges: number
  /** A transaction with more changes than this is applied as it streams. */
  readonly largeTransaction?: number
  readonly heartbeatMs: number
  /** Nothing from the server this long while WAL waits in the slot: the stream is stalled (default 60 s). */
  readonly stallTimeoutMs?: number
  /** Runs each applied batch in a trace span (when tracing is on). */
  readonly span?: SpanRunner
  /** Adds where capture's time goes, by phase (bench/capture prints it). */
  readonly profile?: CaptureProfile
  /** How often the app tables' fit is read from the catalog (default: the heartbeat's interval). */
  readonly contractCheckMs?: number
  /** Held keys kept in memory, at most (quarantine/state.ts; tests lower it). */
  readonly heldInMemory?: number
  /** Keys re-read from an app table per chunk (resync.ts; tests lower it). */
  readonly resyncChunk?: number
  /** Tests only: runs between a re-read chunk's read and its high watermark. */
  readonly resyncAfterRead?: (table: string, keys: ReadonlyArray<string>) => Promise<void>
  /** Tests only: runs after a batch that left retries queued is stored, before capture asks to go on (a throw: a crash there). */
  readonly beforeContinue?: () => Promise<void>
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
  /** Stalls this process noticed (each ended its run: it reconnects). */
  stalls = 0
  changes = 0
  batches = 0
  /** Records capture held in quarantine in this process (each time one was held, or held again). */
  quarantined = 0
  readonly events = new Map<string, number>()
  countEvents(kinds: Iterable<[string, number]>) {
    for (const [k, n] of kinds) this.events.set(k, (this.events.get(k) ?? 0) + n)
  }
}

/** A log line from plain code (the batcher): its text is the contract (docs/operations.md), its fields are annotations. */
export type Tell = (level: "info" | "warn" | "error", message: string, fields: Record<string, unknown>) => void

/** The app's pool and URL for these options (the service's own when both are one database). */
export const appOf = (sql: Sql, opts: CaptureOptions) => opts.app ?? { url: opts.url, sql }

export const STALL_TIMEOUT_MS = 60_000
