// The service's metrics: one registry per process, its families, and the collectors that
// copy capture's and the delivery engine's own counters in at scrape time. Metrics is a
// Layer with no dependencies, built first (it also provides the delivery engine's attempt
// observer); the /metrics route registers the collectors once capture and delivery exist.
import { Context, Effect, Layer } from "effect"
import type { Sql } from "postgres"
import type { CaptureStats } from "../capture/run.ts"
import { captureStatus } from "../capture/status.ts"
import { AttemptObserver, type EngineStats } from "../delivery/engine.ts"
import { Registry } from "./registry.ts"

/** Seconds: from a fast loopback answer to the 10 s limit. */
const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

export const makeServiceMetrics = (registry = new Registry()) => {
  const m = {
    registry,
    // capture (CaptureStats and capture_state)
    captureStreaming: registry.gauge("srs_capture_streaming", "1 while capture streams changes from the replication slot, else 0"),
    captureLagBytes: registry.gauge("srs_capture_lag_bytes", "WAL bytes between the server's position and capture's stored checkpoint"),
    captureLagSeconds: registry.gauge("srs_capture_lag_seconds", "Seconds since capture last applied a transaction, while WAL is waiting (0 when caught up; on an idle database up to the heartbeat interval, as the service's own writes wait for the next heartbeat)"),
    captureRetainedWal: registry.gauge("srs_capture_retained_wal_bytes", "WAL bytes the replication slot holds back"),
    captureChanges: registry.counter("srs_capture_changes_total", "Row changes applied by capture in this process"),
    captureBatches: registry.counter("srs_capture_batches_total", "Database transactions capture committed (views, outbox and checkpoint together)"),
    captureEvents: registry.counter("srs_capture_events_total", "Events written to the outbox by capture in this process, by kind", ["event"]),
    outboxBacklog: registry.gauge("srs_outbox_backlog_events", "Outbox events not yet fanned out into deliveries (counted up to 100000)"),
    // delivery (DeliveryEngine.stats, and the attempt observer)
    deliveries: registry.counter("srs_deliveries_total", "Delivery attempts recorded by this process, by outcome (succeeded; retry_scheduled; failed: no attempt left)", ["outcome"]),
    deliveriesCreated: registry.counter("srs_deliveries_created_total", "Deliveries made by fan-out in this process"),
    deliveriesHandedBack: registry.counter("srs_deliveries_handed_back_total", "Leased deliveries handed back unattempted at shutdown"),
    deliveriesInFlight: registry.gauge("srs_deliveries_in_flight", "Attempts being sent now"),
    endpointsSwitchedOff: registry.counter("srs_endpoints_switched_off_total", "Endpoints this process switched off after deliveries failed every attempt"),
    subscriptionsGone: registry.counter("srs_subscriptions_gone_total", "Subscriptions deleted because the receiver answered 410"),
    attemptSeconds: registry.histogram("srs_delivery_attempt_duration_seconds", "Time from sending a delivery to its answer (or failure)", ["result"], ATTEMPT_BUCKETS),
    // HTTP
    httpRequests: registry.counter("srs_http_requests_total", "HTTP requests answered, by method, route pattern and status", ["method", "route", "status"]),
    httpSeconds: registry.histogram("srs_http_request_duration_seconds", "Time to answer an HTTP request, by route pattern", ["method", "route"], REQUEST_BUCKETS),
    rateLimited: registry.counter("srs_api_rate_limited_total", "API requests refused with 429 by the per-key rate limit"),
    // process
    residentMemory: registry.gauge("process_resident_memory_bytes", "Resident memory size in bytes"),
    heapUsed: registry.gauge("nodejs_heap_used_bytes", "V8 heap in use, in bytes"),
    heapTotal: registry.gauge("nodejs_heap_total_bytes", "V8 heap reserved, in bytes"),
    externalMemory: registry.gauge("nodejs_external_memory_bytes", "Memory held outside the V8 heap by its objects (Buffers, ArrayBuffers), in bytes"),
    startTime: registry.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds")
  }
  m.startTime.set(undefined, Math.round(Date.now() / 1000 - process.uptime()))
  registry.collect(() => {
    const mem = process.memoryUsage()
    m.residentMemory.set(undefined, mem.rss)
    m.heapUsed.set(undefined, mem.heapUsed)
    m.heapTotal.set(undefined, mem.heapTotal)
    m.externalMemory.set(undefined, mem.external)
  })
  return m
}

export type ServiceMetrics = ReturnType<typeof makeServiceMetrics>

/** Records one delivery attempt's latency. */
export const attemptObserver = (m: ServiceMetrics) => (a: { readonly ok: boolean; readonly durationMs: number }) =>
  m.attemptSeconds.observe({ result: a.ok ? "success" : "failure" }, a.durationMs / 1000)

/** Copies capture's in-memory counters, and reads lag and retained WAL from the database. */
export const collectCapture = (m: ServiceMetrics, stats: CaptureStats, sql: Sql, slot: string) =>
  m.registry.collect(async () => {
    m.captureStreaming.set(undefined, stats.streaming ? 1 : 0)
    m.captureChanges.set(undefined, stats.changes)
    m.captureBatches.set(undefined, stats.batches)
    for (const [event, n] of stats.events) m.captureEvents.set({ event }, n)
    const s = await captureStatus(sql, slot)
    if (s.lagBytes !== null) m.captureLagBytes.set(undefined, s.lagBytes)
    if (s.lagSeconds !== null) m.captureLagSeconds.set(undefined, s.lagSeconds)
    if (s.retainedWalBytes !== null) m.captureRetainedWal.set(undefined, s.retainedWalBytes)
    const [b] = await sql<{ n: number }[]>`
      select count(*)::int as n from (
        select 1 from service.events e, service.webhook_fanout f
        where (e.commit_lsn, e.seq) > (f.commit_lsn, f.seq) limit 100000) x`
    m.outboxBacklog.set(undefined, b!.n)
  })

/** Copies the delivery engine's counters. */
export const collectDelivery = (m: ServiceMetrics, stats: () => Promise<EngineStats>) =>
  m.registry.collect(async () => {
    const s = await stats()
    m.deliveries.set({ outcome: "succeeded" }, s.succeeded)
    m.deliveries.set({ outcome: "retry_scheduled" }, s.retried)
    m.deliveries.set({ outcome: "failed" }, s.failed)
    m.deliveriesCreated.set(undefined, s.created)
    m.deliveriesHandedBack.set(undefined, s.handedBack)
    m.deliveriesInFlight.set(undefined, s.inFlight)
    m.endpointsSwitchedOff.set(undefined, s.switchedOff)
    m.subscriptionsGone.set(undefined, s.subscriptionsGone)
  })

export class Metrics extends Context.Service<Metrics, ServiceMetrics>()("service/Metrics") {}

/** The registry, and the engine's attempt observer feeding it. Build below delivery. */
export const MetricsLive = Layer.unwrap(
  Effect.sync(() => {
    const m = makeServiceMetrics()
    return Layer.mergeAll(Layer.succeed(Metrics, m), Layer.succeed(AttemptObserver, attemptObserver(m)))
  })
)
