// The service's metrics: one registry per process, its families, and the collectors that
// copy capture's and the delivery engine's own counters in at scrape time, and read what
// only the database knows (lag, the slot's WAL, deliveries waiting, endpoints switched off).
// Metrics is a Layer with no dependencies, built first (it also provides the delivery
// engine's attempt observer); the /metrics route registers the collectors once capture and
// delivery exist.
import { Context, Effect, Layer } from "effect"
import type { CaptureStats } from "../../pipeline/capture/run.ts"
import { captureStatus } from "../../pipeline/capture/status.ts"
import { quarantineSummary } from "../../pipeline/capture/quarantine/operators.ts"
import type { KeysStats } from "../../access/keys/service.ts"
import { AttemptObserver, type EngineStats } from "../../webhooks/engine/engine.ts"
import { runningReplayTotals } from "../../webhooks/replay/jobs.ts"
import { deliveryGauges, outboxBacklogUpTo } from "../../webhooks/status.ts"
import { mirror, Registry, setOrClear } from "../../platform/metrics/registry.ts"
import type { ReadReplicasShape } from "../../platform/db/read-replicas.ts"
import { checkFence } from "../../platform/db/fence.ts"
import { query, type Sql } from "../../platform/db/Sql.ts"
import { RELEASE } from "../../platform/release.ts"

/** Seconds: from a fast loopback answer to the 10 s limit. */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

/** pg_replication_slots.wal_status, and "missing" when there is no slot at all. */
export const SLOT_WAL_STATUSES = ["reserved", "extended", "unreserved", "lost", "missing"] as const

export const makeServiceMetrics = (registry = new Registry()) => {
  const m = {
    registry,
    // capture (CaptureStats and capture_state)
    captureStreaming: registry.gauge(
      "srs_capture_streaming",
      "1 while capture streams changes from the replication slot, else 0"
    ),
    captureLeader: registry.gauge(
      "srs_capture_leader",
      "1 while this process holds capture's leader lock (one per database), else 0"
    ),
    captureRole: registry.gauge(
      "srs_capture_role",
      "This process's capture role: 1 for its role (leader; standby: waiting for the leader lock; off: SERVICE_ROLES has no capture), 0 for the others",
      ["role"]
    ),
    captureErrors: registry.counter(
      "srs_capture_errors_total",
      "Capture runs in this process that stopped on an error and were retried (the last error is in /readyz)"
    ),
    captureStalls: registry.counter(
      "srs_capture_stalls_total",
      "Stalls capture noticed in this process (nothing from the replication stream while WAL waited); each made it reconnect"
    ),
    captureStalled: registry.gauge(
      "srs_capture_stalled",
      "1 while capture is stalled: it noticed a stall and has applied nothing since (reconnecting did not help yet), else 0"
    ),
    captureLagBytes: registry.gauge(
      "srs_capture_lag_bytes",
      "WAL bytes between the server's position and capture's stored checkpoint"
    ),
    captureLagSeconds: registry.gauge(
      "srs_capture_lag_seconds",
      "Seconds since capture last applied a transaction, while WAL is waiting (0 when caught up; on an idle database up to the heartbeat interval, as the service's own writes wait for the next heartbeat)"
    ),
    captureSinceApplied: registry.gauge(
      "srs_capture_last_applied_age_seconds",
      "Seconds since capture last applied a transaction (or built the views), whether WAL waits or not"
    ),
    captureRetainedWal: registry.gauge("srs_capture_retained_wal_bytes", "WAL bytes the replication slot holds back"),
    captureSlotWalStatus: registry.gauge(
      "srs_capture_slot_wal_status",
      "The replication slot's wal_status: 1 for its status (reserved, extended, unreserved, lost; missing: no slot), 0 for the others",
      ["status"]
    ),
    captureSafeWal: registry.gauge(
      "srs_capture_slot_safe_wal_bytes",
      "WAL bytes that may still be written before the slot is lost (pg_replication_slots.safe_wal_size; absent when max_slot_wal_keep_size is unlimited)"
    ),
    captureWalKeepSize: registry.gauge(
      "srs_capture_slot_wal_keep_size_bytes",
      "The server's max_slot_wal_keep_size in bytes (absent when unlimited)"
    ),
    captureChanges: registry.counter("srs_capture_changes_total", "Row changes applied by capture in this process"),
    captureBatches: registry.counter(
      "srs_capture_batches_total",
      "Database transactions capture committed (views, outbox and checkpoint together)"
    ),
    captureEvents: registry.counter(
      "srs_capture_events_total",
      "Events written to the outbox by capture in this process, by kind",
      ["event"]
    ),
    captureQuarantined: registry.gauge(
      "srs_capture_quarantined",
      "Records capture holds in quarantine (their view not shaped, their events held); read from the database"
    ),
    captureContractBroken: registry.gauge(
      "srs_capture_contract_broken",
      "App tables whose columns no longer fit what capture reads (their records are held); read from the database"
    ),
    outboxBacklog: registry.gauge(
      "srs_outbox_backlog_events",
      "Outbox events not yet fanned out into deliveries (counted up to 100000)"
    ),
    // delivery (DeliveryEngine.stats, and the attempt observer)
    deliveries: registry.counter(
      "srs_deliveries_total",
      "Delivery attempts recorded by this process, by outcome (succeeded; retry_scheduled; failed: no attempt left)",
      ["outcome"]
    ),
    deliveriesCreated: registry.counter("srs_deliveries_created_total", "Deliveries made by fan-out in this process"),
    deliveriesHandedBack: registry.counter(
      "srs_deliveries_handed_back_total",
      "Leased deliveries handed back unattempted at shutdown"
    ),
    deliveriesInFlight: registry.gauge("srs_deliveries_in_flight", "Attempts being sent now"),
    deliveriesNotSent: registry.counter(
      "srs_deliveries_not_sent_total",
      "Attempts this process recorded as not sent: their destination's circuit was open (each a failed attempt that held no send slot)"
    ),
    circuitsOpened: registry.counter(
      "srs_webhook_circuits_opened_total",
      "Destinations whose circuit this process opened (after timeouts or refused connections in a row)"
    ),
    endpointsSwitchedOff: registry.counter(
      "srs_endpoints_switched_off_total",
      "Endpoints this process switched off after deliveries failed every attempt"
    ),
    subscriptionsGone: registry.counter(
      "srs_subscriptions_gone_total",
      "Subscriptions deleted because the receiver answered 410"
    ),
    attemptSeconds: registry.histogram(
      "srs_delivery_attempt_duration_seconds",
      "Time from sending a delivery to its answer (or failure)",
      ["result"],
      ATTEMPT_BUCKETS
    ),
    // the database, as every process sees it (the same figure in each: aggregate with max)
    oldestPendingDelivery: registry.gauge(
      "srs_deliveries_oldest_pending_seconds",
      "Age of the oldest pending delivery (created, not yet delivered nor given up), 0 when none; read from the database"
    ),
    endpointsOff: registry.gauge(
      "srs_endpoints_off",
      "Webhook endpoints switched off now (not enabled); read from the database"
    ),
    circuits: registry.gauge(
      "srs_webhook_circuits",
      "Endpoints and subscriptions whose circuit is open (deliveries not sent until a probe gets an answer) or half_open (the probe on its way); read from the database",
      ["state"]
    ),
    replaysRunning: registry.gauge(
      "srs_replays_running",
      "Replays being sent now (admin API, pages or CLI); read from the database"
    ),
    replayRemaining: registry.gauge(
      "srs_replay_remaining_deliveries",
      "Deliveries running replays have still to send, all replays together; read from the database"
    ),
    // HTTP
    httpRequests: registry.counter(
      "srs_http_requests_total",
      "HTTP requests answered, by method, route pattern and status",
      ["method", "route", "status"]
    ),
    httpSeconds: registry.histogram(
      "srs_http_request_duration_seconds",
      "Time to answer an HTTP request, by route pattern",
      ["method", "route"],
      REQUEST_BUCKETS
    ),
    // the read API's standbys (READ_DATABASE_URL)
    replicaLag: registry.gauge(
      "srs_read_replica_lag_seconds",
      "Seconds a read replica is behind the service's database, measured against a heartbeat written each second (0: caught up; absent while unknown: no answer, not a standby)",
      ["replica"]
    ),
    replicaUsable: registry.gauge(
      "srs_read_replica_usable",
      "1 while the read API reads from this replica, 0 while it is skipped (unreachable, not a standby, behind READ_MAX_LAG)",
      ["replica"]
    ),
    apiReads: registry.counter(
      "srs_api_reads_total",
      "Read API statements served by a read replica or by the primary",
      ["served_by"]
    ),
    replicaFallbacks: registry.counter(
      "srs_read_replica_fallbacks_total",
      "Reads sent to a replica that ran again on the primary: error (the replica failed), key (it did not yet know the key or its company as the primary does)",
      ["reason"]
    ),
    rateLimited: registry.counter(
      "srs_api_rate_limited_total",
      "API requests refused with 429 by the per-key rate limit"
    ),
    authLookupsRefused: registry.counter(
      "srs_api_auth_lookups_refused_total",
      "Requests with a credential the process did not know, refused (429) without a lookup because the process's budget of lookups (AUTH_LOOKUPS_PER_SECOND) was spent: a flood from many addresses"
    ),
    // GET /api/v1/stream's waiting requests (read/stream-wake.ts)
    streamWaiting: registry.gauge(
      "srs_stream_waiting",
      "Stream requests waiting in this process for changes: long-polls, and event streams open"
    ),
    streamWakeQueries: registry.counter(
      "srs_stream_wake_queries_total",
      "Statements run to find the waiting stream requests a capture commit wakes (at most one per commit notice, none while nothing changes)"
    ),
    // What the keys service holds before a credential is known (bounded LRUs: docs/design.md)
    apiCacheEntries: registry.gauge(
      "srs_api_cache_entries",
      "Entries in the keys service's bounded caches: keys (known keys), unknown_keys (credentials found to be none), clients (failed authentications per address), accepted (admin tokens and sessions accepted lately), trusted (addresses that presented a usable credential lately)",
      ["cache"]
    ),
    apiCacheBytes: registry.gauge(
      "srs_api_cache_bytes",
      "Estimated bytes held by each of the keys service's bounded caches",
      ["cache"]
    ),
    apiCacheEvictions: registry.counter(
      "srs_api_cache_evictions_total",
      "Entries pushed out of each of the keys service's caches by its bounds (a flood of credentials or addresses shows here)",
      ["cache"]
    ),
    // process (beside prom-client's standard process_* and nodejs_* metrics: heap totals,
    // external memory, RSS, the event loop)
    heapUsed: registry.gauge("nodejs_heap_used_bytes", "V8 heap in use, in bytes"),
    // the release (docs/deployment.md#upgrades)
    buildInfo: registry.gauge(
      "srs_build_info",
      "1, labelled with this process's release (package.json's version) and the schema generation its migrations reach",
      ["version", "generation"]
    ),
    schemaWritable: registry.gauge(
      "srs_schema_fence_writable",
      "1 while the database's schema fence takes writes from this process's release, 0 once it needs a newer one (this process then writes nothing); read from the database"
    ),
    schemaGeneration: registry.gauge(
      "srs_schema_generation",
      "The schema generation the database's migrations reached (the highest migration number); read from the database"
    )
  }
  m.buildInfo.set({ version: RELEASE.version, generation: String(RELEASE.generation) }, 1)
  registry.collect(() => m.heapUsed.set(process.memoryUsage().heapUsed))
  return m
}

export type ServiceMetrics = ReturnType<typeof makeServiceMetrics>

/** Records one delivery attempt's latency. */
export const attemptObserver = (m: ServiceMetrics) => (a: { readonly ok: boolean; readonly durationMs: number }) =>
  m.attemptSeconds.observe({ result: a.ok ? "success" : "failure" }, a.durationMs / 1000)

const CAPTURE_ROLES = ["leader", "standby", "off"] as const

const setCaptureRole = (m: ServiceMetrics, role: (typeof CAPTURE_ROLES)[number]) => {
  for (const r of CAPTURE_ROLES) m.captureRole.set({ role: r }, r === role ? 1 : 0)
  m.captureLeader.set(role === "leader" ? 1 : 0)
}

/** A process without the capture role (SERVICE_ROLES): its role reads off; capture's other series stay absent. */
export const captureOff = (m: ServiceMetrics) => setCaptureRole(m, "off")

/** Runs `read` at each scrape, on the database of the caller's context. Returns what unregisters it. */
const collectFrom = (m: ServiceMetrics, read: Effect.Effect<void, never, Sql>) =>
  Effect.map(Effect.context<Sql>(), (context) => m.registry.collect(() => Effect.runPromiseWith(context)(read)))

/** Copies capture's in-memory counters, and reads lag, the slot's WAL and a stall from the database. */
export const collectCapture = (m: ServiceMetrics, stats: CaptureStats, slot: string) =>
  collectFrom(
    m,
    Effect.gen(function* () {
      setCaptureRole(m, stats.role)
      mirror(m.captureErrors, undefined, stats.errors)
      mirror(m.captureStalls, undefined, stats.stalls)
      m.captureStreaming.set(stats.streaming ? 1 : 0)
      mirror(m.captureChanges, undefined, stats.changes)
      mirror(m.captureBatches, undefined, stats.batches)
      for (const [event, n] of stats.events) mirror(m.captureEvents, { event }, n)
      const s = yield* captureStatus(slot)
      if (s.lagBytes !== null) m.captureLagBytes.set(s.lagBytes)
      if (s.lagSeconds !== null) m.captureLagSeconds.set(s.lagSeconds)
      setOrClear(m.captureSinceApplied, s.sinceAppliedSeconds)
      setOrClear(m.captureRetainedWal, s.retainedWalBytes)
      const walStatus = s.slotExists ? (s.walStatus ?? "reserved") : "missing"
      for (const status of SLOT_WAL_STATUSES) m.captureSlotWalStatus.set({ status }, status === walStatus ? 1 : 0)
      setOrClear(m.captureSafeWal, s.slotExists ? s.safeWalBytes : null)
      setOrClear(m.captureWalKeepSize, s.walKeepSizeBytes)
      m.captureStalled.set(s.stalledAt === null ? 0 : 1)
      const q = yield* quarantineSummary()
      m.captureQuarantined.set(q.count)
      m.captureContractBroken.set(q.broken.length)
      m.outboxBacklog.set(yield* outboxBacklogUpTo(100_000))
    })
  )

/** Copies the sizes of the keys service's caches. */
export const collectKeys = (m: ServiceMetrics, stats: () => KeysStats) =>
  m.registry.collect(() => {
    const s = stats()
    for (const [cache, c] of [
      ["keys", s.keys],
      ["unknown_keys", s.unknown],
      ["clients", s.clients],
      ["accepted", s.accepted],
      ["trusted", s.trusted]
    ] as const) {
      m.apiCacheEntries.set({ cache }, c.entries)
      m.apiCacheBytes.set({ cache }, c.bytes)
      mirror(m.apiCacheEvictions, { cache }, c.evictions)
    }
    mirror(m.authLookupsRefused, undefined, s.lookupsRefused)
  })

/** Copies the stream's waiting requests and the statements their wakes cost. */
export const collectStream = (
  m: ServiceMetrics,
  counts: () => { readonly waiting: number; readonly wakeQueries: number }
) =>
  m.registry.collect(() => {
    const c = counts()
    m.streamWaiting.set(c.waiting)
    mirror(m.streamWakeQueries, undefined, c.wakeQueries)
  })

/** Copies the delivery engine's counters. */
export const collectDelivery = (m: ServiceMetrics, stats: () => Promise<EngineStats>) =>
  m.registry.collect(async () => {
    const s = await stats()
    mirror(m.deliveries, { outcome: "succeeded" }, s.succeeded)
    mirror(m.deliveries, { outcome: "retry_scheduled" }, s.retried)
    mirror(m.deliveries, { outcome: "failed" }, s.failed)
    mirror(m.deliveriesCreated, undefined, s.created)
    mirror(m.deliveriesHandedBack, undefined, s.handedBack)
    m.deliveriesInFlight.set(s.inFlight)
    mirror(m.deliveriesNotSent, undefined, s.notSent)
    mirror(m.circuitsOpened, undefined, s.circuitsOpened)
    mirror(m.endpointsSwitchedOff, undefined, s.switchedOff)
    mirror(m.subscriptionsGone, undefined, s.subscriptionsGone)
  })

/**
 * What every process reads from the database, whatever it runs: deliveries waiting (the
 * oldest pending one's age: the due index holds only pending rows), endpoints switched off,
 * replays running with what they have still to send, and the schema fence.
 */
export const collectDatabase = (m: ServiceMetrics) =>
  collectFrom(
    m,
    Effect.gen(function* () {
      const [delivery, replays, fence] = yield* Effect.all(
        [deliveryGauges, runningReplayTotals, query((sql) => checkFence(sql))],
        { concurrency: "unbounded" }
      )
      m.schemaWritable.set(fence.writable ? 1 : 0)
      setOrClear(m.schemaGeneration, fence.database?.generation ?? null)
      m.oldestPendingDelivery.set(delivery.oldestPendingSeconds)
      m.endpointsOff.set(delivery.endpointsOff)
      m.circuits.set({ state: "open" }, delivery.circuits.open)
      m.circuits.set({ state: "half_open" }, delivery.circuits.halfOpen)
      m.replaysRunning.set(replays.running)
      m.replayRemaining.set(replays.remaining)
    })
  )

/** The read replicas' lag and use, as this process measured them (ReadReplicas). */
export const collectReplicas = (m: ServiceMetrics, replicas: ReadReplicasShape) =>
  m.registry.collect(() => {
    for (const r of replicas.report()) {
      setOrClear(m.replicaLag, r.lagSeconds, { replica: r.replica })
      m.replicaUsable.set({ replica: r.replica }, r.usable ? 1 : 0)
    }
    const c = replicas.counts
    mirror(m.apiReads, { served_by: "replica" }, c.replica)
    mirror(m.apiReads, { served_by: "primary" }, c.primary)
    mirror(m.replicaFallbacks, { reason: "error" }, c.fallbackError)
    mirror(m.replicaFallbacks, { reason: "key" }, c.fallbackKey)
  })

export class Metrics extends Context.Service<Metrics, ServiceMetrics>()("service/Metrics") {}

/** The registry, and the engine's attempt observer feeding it. Build below delivery. */
export const MetricsLive = Layer.unwrap(
  Effect.sync(() => {
    const m = makeServiceMetrics()
    return Layer.mergeAll(Layer.succeed(Metrics, m), Layer.succeed(AttemptObserver, attemptObserver(m)))
  })
)
