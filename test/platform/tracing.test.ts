// Traces (docs/operations.md#traces): with OTEL_EXPORTER_OTLP_ENDPOINT set, the real service (node src/main.ts)
// sends its spans over OTLP to a stub collector: one per API request, named by its route and
// carrying its request id and the key's id (never the key), one per capture batch carrying the
// ids of the events it wrote, one per fan-out round of the delivery engine carrying its event
// and delivery ids, and one per delivery attempt: a first attempt under its round's span, a
// retry on its own, each with its delivery and event ids, attempt number and outcome. The
// hooks alone make the same spans. Without the variable there is no tracer at all.
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { ConfigProvider, Effect, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  annotateFanout,
  spanRunner,
  TracingEnabled,
  TracingLive,
  withDeliverySpan,
  withFanoutSpan
} from "../../src/platform/tracing.ts"
import { createEndpoint } from "../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident, makeCompany } from "../support/app.ts"
import { startHttpsReceiver, testCerts, type Receiver } from "../support/https-receiver.ts"
import { freePort } from "../support/net.ts"
import { startOtlpCollector, type OtlpCollector } from "../support/otlp-collector.ts"
import { ADMIN, LOOPBACK, waitFor } from "../support/world.ts"
import { apiKey } from "../support/observed.ts"
import { useDatabase } from "../support/fixtures.ts"
import { runSql } from "../support/sql.ts"

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url))
const SERVER = 2
const CLIENT = 3
const PRODUCER = 4

const db = useDatabase()
let collector: OtlpCollector
let child: ChildProcess | undefined
let exited: Promise<number | null>
let output = ""
let url: string
let companyId: string
let receiver: Receiver
let dir: string
const secretsKey = randomBytes(32)

/** TracingLive over the given environment (not the test process's own). */
const tracing = (env: Record<string, string>) =>
  TracingLive.pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env }))))

const logs = () =>
  output
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>)

beforeAll(async () => {
  companyId = (await makeCompany(db.sql)).id
  collector = await startOtlpCollector()
  receiver = await startHttpsReceiver()
  dir = mkdtempSync(join(tmpdir(), "srs-tracing-"))
  const caFile = join(dir, "ca.pem")
  writeFileSync(caFile, testCerts().trusted.caCert)
  const port = await freePort()
  const opsPort = await freePort()
  url = `http://127.0.0.1:${port}`
  child = spawn(process.execPath, [MAIN], {
    env: {
      ...process.env,
      DATABASE_URL: db.url,
      REPLICATION_SLOT: `slot_${db.name}`,
      SEED_DEMO: "false",
      LOG_LEVEL: "Info",
      // each request's line at info, so it shows at LOG_LEVEL=Info
      REQUEST_LOG_LEVEL: "info",
      HOST: "127.0.0.1",
      PORT: String(port),
      OPS_PORT: String(opsPort),
      SECRETS_KEY: secretsKey.toString("base64"),
      CAPTURE_HEARTBEAT: "1 second",
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      WEBHOOK_RETRY_SCHEDULE: "300ms",
      NODE_EXTRA_CA_CERTS: caFile,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_SERVICE_NAME: "srs-under-test"
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  child.stdout!.on("data", (d) => (output += d))
  child.stderr!.on("data", (d) => (output += d))
  exited = new Promise((resolve) => child!.once("exit", (code) => resolve(code)))
  await waitFor(
    async () => {
      if (child!.exitCode !== null) throw new Error(`the service exited (${child!.exitCode}):\n${output.slice(-3000)}`)
      const r = await fetch(`http://127.0.0.1:${opsPort}/readyz`).catch(() => null)
      const body = r?.status === 200 ? ((await r.json()) as { capture: { streaming: boolean } }) : null
      return body?.capture.streaming
    },
    "the service to be ready and capture to stream",
    60_000
  )
})

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill("SIGTERM")
    await exited
  }
  await collector?.close()
  await receiver?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

/** Waits for the collector's span named `name` whose event ids include `eventId`. */
const spanOfEvent = (name: string, eventId: string, what: string) =>
  waitFor(
    () =>
      collector.spans.find(
        (s) => s.name === name && ((s.attributes["event.ids"] as string[] | undefined) ?? []).includes(eventId)
      ),
    what
  )

describe("traces", () => {
  it("a span per API request and per capture batch reach the collector, with request, key and event ids; the request's log line names the key by id", async () => {
    const { id: keyId, key } = await apiKey(db.sql, companyId, ["incidents"])
    const incident = await insertIncident(db.sql, companyId)
    const eventId = await waitFor(
      async () =>
        (await db.sql<{ id: string }[]>`select id::text from service.events where record_id = ${incident}`)[0]?.id,
      "the event"
    )
    const batch = await spanOfEvent("capture.batch", eventId, "the capture batch's span")
    expect(batch.service).toBe("srs-under-test")
    expect(batch.attributes).toMatchObject({
      "capture.slot": `slot_${db.name}`,
      "capture.events": 1,
      "capture.changes": expect.any(Number),
      "capture.checkpoint": expect.stringMatching(/^[0-9A-F]+\/[0-9A-F]+$/)
    })

    const answer = await fetch(`${url}/api/v1/incidents/${incident}`, { headers: { authorization: `Bearer ${key}` } })
    expect(answer.status).toBe(200)
    const requestId = answer.headers.get("x-request-id")!
    const span = await waitFor(
      () => collector.spans.find((s) => s.attributes["request.id"] === requestId),
      "the request's span"
    )
    expect(span).toMatchObject({
      name: "GET /api/v1/incidents/:id",
      kind: SERVER,
      service: "srs-under-test",
      attributes: { "http.route": "/api/v1/incidents/:id", "api.key_id": keyId, "http.response.status_code": 200 }
    })
    // a request without a key: its span and line name none
    const refused = await fetch(`${url}/api/v1/incidents`)
    expect(refused.status).toBe(401)
    const refusedSpan = await waitFor(
      () => collector.spans.find((s) => s.attributes["request.id"] === refused.headers.get("x-request-id")),
      "the refused request's span"
    )
    expect(refusedSpan.name).toBe("GET /api/v1/incidents")
    expect(refusedSpan.attributes["api.key_id"]).toBeUndefined()

    const line = await waitFor(
      () => logs().find((l) => l.message === "request" && l.requestId === requestId),
      "the request's log line"
    )
    expect(line).toMatchObject({ level: "info", keyId, method: "GET", route: "/api/v1/incidents/:id", status: 200 })
    expect(
      logs().find((l) => l.message === "request" && l.requestId === refused.headers.get("x-request-id"))
    ).toMatchObject({ status: 401, keyId: null })
    expect(logs().some((l) => l.message === "tracing on: spans go to the OTLP endpoint")).toBe(true)
    // the key itself never leaves the process: not in a span, not in a log line
    expect(collector.bodies.join("\n")).not.toContain(key)
    expect(output).not.toContain(key)
  })
})

describe("the delivery engine's spans", () => {
  it("a span per fan-out round with its event and delivery ids; the first attempt's span under it, a retry's on its own, each with its ids and outcome", async () => {
    await runSql(
      db.sql,
      createEndpoint({ secretsKey, allowed: LOOPBACK }, ADMIN, {
        companyId,
        name: "Traced",
        url: receiver.url("/traced"),
        events: ["incident.created"]
      })
    )
    // The first attempt fails; the retry, 300 ms later, is answered 200.
    receiver.reply("/traced", { status: 503 })
    const incident = await insertIncident(db.sql, companyId)
    const eventId = await waitFor(
      async () =>
        (await db.sql<{ id: string }[]>`select id::text from service.events where record_id = ${incident}`)[0]?.id,
      "the event"
    )
    const first = await waitFor(() => receiver.requests.find((r) => r.path === "/traced"), "the first attempt")
    receiver.reply("/traced", { status: 200 })
    const deliveryId = first.headers["service-delivery"] as string
    await waitFor(() => receiver.requests.filter((r) => r.path === "/traced").length >= 2, "the retry")

    const fanout = await spanOfEvent("webhook.fanout", eventId, "the fan-out round's span")
    expect(fanout).toMatchObject({ kind: PRODUCER, service: "srs-under-test" })
    expect(fanout.attributes["delivery.ids"]).toContain(deliveryId)
    expect(fanout.attributes["fanout.events"]).toBeGreaterThanOrEqual(1)
    const attempts = await waitFor(() => {
      const a = collector.spans.filter(
        (s) => s.name === "webhook.delivery" && s.attributes["delivery.id"] === deliveryId
      )
      return a.length >= 2
        ? a.sort((x, y) => Number(x.attributes["delivery.attempt"]) - Number(y.attributes["delivery.attempt"]))
        : null
    }, "both attempts' spans")
    expect(attempts).toHaveLength(2)
    const [one, two] = attempts
    expect(one).toMatchObject({
      kind: CLIENT,
      traceId: fanout.traceId,
      parentSpanId: fanout.spanId,
      attributes: {
        "event.id": eventId,
        "event.type": "incident.created",
        "delivery.attempt": 1,
        "delivery.outcome": "pending",
        "http.response.status_code": 503
      }
    })
    expect(one!.attributes["endpoint.id"]).toEqual(expect.any(String))
    // The retry is claimed from its row, not part of a fan-out round: a trace of its own.
    expect(two).toMatchObject({
      kind: CLIENT,
      attributes: {
        "event.id": eventId,
        "delivery.attempt": 2,
        "delivery.outcome": "succeeded",
        "http.response.status_code": 200
      }
    })
    expect(two!.traceId).not.toBe(fanout.traceId)
    expect(two!.parentSpanId).toBeUndefined()
  })
})

describe("the delivery engine's hooks", () => {
  it("a fan-out span with its event and delivery ids, and a delivery attempt span under it", async () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: `${collector.endpoint}/`, OTEL_SERVICE_NAME: "srs-hooks" }
    await Effect.runPromise(
      Effect.gen(function* () {
        expect(yield* TracingEnabled).toBe(true)
        yield* Effect.void.pipe(
          withDeliverySpan({
            deliveryId: "d-1",
            eventId: "e-1",
            event: "incident.created",
            endpointId: "ep-1",
            attempt: 2
          }),
          Effect.andThen(annotateFanout({ events: 1, deliveryIds: ["d-1"] })),
          withFanoutSpan({ eventIds: ["e-1"] })
        )
        const run = yield* spanRunner
        expect(
          yield* Effect.promise(() =>
            run!("outside.effect", { "a.b": 1 }, async (annotate) => {
              annotate("c.d", "two")
              return 42
            })
          )
        ).toBe(42)
      }).pipe(Effect.provide(tracing(env)))
    )
    // The layer's end sent what was queued.
    const fanout = collector.spans.find((s) => s.name === "webhook.fanout" && s.service === "srs-hooks")
    const delivery = collector.spans.find((s) => s.name === "webhook.delivery" && s.service === "srs-hooks")
    expect(fanout).toMatchObject({
      kind: PRODUCER,
      attributes: { "event.ids": ["e-1"], "fanout.events": 1, "delivery.ids": ["d-1"], "fanout.deliveries": 1 }
    })
    expect(delivery).toMatchObject({
      kind: CLIENT,
      traceId: fanout!.traceId,
      parentSpanId: fanout!.spanId,
      attributes: {
        "delivery.id": "d-1",
        "event.id": "e-1",
        "event.type": "incident.created",
        "endpoint.id": "ep-1",
        "delivery.attempt": 2
      }
    })
    expect(collector.spans.find((s) => s.name === "outside.effect")?.attributes).toMatchObject({
      "a.b": 1,
      "c.d": "two"
    })
  })

  it("without OTEL_EXPORTER_OTLP_ENDPOINT there is no tracer: nothing to send, no spans made outside Effect", async () => {
    for (const env of [{}, { OTEL_EXPORTER_OTLP_ENDPOINT: " " }] as Array<Record<string, string>>) {
      await Effect.runPromise(
        Effect.gen(function* () {
          expect(yield* TracingEnabled).toBe(false)
          expect(yield* spanRunner).toBeUndefined()
        }).pipe(Effect.provide(tracing(env)))
      )
    }
  })
})
