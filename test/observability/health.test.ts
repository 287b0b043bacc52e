// /healthz answers while the process lives; /readyz turns false when capture stops or falls
// more than 60 s behind, and true again when it catches up.
import { createServer as createTcpServer, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer as createHttpServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { Capture } from "../../src/capture/Capture.ts"
import { connect, Database } from "../../src/db/Database.ts"
import { HealthRoutes } from "../../src/http/health.ts"
import { makeServiceMetrics } from "../../src/observability/metrics.ts"
import { insertIncident } from "../support/app.ts"
import { startCapture } from "../support/capture.ts"
import { startWorld, waitFor, type World } from "../webhooks/support.ts"
import { sample, startObservedServer, type ObservedServer } from "./support.ts"

let w: World
let server: ObservedServer
const capture = { stats: undefined as never, slot: "" }

const ready = async () => {
  const r = await fetch(`${server.url}/readyz`)
  return { status: r.status, body: (await r.json()) as { status: string; database: boolean; capture: boolean; lagSeconds: number | null } }
}

beforeAll(async () => {
  w = await startWorld()
  await waitFor(() => w.cap.stats.streaming, "capture to stream")
  Object.assign(capture, { stats: w.cap.stats, slot: `slot_${w.db.name}` })
  server = await startObservedServer({ sql: w.db.sql, url: w.db.url, deps: w.deps, metrics: makeServiceMetrics(), capture })
})
afterAll(async () => {
  await server?.close()
  await w?.close()
})

describe("readyz", () => {
  it("is ready while capture streams and keeps up; not when it is more than 60 s behind", async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(await ready()).toMatchObject({ status: 200, body: { status: "ready", database: true, capture: true } })
    // Hold capture's next batch (as rebuild-views does) while the app writes, and make its
    // last apply look two minutes old: streaming, but behind.
    const held = w.db.sql.begin(async (tx) => {
      await tx`lock table service.rows in share mode`
      await insertIncident(w.db.sql, w.company.id)
      await w.db.sql`update service.capture_state set applied_at = now() - interval '2 minutes' where slot_name = ${capture.slot}`
      const behind = await ready()
      expect(behind).toMatchObject({ status: 503, body: { status: "not ready", capture: true } })
      expect(behind.body.lagSeconds).toBeGreaterThan(60)
      const metrics = await (await fetch(`${server.url}/metrics`)).text()
      expect(sample(metrics, "srs_capture_lag_seconds")).toBeGreaterThan(60)
      expect(sample(metrics, "srs_capture_lag_bytes")).toBeGreaterThan(0)
    })
    await held
    await w.cap.settle()
    const caughtUp = await ready()
    expect(caughtUp).toMatchObject({ status: 200, body: { status: "ready" } })
    expect(caughtUp.body.lagSeconds).toBeLessThan(60)
  })

  it("turns false when capture stops, and true again when it runs", async () => {
    await w.cap.stop()
    const stopped = await ready()
    expect(stopped).toMatchObject({ status: 503, body: { status: "not ready", database: true, capture: false } })
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    const again = startCapture(w.db)
    Object.assign(w, { cap: again })
    capture.stats = again.stats as never
    await waitFor(() => again.stats.streaming, "capture to stream again")
    await again.settle()
    expect((await ready()).status).toBe(200)
  })

  it("answers 503 at once when the database does not answer", async () => {
    // A "database" that takes connections and never says a word.
    const sockets: Array<Socket> = []
    const silent = createTcpServer((socket) => void sockets.push(socket))
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))
    const url = `postgres://nobody@127.0.0.1:${(silent.address() as { port: number }).port}/nothing`
    const sql = connect(url, 2)
    const stats = { ...w.cap.stats, streaming: true, lastError: null }
    const scope = Effect.runSync(Scope.make())
    const ServerLive = HttpRouter.serve(HealthRoutes, { disableLogger: true }).pipe(
      Layer.provideMerge(NodeHttpServer.layer(createHttpServer, { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.succeed(Database, { sql, url, embedded: false })),
      Layer.provide(Layer.succeed(Capture, { stats: stats as never, slot: "none" }))
    )
    try {
      const context = await Effect.runPromise(Layer.buildWithScope(ServerLive, scope))
      const address = Context.get(context, HttpServer.HttpServer).address as { port: number }
      const t0 = Date.now()
      const r = await fetch(`http://127.0.0.1:${address.port}/readyz`)
      expect(Date.now() - t0).toBeLessThan(3_000)
      expect(r.status).toBe(503)
      expect(await r.json()).toMatchObject({ status: "not ready", database: false })
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      sockets.forEach((s) => s.destroy())
      silent.close()
      await sql.end({ timeout: 0 }).catch(() => undefined)
    }
  })
})
