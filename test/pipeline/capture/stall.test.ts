// A capture that stalls while it looks alive (docs/operations.md#metrics, "A stalled capture"): its
// replication connection hangs (a dead network path, here a proxy that goes silent both ways, with
// the walsender behind it terminated) so nothing arrives and nothing fails. Capture notices within
// its stall timeout, says why, ends the sessions the server still holds for it and reconnects; when
// reconnecting does not help, status and the metrics say so until it applies again. A walsender
// terminated under a live connection is noticed at once. While capture is stopped, the metrics show
// the slot's WAL growing; a slot lost meanwhile is one greppable line.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { leaderApplicationName } from "../../../src/pipeline/capture/leader.ts"
import { captureStatus } from "../../../src/pipeline/capture/status.ts"
import { collectCapture, makeServiceMetrics } from "../../../src/faces/ops/metrics.ts"
import { assessStatus, operationsStatus } from "../../../src/faces/ops/status.ts"
import { runCli } from "../../support/cli.ts"
import { sample } from "../../support/observed.ts"
import { insertIncident, makeCompany } from "../../support/app.ts"
import { startCapture, view, type RunningCapture } from "../../support/capture.ts"
import { startTcpProxy, type TcpProxy } from "../../support/tcp-proxy.ts"
import { waitFor } from "../../support/world.ts"
import { useDatabase } from "../../support/fixtures.ts"
import { runSql } from "../../support/sql.ts"

const STALL_MS = 3_000

interface Line {
  readonly level: string
  readonly message: string
  readonly fields: Record<string, unknown>
}

const db = useDatabase()
let proxy: TcpProxy
let cap: RunningCapture
let companyId: string
const lines: Line[] = []
const slot = () => `slot_${db.name}`
const logged = (message: string) => lines.filter((l) => l.message === message)
const walsender = async () =>
  (
    await db.sql<
      { pid: number | null }[]
    >`select active_pid as pid from pg_replication_slots where slot_name = ${slot()}`
  )[0]?.pid ?? null

beforeAll(async () => {
  companyId = (await makeCompany(db.sql)).id
  const target = new URL(db.url)
  proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port) })
  // The pool (applying, the stall watch's probe) goes straight to the server; the replication
  // stream and the leader lock's session go through the proxy.
  cap = startCapture(db, {
    url: proxy.url(db.url),
    stallTimeoutMs: STALL_MS,
    log: (level, message, fields = {}) => lines.push({ level, message, fields })
  })
  await waitFor(() => cap.stats.streaming, "capture to stream")
  await cap.settle()
})

afterAll(async () => {
  proxy.refuseNew = false
  await cap?.stop()
  await proxy?.close()
})

describe("a stalled capture", () => {
  it("a walsender terminated under a live connection: noticed at once, and capture carries on", async () => {
    const pid = await walsender()
    expect(pid).not.toBeNull()
    await db.sql`select pg_terminate_backend(${pid})`
    const id = await insertIncident(db.sql, companyId)
    await cap.settle()
    expect(await view(db.sql, "incidents", id)).toBeDefined()
    expect(cap.logs.some((l) => l.level === "retry")).toBe(true)
    expect(await walsender()).not.toBe(pid)
    // an error, not a stall
    expect(cap.stats.stalls).toBe(0)
    expect(logged("capture stalled: reconnecting")).toEqual([])
  })

  it("a connection that hangs, its walsender terminated: noticed within the timeout, said why, the old sessions ended, reconnected and applying", async () => {
    const t0 = Date.now()
    proxy.freeze()
    await db.sql`select pg_terminate_backend(${await walsender()})`
    const id = await insertIncident(db.sql, companyId)
    const stalled = await waitFor(() => logged("capture stalled: reconnecting")[0], "the stall to be noticed", 20_000)
    expect(Date.now() - t0).toBeLessThan(STALL_MS * 4)
    expect(stalled).toMatchObject({
      level: "warn",
      fields: {
        slot: slot(),
        reconnects: 1,
        why: expect.stringContaining("nothing received from the replication stream")
      }
    })
    expect(String(stalled.fields.why)).toMatch(/a probe written \d+ s ago never arrived/)
    const over = await waitFor(() => logged("capture stall over: applying again")[0], "capture to apply again", 30_000)
    expect(over.fields).toMatchObject({ slot: slot(), reconnects: 1, stalledSeconds: expect.any(Number) })
    await cap.settle()
    expect(await view(db.sql, "incidents", id)).toBeDefined()
    expect(cap.stats.stalls).toBe(1)
    expect(await runSql(db.sql, captureStatus(slot()))).toMatchObject({
      stalledAt: null,
      stallReason: null,
      stallReconnects: 0,
      slotActive: true
    })
    // The sessions the server kept for the hung connection were ended: one leader session, streaming again.
    const [leaders] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from pg_stat_activity where application_name = ${leaderApplicationName()}`
    expect(leaders!.n).toBe(1)
    // one line each, greppable by their messages
    expect(logged("capture stalled: reconnecting")).toHaveLength(1)
    expect(logged("capture leader: stepped down").at(-1)!.fields.reason).toContain("capture stalled")
  })

  it("reconnecting does not help: status and the metrics say it is stalled, until it applies again", async () => {
    const metrics = makeServiceMetrics()
    await runSql(db.sql, collectCapture(metrics, cap.stats, slot()))
    expect(sample(await metrics.registry.scrape(), "srs_capture_stalled")).toBe(0)
    proxy.freeze()
    proxy.refuseNew = true
    const id = await insertIncident(db.sql, companyId)
    await waitFor(() => logged("capture stalled: reconnecting").length === 2, "the second stall to be noticed", 20_000)
    // new connections are refused: the reconnects fail, nothing is applied
    await waitFor(() => cap.logs.filter((l) => l.level === "retry").length >= 3, "reconnects to fail")
    const text = await metrics.registry.scrape()
    expect(sample(text, "srs_capture_stalled")).toBe(1)
    expect(sample(text, "srs_capture_stalls_total")).toBe(2)
    expect(sample(text, "srs_capture_streaming")).toBe(0)
    const status = await runSql(db.sql, operationsStatus(slot()))
    expect(status.capture.stalledAt).not.toBeNull()
    expect(status.capture.stallReason).toContain("nothing received from the replication stream")
    expect(status.capture.stallReconnects).toBe(1)
    const verdict = assessStatus(status)
    expect(verdict.state).toBe("degraded")
    expect(verdict.reasons.join("\n")).toMatch(
      /capture stalled since .* \(1 reconnect so far\): capture stalled: nothing received/
    )
    const cli = await runCli(["status", "--json"], { DATABASE_URL: db.url, REPLICATION_SLOT: slot() })
    expect(cli.code).toBe(1)
    expect(JSON.parse(cli.stdout).health.reasons.join("\n")).toContain("capture stalled since")
    expect((await runCli(["status"], { DATABASE_URL: db.url, REPLICATION_SLOT: slot() })).stdout).toMatch(
      /STALLED: +since .*1 reconnect so far/
    )

    proxy.refuseNew = false
    await waitFor(() => logged("capture stall over: applying again").length === 2, "capture to apply again", 40_000)
    await cap.settle()
    expect(await view(db.sql, "incidents", id)).toBeDefined()
    expect(sample(await metrics.registry.scrape(), "srs_capture_stalled")).toBe(0)
    expect((await runSql(db.sql, captureStatus(slot()))).stalledAt).toBeNull()
  })
})

describe("while capture is stopped", () => {
  it("the metrics show the slot's WAL growing, and how much it may still grow", async () => {
    await cap.stop()
    // Until its walsender has gone the server may still move the slot's restart point (it
    // decodes what was sent), which would shrink the retained WAL between the two scrapes.
    await waitFor(
      async () =>
        (await db.sql`select 1 from pg_replication_slots where slot_name = ${slot()} and not active`).length === 1,
      "the slot to be released"
    )
    const metrics = makeServiceMetrics()
    await runSql(db.sql, collectCapture(metrics, cap.stats, slot()))
    const before = await metrics.registry.scrape()
    for (let i = 0; i < 20; i++) await insertIncident(db.sql, companyId)
    await db.sql`select pg_logical_emit_message(true, 'test-wal', repeat('x', 2000000))`
    const after = await metrics.registry.scrape()
    const grew = (name: string) => sample(after, name)! - sample(before, name)!
    expect(grew("srs_capture_retained_wal_bytes")).toBeGreaterThan(2_000_000)
    expect(grew("srs_capture_lag_bytes")).toBeGreaterThan(2_000_000)
    expect(sample(after, "srs_capture_last_applied_age_seconds")).toBeGreaterThanOrEqual(0)
    expect(sample(after, "srs_capture_slot_wal_status", { status: "reserved" })).toBe(1)
    expect(sample(after, "srs_capture_slot_wal_status", { status: "lost" })).toBe(0)
    expect(sample(after, "srs_capture_slot_wal_status", { status: "missing" })).toBe(0)
    expect(sample(after, "srs_capture_streaming")).toBe(0)
    expect(sample(after, "srs_capture_leader")).toBe(0)
    const keep = sample(after, "srs_capture_slot_wal_keep_size_bytes")
    if (keep !== undefined) {
      // max_slot_wal_keep_size is set (the embedded test server: 4GB): the room left shrinks as WAL is kept
      expect(keep).toBe(4 * 1024 ** 3)
      expect(grew("srs_capture_slot_safe_wal_bytes")).toBeLessThan(-2_000_000)
    } else {
      expect(sample(after, "srs_capture_slot_safe_wal_bytes")).toBeUndefined()
    }
  })

  it("a slot lost meanwhile: one error line says so, with what is lost, and one line when the views are rebuilt", async () => {
    await db.sql`select pg_drop_replication_slot(${slot()})`
    const seen: Line[] = []
    const again = startCapture(db, { log: (level, message, fields = {}) => seen.push({ level, message, fields }) })
    try {
      await waitFor(() => again.stats.streaming, "capture to stream again")
      const lost = seen.filter(
        (l) => l.message === "capture slot lost: recreating it and rebuilding every view from the app tables"
      )
      expect(lost).toHaveLength(1)
      expect(lost[0]).toMatchObject({
        level: "error",
        fields: {
          slot: slot(),
          reason: `replication slot ${slot()} was lost`,
          checkpoint: expect.stringMatching(/^[0-9A-F]+\/[0-9A-F]+$/),
          consequence: expect.stringContaining("will not be sent")
        }
      })
      expect(seen.filter((l) => l.message === "views rebuilt after slot loss")).toEqual([
        expect.objectContaining({ level: "info", fields: expect.objectContaining({ slot: slot() }) })
      ])
      expect(seen.map((l) => l.message)).toContain("capture leader: took over")
    } finally {
      await again.stop()
    }
    expect(seen.filter((l) => l.message === "capture leader: stepped down")).toEqual([
      expect.objectContaining({ fields: { reason: "stopping" } })
    ])
  })
})
