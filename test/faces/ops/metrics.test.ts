// /metrics moves as work happens: capture's changes and events, deliveries by outcome and
// their latency, API requests by route and status, rate-limited requests; every API answer
// carries a request id that the logs carry too, and no log line carries a key.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { makeServiceMetrics, type ServiceMetrics } from "../../../src/faces/ops/metrics.ts"
import { seriesValue } from "../../../src/platform/metrics/registry.ts"
import { insertIncident } from "../../support/app.ts"
import { addEndpoint, startWorld, waitFor, type World } from "../../support/world.ts"
import {
  apiKey,
  captureStdout,
  sample,
  startObservedEngine,
  startObservedServer,
  type ObservedServer
} from "../../support/observed.ts"
import type { RunningEngine } from "../../support/world.ts"

let w: World
let metrics: ServiceMetrics
let engine: RunningEngine
let server: ObservedServer

const scrape = async () => {
  const r = await fetch(`${server.opsUrl}/metrics`)
  expect(r.status).toBe(200)
  expect(r.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8")
  return r.text()
}

beforeAll(async () => {
  w = await startWorld()
  // Debug: the per-request log line is on, so the test sees what a request logs.
  process.env.LOG_LEVEL = "Debug"
  metrics = makeServiceMetrics()
  engine = await startObservedEngine(w.deps, metrics)
  server = await startObservedServer({
    sql: w.db.sql,
    url: w.db.url,
    deps: w.deps,
    metrics,
    capture: { stats: w.cap.stats, slot: `slot_${w.db.name}` },
    engine,
    settings: { rateLimit: 3, rateWindowSeconds: 60 }
  })
})
afterAll(async () => {
  await server?.close()
  await engine?.stop()
  await w?.close()
})

describe("metrics", () => {
  it("capture, delivery and latency figures move as events are captured and delivered", async () => {
    await waitFor(() => w.cap.stats.streaming, "capture to stream")
    const before = await scrape()
    expect(before).toContain("# TYPE srs_delivery_attempt_duration_seconds histogram")
    expect(sample(before, "srs_capture_streaming")).toBe(1)
    expect(sample(before, "srs_capture_lag_bytes")).toBeGreaterThanOrEqual(0)
    expect(sample(before, "srs_capture_retained_wal_bytes")).toBeGreaterThanOrEqual(0)
    // The process's memory as bench:soak samples it: resident, V8 heap used of its total, external.
    expect(sample(before, "process_resident_memory_bytes")).toBeGreaterThan(0)
    expect(sample(before, "nodejs_heap_used_bytes")).toBeGreaterThan(0)
    expect(sample(before, "nodejs_heap_used_bytes")).toBeLessThanOrEqual(
      sample(before, "nodejs_heap_size_total_bytes")!
    )
    expect(sample(before, "nodejs_external_memory_bytes")).toBeGreaterThan(0)
    const changes0 = sample(before, "srs_capture_changes_total") ?? 0
    const events0 = sample(before, "srs_capture_events_total", { event: "incident.created" }) ?? 0

    w.receiver.reply("/ok", { status: 200 })
    w.receiver.reply("/flaky", { status: 500 })
    await addEndpoint(w, "/ok", { name: "OK" })
    await addEndpoint(w, "/flaky", { name: "Flaky" })
    for (let i = 0; i < 3; i++) await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    // 3 successes at /ok; 3 deliveries of 3 attempts each failing at /flaky
    await waitFor(
      async () =>
        (await w.db.sql`select 1 from service.webhook_deliveries where state in ('succeeded', 'failed')`).count === 6,
      "deliveries to finish"
    )
    const after = await waitFor(async () => {
      const t = await scrape()
      return sample(t, "srs_deliveries_total", { outcome: "failed" }) === 3 ? t : undefined
    }, "metrics to show the failures")
    expect(sample(after, "srs_capture_changes_total")! - changes0).toBeGreaterThanOrEqual(3)
    expect(sample(after, "srs_capture_events_total", { event: "incident.created" })! - events0).toBe(3)
    expect(sample(after, "srs_deliveries_total", { outcome: "succeeded" })).toBe(3)
    expect(sample(after, "srs_deliveries_total", { outcome: "retry_scheduled" })).toBe(6)
    expect(sample(after, "srs_deliveries_created_total")).toBe(6)
    // the flaky receiver answers (500): no circuit opens, nothing goes unsent
    expect(sample(after, "srs_deliveries_not_sent_total")).toBe(0)
    expect(sample(after, "srs_webhook_circuits_opened_total")).toBe(0)
    expect(sample(after, "srs_outbox_backlog_events")).toBe(0)
    expect(sample(after, "srs_delivery_attempt_duration_seconds_count", { result: "success" })).toBe(3)
    expect(sample(after, "srs_delivery_attempt_duration_seconds_count", { result: "failure" })).toBe(9)
    expect(sample(after, "srs_delivery_attempt_duration_seconds_bucket", { le: "+Inf", result: "success" })).toBe(3)
    expect(sample(after, "srs_delivery_attempt_duration_seconds_sum", { result: "success" })).toBeGreaterThan(0)
    // requests to the public port are counted by route (scrapes go to the operations port)
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(
      sample(await scrape(), "srs_http_requests_total", { method: "GET", route: "/healthz", status: "200" })
    ).toBeGreaterThanOrEqual(1)
  })

  it("API requests by route and status, rate-limited requests, a request id on answers and logs, never a key in a log", async () => {
    const { id: keyId, key } = await apiKey(w.db.sql, w.company.id, ["incidents"])
    const id = await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    const logs = captureStdout()
    const answers: Response[] = []
    try {
      for (let i = 0; i < 4; i++) {
        answers.push(
          await fetch(`${server.url}/api/v1/incidents/${id}`, { headers: { authorization: `Bearer ${key}` } })
        )
      }
      answers.push(await fetch(`${server.url}/api/v1/incidents`, { headers: { "x-request-id": "trace-0123456789" } }))
      answers.push(await fetch(`${server.url}/api/v1/no-such-thing?key=${key}`))
    } finally {
      logs.stop()
    }
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 429, 401, 404])
    const ids = answers.map((a) => a.headers.get("x-request-id"))
    expect(new Set(ids).size).toBe(ids.length)
    for (const rid of ids) expect(rid).toMatch(/^[0-9a-f-]{36}$|^trace-0123456789$/)
    expect(ids[4]).toBe("trace-0123456789")

    const text = await scrape()
    expect(
      sample(text, "srs_http_requests_total", { method: "GET", route: "/api/v1/incidents/:id", status: "200" })
    ).toBe(3)
    expect(
      sample(text, "srs_http_requests_total", { method: "GET", route: "/api/v1/incidents/:id", status: "429" })
    ).toBe(1)
    expect(sample(text, "srs_http_requests_total", { method: "GET", route: "/api/v1/incidents", status: "401" })).toBe(
      1
    )
    expect(sample(text, "srs_http_requests_total", { method: "GET", route: "unmatched", status: "404" })).toBe(1)
    expect(sample(text, "srs_api_rate_limited_total")).toBe(1)
    expect(
      sample(text, "srs_http_request_duration_seconds_count", { method: "GET", route: "/api/v1/incidents/:id" })
    ).toBe(4)
    // one log line per request, with its request id, route and status (never the path's query),
    // and the key that made it by id (none when the request had no usable key)
    const lines = logs.lines().filter((l) => l.message === "request")
    expect(lines.map((l) => l.requestId)).toEqual(ids)
    expect(lines.map((l) => l.keyId)).toEqual([keyId, keyId, keyId, keyId, null, null])
    expect(lines.map((l) => [l.level, l.route, l.status])).toEqual([
      ["debug", "/api/v1/incidents/:id", 200],
      ["debug", "/api/v1/incidents/:id", 200],
      ["debug", "/api/v1/incidents/:id", 200],
      ["debug", "/api/v1/incidents/:id", 429],
      ["debug", "/api/v1/incidents", 401],
      ["debug", "unmatched", 404]
    ])
    // nothing in the logs carries the key, whatever the level
    expect(logs.text()).not.toContain(key)
    expect(logs.text()).not.toContain(key.slice(3))
  })
})

describe("what every process reads from the database", () => {
  it("the oldest pending delivery's age, the endpoints switched off now, the circuits open", async () => {
    // what the tests above sent has finished (the flaky receiver's retries come 100 ms apart)
    const before = await waitFor(async () => {
      const t = await scrape()
      return sample(t, "srs_deliveries_oldest_pending_seconds") === 0 ? t : undefined
    }, "no delivery to be pending")
    expect(sample(before, "srs_endpoints_off")).toBe(0)
    expect(sample(before, "srs_webhook_circuits", { state: "open" })).toBe(0)
    expect(sample(before, "srs_webhook_circuits", { state: "half_open" })).toBe(0)
    // a delivery made 20 minutes ago still waits for a retry in an hour; an endpoint is switched off
    const [d] = await w.db.sql<
      { id: string; endpoint_id: string }[]
    >`select id::text, endpoint_id::text from service.webhook_deliveries where endpoint_id is not null limit 1`
    await w.db
      .sql`update service.webhook_deliveries set state = 'pending', finished_at = null, next_attempt_at = now() + interval '1 hour', created_at = now() - interval '20 minutes' where id = ${d!.id}`
    await w.db
      .sql`update service.webhook_endpoints set enabled = false, disabled_at = now(), disabled_reason = 'test' where id = ${d!.endpoint_id}`
    const after = await scrape()
    expect(sample(after, "srs_deliveries_oldest_pending_seconds")).toBeGreaterThanOrEqual(20 * 60)
    expect(sample(after, "srs_deliveries_oldest_pending_seconds")).toBeLessThan(21 * 60)
    expect(sample(after, "srs_endpoints_off")).toBe(1)
    // an endpoint's circuit open, another's half open
    await w.db.sql`
      insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at)
      select id, company_id, case when row_number() over (order by id) = 1 then 'open' else 'half_open' end, 5, now(), now()
      from service.webhook_endpoints limit 2`
    const circuits = await scrape()
    const n = (await w.db.sql`select 1 from service.webhook_circuits`).length
    expect(sample(circuits, "srs_webhook_circuits", { state: "open" })).toBe(1)
    expect(sample(circuits, "srs_webhook_circuits", { state: "half_open" })).toBe(n - 1)
    await w.db.sql`delete from service.webhook_circuits`
    await w.db
      .sql`update service.webhook_deliveries set state = 'failed', finished_at = now(), next_attempt_at = null where id = ${d!.id}`
    await w.db
      .sql`update service.webhook_endpoints set enabled = true, disabled_at = null, disabled_reason = null where id = ${d!.endpoint_id}`
  })
})

describe("the request log line's level", () => {
  it("is REQUEST_LOG_LEVEL's (so it shows at LOG_LEVEL=info); none writes no line", async () => {
    const { ConfigProvider, Effect, Layer } = await import("effect")
    const { HttpRouter, HttpServerResponse } = await import("effect/http")
    const { LoggingLive } = await import("../../../src/platform/logging.ts")
    const { Metrics } = await import("../../../src/faces/ops/metrics.ts")
    const { requestObservability } = await import("../../../src/faces/http/requests.ts")
    const run = async (requestLevel: string) => {
      const env = ConfigProvider.layer(
        ConfigProvider.fromEnv({ env: { LOG_LEVEL: "info", REQUEST_LOG_LEVEL: requestLevel } })
      )
      const App = Layer.mergeAll(
        HttpRouter.add("GET", "/work", Effect.succeed(HttpServerResponse.text("done"))),
        requestObservability([{ method: "GET", path: "/work" }])
      ).pipe(Layer.provide(Layer.succeed(Metrics, makeServiceMetrics())), Layer.merge(LoggingLive), Layer.provide(env))
      const { handler, dispose } = HttpRouter.toWebHandler(App, { disableLogger: true })
      const logs = captureStdout()
      try {
        await handler(new Request("http://localhost/work"))
      } finally {
        logs.stop()
        await dispose()
      }
      return logs.lines().filter((l) => l.message === "request")
    }
    expect((await run("info")).map((l) => l.level)).toEqual(["info"])
    expect((await run("warn")).map((l) => [l.level, l.route, l.status])).toEqual([["warn", "/work", 200]])
    expect(await run("debug")).toEqual([])
    expect(await run("none")).toEqual([])
  })
})

describe("request id", () => {
  it("annotates every log line written while a request is served, also when it fails", async () => {
    const { Effect, Layer } = await import("effect")
    const { HttpRouter, HttpServerResponse } = await import("effect/http")
    const { LoggingLive } = await import("../../../src/platform/logging.ts")
    const { Metrics } = await import("../../../src/faces/ops/metrics.ts")
    const { requestObservability } = await import("../../../src/faces/http/requests.ts")
    const m = makeServiceMetrics()
    const App = Layer.mergeAll(
      HttpRouter.add(
        "GET",
        "/work",
        Effect.logWarning("working on it").pipe(Effect.as(HttpServerResponse.text("done")))
      ),
      HttpRouter.add(
        "GET",
        "/boom",
        Effect.logError("about to fail").pipe(Effect.andThen(Effect.die(new Error("boom"))))
      ),
      requestObservability([
        { method: "GET", path: "/work" },
        { method: "GET", path: "/boom" }
      ])
    ).pipe(Layer.provide(Layer.succeed(Metrics, m)), Layer.merge(LoggingLive))
    const { handler, dispose } = HttpRouter.toWebHandler(App, { disableLogger: true })
    const logs = captureStdout()
    let ok: Response, failed: Response
    try {
      ok = await handler(new Request("http://localhost/work"))
      failed = await handler(new Request("http://localhost/boom"))
    } finally {
      logs.stop()
      await dispose()
    }
    expect(await ok.text()).toBe("done")
    expect(failed.status).toBe(500)
    const rid = ok.headers.get("x-request-id")!
    const line = logs.lines().find((l) => l.message === "working on it")!
    expect(line).toMatchObject({ level: "warn", requestId: rid })
    expect(logs.lines().find((l) => l.message === "about to fail")!.requestId).toMatch(/^[0-9a-f-]{36}$/)
    expect(await seriesValue(m.httpRequests, { method: "GET", route: "/boom", status: "500" })).toBe(1)
    expect(await seriesValue(m.httpRequests, { method: "GET", route: "/work", status: "200" })).toBe(1)
  })
})
