// /healthz answers while the process lives; /readyz is ready while the database answers and
// the migrations are applied, whatever capture does: its role, lag and last error are in the
// operations port's body (and in /metrics), never a reason to be unready. The public port's
// /readyz says ready or not, nothing more.
import { createServer as createTcpServer, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createServer as createHttpServer } from "node:http"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { HttpRouter, HttpServer } from "effect/http"
import { Capture } from "../../../src/pipeline/capture/Capture.ts"
import { serviceRolesLayer } from "../../../src/platform/config.ts"
import { connect, Database } from "../../../src/platform/db/Database.ts"
import { Sql } from "../../../src/platform/db/Sql.ts"
import { OpsRoutes } from "../../../src/faces/ops-server.ts"
import { makeServiceMetrics, Metrics } from "../../../src/faces/ops/metrics.ts"
import { insertIncident } from "../../support/app.ts"
import { startCapture } from "../../support/capture.ts"
import { freshDatabase } from "../../support/db.ts"
import { startWorld, waitFor, type World } from "../../support/world.ts"
import { sample, startObservedServer, type ObservedServer } from "../../support/observed.ts"

interface Readiness {
  status: string
  database: boolean
  migrations: boolean
  roles: string[]
  capture: { role: string; streaming: boolean; lagSeconds: number | null; lastError: string | null }
}

let w: World
let server: ObservedServer
const capture = { stats: undefined as never, slot: "" }

const ready = async (base = server.opsUrl) => {
  const r = await fetch(`${base}/readyz`)
  return { status: r.status, body: (await r.json()) as Readiness }
}

/** The operations port's routes alone, over the given services (no capture, or a silent database). */
const serveHealth = async (services: Layer.Layer<Database | Metrics>) => {
  const scope = Effect.runSync(Scope.make())
  const ServerLive = HttpRouter.serve(OpsRoutes, { disableLogger: true }).pipe(
    Layer.provideMerge(NodeHttpServer.layer(createHttpServer, { port: 0, host: "127.0.0.1" })),
    Layer.provide(Layer.provideMerge(Sql.layer, services))
  )
  const context = await Effect.runPromise(Layer.buildWithScope(ServerLive, scope))
  const address = Context.get(context, HttpServer.HttpServer).address as { port: number }
  return { url: `http://127.0.0.1:${address.port}`, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

beforeAll(async () => {
  w = await startWorld()
  await waitFor(() => w.cap.stats.streaming, "capture to stream")
  Object.assign(capture, { stats: w.cap.stats, slot: `slot_${w.db.name}` })
  server = await startObservedServer({
    sql: w.db.sql,
    url: w.db.url,
    deps: w.deps,
    metrics: makeServiceMetrics(),
    capture
  })
})
afterAll(async () => {
  await server?.close()
  await w?.close()
})

describe("readyz", () => {
  it("on the public port says ready or not, and nothing of roles, capture or errors; /metrics is not there", async () => {
    const r = await fetch(`${server.url}/readyz`)
    expect(r.status).toBe(200)
    expect(await r.json()).toEqual({ status: "ready" })
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    const metrics = await fetch(`${server.url}/metrics`)
    expect(metrics.status).toBe(404)
    expect((await metrics.json()) as { error: string }).toEqual({ error: expect.any(String) })
    // The operations port has them, and a JSON 404 for anything else.
    expect((await fetch(`${server.opsUrl}/metrics`)).status).toBe(200)
    const unknown = await fetch(`${server.opsUrl}/api/v1/incidents`)
    expect(unknown.status).toBe(404)
    expect(await unknown.json()).toEqual({
      error: "no such path on the operations port: /healthz, /readyz and /metrics"
    })
  })

  it("is ready while capture leads and streams, and stays ready when it is more than 60 s behind, saying so", async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(await ready()).toMatchObject({
      status: 200,
      body: {
        status: "ready",
        database: true,
        migrations: true,
        roles: ["api", "capture", "delivery"],
        capture: { role: "leader", streaming: true, lastError: null }
      }
    })
    // Make capture's last apply look two minutes old, then hold its next batch while the app
    // writes: streaming, but behind. The update comes first, while capture is idle: capture's
    // batch locks the checkpoint's row as its first step, so an update made once the batch has
    // begun would wait for the batch, which waits for the lock held here (a wait PostgreSQL
    // cannot see as a deadlock, holding a transaction open that stalls every slot creation).
    await w.db
      .sql`update service.capture_state set applied_at = now() - interval '2 minutes' where slot_name = ${capture.slot}`
    const held = w.db.sql.begin(async (tx) => {
      await tx`lock table service.views in share mode` // capture's batch writes the incident's view
      await insertIncident(w.db.sql, w.company.id)
      const behind = await ready()
      expect(behind).toMatchObject({
        status: 200,
        body: { status: "ready", capture: { role: "leader", streaming: true } }
      })
      expect(behind.body.capture.lagSeconds).toBeGreaterThan(60)
      const metrics = await (await fetch(`${server.opsUrl}/metrics`)).text()
      expect(sample(metrics, "srs_capture_lag_seconds")).toBeGreaterThan(60)
      expect(sample(metrics, "srs_capture_lag_bytes")).toBeGreaterThan(0)
      expect(sample(metrics, "srs_capture_leader")).toBe(1)
      expect(sample(metrics, "srs_capture_role", { role: "leader" })).toBe(1)
      expect(sample(metrics, "srs_capture_role", { role: "standby" })).toBe(0)
    })
    await held
    await w.cap.settle()
    const caughtUp = await ready()
    expect(caughtUp).toMatchObject({ status: 200, body: { status: "ready" } })
    expect(caughtUp.body.capture.lagSeconds).toBeLessThan(60)
  })

  it("stays ready when capture stops (a standby), saying it does not stream, and leads again when it runs", async () => {
    await w.cap.stop()
    expect(await ready()).toMatchObject({
      status: 200,
      body: { status: "ready", database: true, capture: { role: "standby", streaming: false } }
    })
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    const metrics = await (await fetch(`${server.opsUrl}/metrics`)).text()
    expect(sample(metrics, "srs_capture_leader")).toBe(0)
    expect(sample(metrics, "srs_capture_role", { role: "standby" })).toBe(1)
    expect(sample(metrics, "srs_capture_streaming")).toBe(0)
    const again = startCapture(w.db)
    Object.assign(w, { cap: again })
    capture.stats = again.stats as never
    await waitFor(() => again.stats.streaming, "capture to stream again")
    await again.settle()
    expect(await ready()).toMatchObject({ status: 200, body: { capture: { role: "leader", streaming: true } } })
  })

  it("without capture in the process: ready, role off, the lag read from the database; 503 when a migration is missing", async () => {
    const db = await freshDatabase()
    const health = await serveHealth(
      Layer.mergeAll(
        Layer.succeed(Database, { sql: db.sql, url: db.url, embedded: false }),
        Layer.succeed(Metrics, makeServiceMetrics()),
        serviceRolesLayer(["api"])
      )
    )
    try {
      expect(await ready(health.url)).toMatchObject({
        status: 200,
        body: {
          status: "ready",
          database: true,
          migrations: true,
          roles: ["api"],
          capture: { role: "off", streaming: false, lastError: null }
        }
      })
      const metrics = await (await fetch(`${health.url}/metrics`)).text()
      expect(sample(metrics, "srs_capture_role", { role: "off" })).toBe(1)
      expect(sample(metrics, "srs_capture_leader")).toBe(0)
      expect(sample(metrics, "srs_capture_streaming")).toBeUndefined()
      // A database restored without this build's last migration.
      await db.sql`delete from service.schema_migrations where name = (select max(name) from service.schema_migrations)`
      expect(await ready(health.url)).toMatchObject({
        status: 503,
        body: { status: "not ready", database: true, migrations: false }
      })
    } finally {
      await health.close()
      await db.drop()
    }
  })

  it("answers 503 at once when the database does not answer", async () => {
    // A "database" that takes connections and never says a word.
    const sockets: Array<Socket> = []
    const silent = createTcpServer((socket) => void sockets.push(socket))
    await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r))
    const url = `postgres://nobody@127.0.0.1:${(silent.address() as { port: number }).port}/nothing`
    const sql = connect(url, 2)
    const stats = { ...w.cap.stats, role: "leader", streaming: true, lastError: null }
    const health = await serveHealth(
      Layer.mergeAll(
        Layer.succeed(Database, { sql, url, embedded: false }),
        Layer.succeed(Metrics, makeServiceMetrics()),
        Layer.succeed(Capture, { stats: stats as never, slot: "none" })
      )
    )
    try {
      const t0 = Date.now()
      const r = await fetch(`${health.url}/readyz`)
      expect(Date.now() - t0).toBeLessThan(3_000)
      expect(r.status).toBe(503)
      expect(await r.json()).toMatchObject({
        status: "not ready",
        database: false,
        capture: { role: "leader", streaming: true, lagSeconds: null }
      })
    } finally {
      await health.close()
      for (const s of sockets) s.destroy()
      silent.close()
      await sql.end({ timeout: 0 }).catch(() => undefined)
    }
  })
})
