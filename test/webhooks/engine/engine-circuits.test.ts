// A circuit breaker per destination, with a real HTTPS receiver that hangs, then recovers, and
// a port where nothing listens: after consecutive timeouts or refused connections the
// destination's circuit opens; what falls due meanwhile is recorded as not sent (no request,
// no slot) and scheduled as any failure; a single probe at a time decides when it closes.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { createEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { claimProbe } from "../../../src/webhooks/engine/circuits-queries.ts"
import { insertIncident } from "../../support/app.ts"
import { freePort } from "../../support/net.ts"
import { captureStdout } from "../../support/observed.ts"
import { ADMIN, at, deliveries, sleep, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const s = useEngineWorld()

type Circuit = { state: string; failures: number; probes: number; probe_at: Date; last_error: string | null }
const circuitOf = async (endpointId: string): Promise<Circuit | undefined> =>
  (
    await s.w.db.sql<Circuit[]>`
      select state, failures, probes, probe_at, last_error from service.webhook_circuits where endpoint_id = ${endpointId}`
  )[0]

const attemptsOf = (endpointId: string) =>
  s.w.db.sql<{ delivery_id: string; number: number; error_kind: string | null; status: number | null }[]>`
    select a.delivery_id::text, a.number, a.error_kind, a.status from service.webhook_attempts a
    join service.webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = ${endpointId}
    order by a.started_at, a.number`

const endpoint = (name: string, url: string) =>
  runSql(
    s.w.deps.sql,
    createEndpoint(s.w.deps, ADMIN, { companyId: s.w.company.id, name, url, events: ["incident.created"] })
  )

describe("a destination's circuit", () => {
  it("opens after timeouts in a row; deliveries due meanwhile are not sent; one probe at a time; an answer closes it and everything arrives", async () => {
    const path = "/flaky"
    s.w.receiver.reply(path, { hang: true })
    const e = await endpoint("flaky", s.w.receiver.url(path))
    const logs = captureStdout()
    try {
      s.engine = await startEngine(s.w.deps, {
        timeoutMs: 400,
        retrySchedule: "1s,1s,1s,1s,1s",
        circuitAfter: 3,
        circuitProbeMs: 800,
        circuitProbeMaxMs: 1_600,
        jsonLogs: true
      })
      // Three deliveries: one at a time to a receiver that has not answered yet, each times out.
      for (let i = 0; i < 3; i++) await insertIncident(s.w.db.sql, s.w.company.id)
      const opened = await waitFor(() => circuitOf(e.id), "the circuit opens")
      expect(opened).toMatchObject({ state: "open", failures: 3, probes: 0 })
      expect(opened.last_error).toMatch(/^timeout: /)
      expect(at(s.w.receiver, path)).toHaveLength(3)

      // New deliveries while it is open: recorded as not sent, their next attempt scheduled.
      for (let i = 0; i < 3; i++) await insertIncident(s.w.db.sql, s.w.company.id)
      await waitFor(
        async () => (await attemptsOf(e.id)).filter((a) => a.error_kind === "circuit").length >= 3,
        "three not sent"
      )
      const notSent = (await attemptsOf(e.id)).filter((a) => a.error_kind === "circuit")
      const ds = await deliveries(s.w.db.sql)
      for (const a of notSent) {
        const d = ds.find((x) => x.id === a.delivery_id)!
        expect(d.last_error ?? "").toMatch(/^circuit open: not sent/)
      }

      // Probes come and fail (the receiver still hangs): never two at once.
      await waitFor(async () => ((await circuitOf(e.id))?.probes ?? 0) >= 1, "a failed probe")
      const whileOpen = at(s.w.receiver, path).length
      expect(whileOpen).toBeGreaterThanOrEqual(4)

      // The receiver recovers: the next probe gets an answer and closes the circuit.
      s.w.receiver.reply(path, { status: 200 })
      await waitFor(async () => (await circuitOf(e.id)) === undefined, "the circuit closes", 15_000)
      await waitFor(
        async () =>
          (await deliveries(s.w.db.sql)).filter((d) => d.endpoint_id === e.id && d.state === "succeeded").length === 6,
        "every delivery arrives",
        20_000
      )

      // Every attempt recorded as sent reached the receiver, and none recorded as not sent did.
      const attempts = await attemptsOf(e.id)
      const stats = await Effect.runPromise(s.engine.stats)
      expect(stats).toMatchObject({ circuitsOpened: 1, circuitsClosed: 1, circuitsOpen: 0 })
      expect(stats.notSent).toBe(attempts.filter((a) => a.error_kind === "circuit").length)
      // (An attempt sent may still not have reached it: a TLS handshake that outlasted the 400 ms
      // deadline on a loaded machine is a timeout the receiver never saw, so at most that many.)
      const got = at(s.w.receiver, path).length
      expect(got).toBeLessThanOrEqual(attempts.filter((a) => a.error_kind !== "circuit").length)
      expect(got).toBeGreaterThanOrEqual(attempts.filter((a) => a.status !== null).length)
      expect(attempts.filter((a) => a.error_kind === "circuit").every((a) => a.status === null)).toBe(true)
      // Each delivery arrived under its own id, once successfully.
      const delivered = new Set(at(s.w.receiver, path).map((r) => String(r.headers["service-delivery"])))
      expect(delivered.size).toBe(6)

      const lines = logs.lines()
      expect(
        lines.filter(
          (l) => l.message === "webhook circuit opened: deliveries are not sent until a probe gets an answer"
        )
      ).toEqual([expect.objectContaining({ level: "warn", endpointId: e.id, companyId: s.w.company.id, failures: 3 })])
      expect(lines.some((l) => l.message === "webhook circuit probe got no answer; the circuit stays open")).toBe(true)
      expect(lines.filter((l) => l.message === "webhook circuit closed: the receiver answered")).toEqual([
        expect.objectContaining({ level: "info", endpointId: e.id })
      ])
    } finally {
      logs.stop()
    }
  })

  it("opens after refused connections too, and a 5xx answer is an answer: it closes", async () => {
    const port = await freePort() // nothing listens there
    const e = await endpoint("refused", `https://127.0.0.1:${port}/hook`)
    s.engine = await startEngine(s.w.deps, { retrySchedule: "10s", circuitAfter: 2, circuitProbeMs: 300 })
    for (let i = 0; i < 2; i++) await insertIncident(s.w.db.sql, s.w.company.id)
    const opened = await waitFor(() => circuitOf(e.id), "the circuit opens")
    expect(opened.last_error).toMatch(/^connection refused/)
    // The address now answers, with 503: the probe gets an answer, the circuit closes.
    await s.w.db.sql`update service.webhook_endpoints set url = ${s.w.receiver.url("/five")} where id = ${e.id}`
    s.w.receiver.reply("/five", { status: 503 })
    await sleep(400)
    await insertIncident(s.w.db.sql, s.w.company.id)
    await waitFor(async () => (await circuitOf(e.id)) === undefined, "closed by an answer")
    expect(at(s.w.receiver, "/five").length).toBeGreaterThanOrEqual(1)
  })
})

describe("the probe", () => {
  it("goes to one engine: a second cannot take it until the first one's lease runs out", async () => {
    const e = await endpoint("probe", s.w.receiver.url("/probe"))
    const now = Date.now()
    await s.w.db.sql`
      insert into service.webhook_circuits (endpoint_id, company_id, state, failures, opened_at, probe_at)
      values (${e.id}, ${s.w.company.id}, 'open', 5, ${new Date(now - 10_000)}, ${new Date(now - 1_000)})`
    const dest = { endpointId: e.id, subscriptionId: null }
    const [one, two] = await Promise.all([
      claimProbe(s.w.db.sql, dest, randomUUID(), now, now + 5_000),
      claimProbe(s.w.db.sql, dest, randomUUID(), now, now + 5_000)
    ])
    expect([one, two].sort()).toEqual([false, true])
    expect(await claimProbe(s.w.db.sql, dest, randomUUID(), now + 4_000, now + 9_000)).toBe(false)
    // The first engine went quiet: after its lease another may probe.
    expect(await claimProbe(s.w.db.sql, dest, randomUUID(), now + 5_000, now + 10_000)).toBe(true)
  })
})
