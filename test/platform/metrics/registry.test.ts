// The registry (prom-client's): the service's families and their labels, the standard
// process and event-loop metrics, series absent until set, mirrored counters, collectors;
// then request labels, request ids and the operators' progress bar.
import { describe, expect, it } from "vitest"
import { makeServiceMetrics } from "../../../src/faces/ops/metrics.ts"
import { mirror, Registry, setOrClear, seriesValue } from "../../../src/platform/metrics/registry.ts"
import { requestIdOf } from "../../../src/faces/http/requests.ts"
import { routeTable } from "../../../src/faces/http/routes.ts"
import { progressBar, renderBar } from "../../../src/faces/cli/progress.ts"
import { sample } from "../../support/observed.ts"

/** Every family the service exports, with its type and labels: dashboards and alerts depend on them. */
const FAMILIES: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
  ["srs_capture_streaming", "gauge", []],
  ["srs_capture_leader", "gauge", []],
  ["srs_capture_role", "gauge", ["role"]],
  ["srs_capture_errors_total", "counter", []],
  ["srs_capture_stalls_total", "counter", []],
  ["srs_capture_stalled", "gauge", []],
  ["srs_capture_lag_bytes", "gauge", []],
  ["srs_capture_lag_seconds", "gauge", []],
  ["srs_capture_last_applied_age_seconds", "gauge", []],
  ["srs_capture_retained_wal_bytes", "gauge", []],
  ["srs_capture_slot_wal_status", "gauge", ["status"]],
  ["srs_capture_slot_safe_wal_bytes", "gauge", []],
  ["srs_capture_slot_wal_keep_size_bytes", "gauge", []],
  ["srs_capture_changes_total", "counter", []],
  ["srs_capture_batches_total", "counter", []],
  ["srs_capture_events_total", "counter", ["event"]],
  ["srs_capture_quarantined", "gauge", []],
  ["srs_capture_contract_broken", "gauge", []],
  ["srs_outbox_backlog_events", "gauge", []],
  ["srs_deliveries_total", "counter", ["outcome"]],
  ["srs_deliveries_created_total", "counter", []],
  ["srs_deliveries_handed_back_total", "counter", []],
  ["srs_deliveries_in_flight", "gauge", []],
  ["srs_deliveries_not_sent_total", "counter", []],
  ["srs_webhook_circuits_opened_total", "counter", []],
  ["srs_endpoints_switched_off_total", "counter", []],
  ["srs_subscriptions_gone_total", "counter", []],
  ["srs_delivery_attempt_duration_seconds", "histogram", ["result"]],
  ["srs_deliveries_oldest_pending_seconds", "gauge", []],
  ["srs_endpoints_off", "gauge", []],
  ["srs_webhook_circuits", "gauge", ["state"]],
  ["srs_replays_running", "gauge", []],
  ["srs_replay_remaining_deliveries", "gauge", []],
  ["srs_http_requests_total", "counter", ["method", "route", "status"]],
  ["srs_http_request_duration_seconds", "histogram", ["method", "route"]],
  ["srs_api_rate_limited_total", "counter", []],
  ["srs_api_cache_entries", "gauge", ["cache"]],
  ["srs_api_cache_bytes", "gauge", ["cache"]],
  ["srs_api_cache_evictions_total", "counter", ["cache"]],
  ["srs_api_auth_lookups_refused_total", "counter", []],
  ["srs_stream_waiting", "gauge", []],
  ["srs_stream_wake_queries_total", "counter", []],
  ["srs_read_replica_lag_seconds", "gauge", ["replica"]],
  ["srs_read_replica_usable", "gauge", ["replica"]],
  ["srs_api_reads_total", "counter", ["served_by"]],
  ["srs_read_replica_fallbacks_total", "counter", ["reason"]],
  ["srs_build_info", "gauge", ["version", "generation"]],
  ["srs_schema_fence_writable", "gauge", []],
  ["srs_schema_generation", "gauge", []],
  ["nodejs_heap_used_bytes", "gauge", []]
]

describe("registry (prom-client)", () => {
  it("has every family of the service, by name, type and labels, and no other srs_ family", async () => {
    const m = makeServiceMetrics()
    const text = await m.registry.render()
    for (const [name, type, labels] of FAMILIES) {
      expect(text, name).toContain(`# TYPE ${name} ${type}\n`)
      const metric = m.registry.prom.getSingleMetric(name) as unknown as
        | { readonly labelNames: ReadonlyArray<string> }
        | undefined
      expect(metric?.labelNames ?? null, name).toEqual(labels)
    }
    const srs = [...text.matchAll(/^# TYPE (srs_\w+) /gm)].map((x) => x[1])
    expect(srs.sort()).toEqual(
      FAMILIES.map(([n]) => n)
        .filter((n) => n.startsWith("srs_"))
        .sort()
    )
  })

  it("carries the standard process and event-loop metrics, and the old process names", async () => {
    const text = await makeServiceMetrics().registry.scrape()
    for (const name of [
      "process_resident_memory_bytes",
      "process_start_time_seconds",
      "process_cpu_seconds_total",
      "process_open_fds",
      "nodejs_eventloop_lag_seconds",
      "nodejs_eventloop_lag_p99_seconds",
      "nodejs_heap_size_used_bytes",
      "nodejs_gc_duration_seconds",
      "nodejs_heap_used_bytes"
    ]) {
      expect(text, name).toMatch(new RegExp(`^# TYPE ${name} `, "m"))
    }
    expect(sample(text, "process_start_time_seconds")).toBeGreaterThan(Date.now() / 1000 - 3600)
    expect(sample(text, "nodejs_heap_used_bytes")).toBeGreaterThan(0)
  })

  it("series without labels are absent until set; counters mirror counts kept elsewhere; unknown values clear a gauge", async () => {
    const r = new Registry()
    const c = r.counter("srs_things_total", "Things")
    const by = r.counter("srs_kinds_total", "Kinds", ["kind"])
    const g = r.gauge("srs_level", "A level")
    expect(sample(await r.render(), "srs_things_total")).toBeUndefined()
    expect(sample(await r.render(), "srs_level")).toBeUndefined()
    mirror(c, undefined, 5)
    mirror(c, undefined, 7)
    mirror(by, { kind: 'a "quoted" \\ value' }, 2)
    mirror(by, { kind: "b" }, 0)
    c.inc()
    setOrClear(g, 1.5)
    const text = await r.render()
    expect(sample(text, "srs_things_total")).toBe(8)
    expect(text).toContain('srs_kinds_total{kind="a \\"quoted\\" \\\\ value"} 2')
    expect(sample(text, "srs_kinds_total", { kind: "b" })).toBe(0)
    expect(await seriesValue(c)).toBe(8)
    expect(await seriesValue(by, { kind: "b" })).toBe(0)
    expect(sample(text, "srs_level")).toBe(1.5)
    setOrClear(g, null)
    expect(sample(await r.render(), "srs_level")).toBeUndefined()
    expect(await seriesValue(g)).toBeUndefined()
  })

  it("renders histograms with cumulative buckets, +Inf, sum and count", async () => {
    const r = new Registry()
    const h = r.histogram("srs_seconds", "Durations", ["result"], [0.1, 0.5, 1])
    for (const v of [0.0625, 0.5, 0.25, 2, 0.75]) h.observe({ result: "ok" }, v)
    const lines = (await r.render()).split("\n").filter((l) => l.startsWith("srs_seconds"))
    expect(lines).toEqual([
      'srs_seconds_bucket{le="0.1",result="ok"} 1',
      'srs_seconds_bucket{le="0.5",result="ok"} 3',
      'srs_seconds_bucket{le="1",result="ok"} 4',
      'srs_seconds_bucket{le="+Inf",result="ok"} 5',
      'srs_seconds_sum{result="ok"} 3.5625',
      'srs_seconds_count{result="ok"} 5'
    ])
  })

  it("runs collectors before a scrape; one that fails or hangs does not stop it", async () => {
    const r = new Registry({ collectTimeoutMs: 200 })
    const g = r.gauge("srs_collected", "x")
    let n = 0
    r.collect(() => g.set(++n))
    r.collect(async () => {
      throw new Error("database down")
    })
    const remove = r.collect(() => new Promise<void>(() => {}))
    const t0 = Date.now()
    expect(sample(await r.scrape(), "srs_collected")).toBe(1)
    expect(Date.now() - t0).toBeLessThan(2_000)
    remove()
    expect(sample(await r.scrape(), "srs_collected")).toBe(2)
  })
})

describe("request labels", () => {
  const { routeOf: route } = routeTable([
    { method: "GET", path: "/api/v1/incidents" },
    { method: "GET", path: "/api/v1/incidents/:id" },
    { method: "GET", path: "/api/v1/hooks/:id" },
    { method: "POST", path: "/api/v1/hooks" },
    { method: "GET", path: "/metrics" }
  ])

  it("labels a request by its route pattern, never by ids or unknown paths", () => {
    expect(route("GET", "/api/v1/incidents?limit=5")).toBe("/api/v1/incidents")
    expect(route("GET", "/api/v1/incidents/7b0c2f59-1a60-4a0e-9d6c-3b1f3c1f2b10")).toBe("/api/v1/incidents/:id")
    expect(route("HEAD", "/metrics")).toBe("/metrics")
    expect(route("DELETE", "/api/v1/incidents")).toBe("/api/v1/incidents")
    expect(route("GET", "/api/v1/secret-path-mk_abc")).toBe("unmatched")
    expect(route("GET", "/wp-login.php")).toBe("unmatched")
  })

  it("matches as the router does: literal patterns first, one trailing slash, exact case", () => {
    const { routeOf: r } = routeTable([
      { method: "GET", path: "/api/v1/:resource" },
      { method: "GET", path: "/api/v1/hooks" },
      { method: "GET", path: "/api/v1/:resource/:id" },
      { method: "POST", path: "/api/v1/hooks" },
      { method: "DELETE", path: "/api/v1/hooks/:id" }
    ])
    expect(r("GET", "/api/v1/hooks")).toBe("/api/v1/hooks")
    expect(r("GET", "/api/v1/incidents")).toBe("/api/v1/:resource")
    expect(r("GET", "/api/v1/incidents/")).toBe("/api/v1/:resource")
    expect(r("GET", "/api/v1/hooks/abc#x")).toBe("/api/v1/:resource/:id")
    expect(r("DELETE", "/api/v1/hooks/abc")).toBe("/api/v1/hooks/:id")
    expect(r("POST", "/api/v1/hooks?x=1")).toBe("/api/v1/hooks")
    // A known path with another method: the route its first method takes there.
    expect(r("PUT", "/api/v1/hooks")).toBe("/api/v1/hooks")
    expect(r("PUT", "/api/v1/incidents")).toBe("/api/v1/:resource")
    // The router serves an empty segment to a parameter (then the handler refuses it): so is it labelled.
    expect(r("GET", "/api/v1//abc")).toBe("/api/v1/:resource/:id")
    expect(r("GET", "/API/v1/hooks")).toBe("unmatched")
    expect(r("GET", "/api/v1/%zz")).toBe("unmatched")
    expect(r("GET", "/api/v1/a/b/c")).toBe("unmatched")
    expect(r("GET", "api/v1/hooks")).toBe("unmatched")
    expect(r("GET", "/")).toBe("unmatched")
  })

  it("keeps a caller's plain request id and replaces anything else", () => {
    expect(requestIdOf("abc-123_DEF.45678")).toBe("abc-123_DEF.45678")
    expect(requestIdOf('x"\n{"level":"error"}')).toMatch(/^[0-9a-f-]{36}$/)
    expect(requestIdOf(undefined)).toMatch(/^[0-9a-f-]{36}$/)
  })

  it("draws a progress bar on a terminal only, and clears it at the end", () => {
    const written: string[] = []
    const tty = { isTTY: true, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream
    const bar = progressBar("replaying", tty)
    bar.update(0, 10)
    bar.update(10, 10)
    bar.done()
    expect(written).toEqual([
      `\r\x1b[2K${renderBar("replaying", 0, 10)}`,
      `\r\x1b[2K${renderBar("replaying", 10, 10)}`,
      "\r\x1b[2K"
    ])
    const pipe = { isTTY: false, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream
    const quiet = progressBar("replaying", pipe)
    quiet.update(1, 2)
    quiet.done()
    expect(written).toHaveLength(3)
  })

  it("draws a progress bar", () => {
    expect(renderBar("replaying", 25, 100)).toBe("replaying [########----------------------]  25% 25/100")
    expect(renderBar("x", 0, 0)).toBe("x [------------------------------]   0% 0/0")
  })
})
