// Durability: the schedule lives in the database, so stopping an engine and starting another
// (or running two at once) loses nothing and sends nothing twice on purpose.
import { afterEach, describe, expect, it } from "vitest"
import { insertIncident } from "../../support/app.ts"
import {
  addEndpoint,
  at,
  attemptsOf,
  deliveriesTo,
  fannedOut,
  fanoutNow,
  sleep,
  startEngine,
  useWorld,
  waitFor
} from "../../support/world.ts"

const w = useWorld()
afterEach(async () => {
  await w.db.sql`delete from service.webhook_endpoints`
})

const endpoint = (path: string) => addEndpoint(w, path)
const ofEndpoint = (id: string) => deliveriesTo(w.db.sql, id)
const deliveryIds = (path: string) => at(w.receiver, path).map((r) => String(r.headers["service-delivery"]))

describe("restart", () => {
  it("a restart in the middle of retry schedules loses nothing and duplicates nothing", async () => {
    const path = "/restart"
    w.receiver.reply(path, { status: 500 })
    const e = await endpoint(path)
    const schedule = "300ms,300ms,300ms,300ms,300ms"
    const first = await startEngine(w.deps, { retrySchedule: schedule })
    for (let i = 0; i < 5; i++) await insertIncident(w.db.sql, w.company.id)
    await waitFor(async () => (await ofEndpoint(e.id)).filter((d) => d.attempts >= 2).length === 5, "two attempts each")
    await first.stop()
    const seen = at(w.receiver, path).length
    const stopped = await ofEndpoint(e.id)
    expect(stopped.every((d) => d.state === "pending")).toBe(true)
    await sleep(800) // several scheduled waits pass with no engine running
    expect(at(w.receiver, path)).toHaveLength(seen)

    w.receiver.reply(path, { status: 200 })
    const second = await startEngine(w.deps, { retrySchedule: schedule })
    try {
      const done = await waitFor(async () => {
        const ds = await ofEndpoint(e.id)
        return ds.length === 5 && ds.every((d) => d.state === "succeeded") ? ds : null
      }, "every delivery to succeed")
      const sent = deliveryIds(path)
      for (const d of done) {
        const attempts = await attemptsOf(w.db.sql, d.id)
        // Every attempt is recorded once, numbered without gaps, and each one reached the
        // receiver exactly once: nothing lost, nothing sent twice.
        expect(attempts.map((a) => a.number)).toEqual(Array.from({ length: d.attempts }, (_, i) => i + 1))
        expect(sent.filter((id) => id === d.id)).toHaveLength(d.attempts)
        expect(attempts.at(-1)!.status).toBe(200)
        expect(attempts.slice(0, -1).every((a) => a.status === 500)).toBe(true)
      }
    } finally {
      await second.stop()
    }
  })

  /**
   * An endpoint at `path` answering after `delayMs`, one incident, and an engine with that
   * shutdown grace stopped while the request is at the receiver; with how long the stop took.
   */
  const stopWhileSending = async (path: string, delayMs: number, shutdownGraceMs: number) => {
    w.receiver.reply(path, { status: 200, delayMs })
    const e = await endpoint(path)
    const engine = await startEngine(w.deps, { shutdownGraceMs })
    await insertIncident(w.db.sql, w.company.id)
    await waitFor(() => at(w.receiver, path).length === 1, "the request to arrive")
    const t0 = Date.now()
    await engine.stop()
    return { e, stopMs: Date.now() - t0 }
  }

  it("shutdown hands back an attempt that does not finish within the grace; the next engine sends it with the same id", async () => {
    const path = "/slow"
    const { e, stopMs } = await stopWhileSending(path, 2_000, 200)
    expect(stopMs).toBeLessThan(1_500)
    const [d] = await ofEndpoint(e.id)
    expect([d!.state, d!.attempts]).toEqual(["pending", 0])
    const [lease] = await w.db.sql<{ leased_by: string | null; due: boolean }[]>`
      select leased_by::text, next_attempt_at <= now() as due from service.webhook_deliveries where id = ${d!.id}`
    expect(lease).toEqual({ leased_by: null, due: true })
    expect(await attemptsOf(w.db.sql, d!.id)).toEqual([])

    w.receiver.reply(path, { status: 200 })
    const second = await startEngine(w.deps)
    try {
      await waitFor(async () => (await ofEndpoint(e.id))[0]?.state === "succeeded", "the handed-back delivery")
      expect(deliveryIds(path)).toEqual([d!.id, d!.id])
      expect((await attemptsOf(w.db.sql, d!.id)).map((a) => [a.number, a.status])).toEqual([[1, 200]])
    } finally {
      await second.stop()
    }
  })

  it("shutdown waits for an attempt that finishes within the grace and records it", async () => {
    const { e } = await stopWhileSending("/quick", 400, 5_000)
    const [d] = await ofEndpoint(e.id)
    expect([d!.state, d!.attempts]).toEqual(["succeeded", 1])
  })

  it("a crashed engine's lease runs out, then another engine sends the delivery", async () => {
    const path = "/crash"
    const e = await endpoint(path)
    // No engine runs: the event is fanned out by hand, then leased to a process that died.
    await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    await fanoutNow(w.db.sql)
    const [d] = await ofEndpoint(e.id)
    const before = at(w.receiver, path).length
    await w.db.sql`update service.webhook_deliveries set leased_by = gen_random_uuid(),
      lease_until = now() + interval '1500 ms', next_attempt_at = now() + interval '1500 ms' where id = ${d!.id}`
    const leasedAt = Date.now()
    const engine = await startEngine(w.deps, { pollMs: 200 })
    try {
      await waitFor(() => at(w.receiver, path).length > before, "the send after the lease", 10_000)
      expect(Date.now() - leasedAt).toBeGreaterThanOrEqual(1_400)
      await waitFor(async () => (await ofEndpoint(e.id))[0]?.state === "succeeded", "success")
    } finally {
      await engine.stop()
    }
  })

  it("answers that cannot be written wait in memory, are written once the database takes them, and are not sent again", async () => {
    const path = "/unwritable"
    const e = await endpoint(path)
    const engine = await startEngine(w.deps)
    try {
      // Every new delivery row is refused for a while.
      await w.db.sql`alter table service.webhook_deliveries add constraint refuse_rows check (false) not valid`
      for (let i = 0; i < 5; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(() => at(w.receiver, path).length === 5, "the five requests")
      await sleep(1_500) // writes fail and are retried
      expect(await ofEndpoint(e.id)).toEqual([])
      await w.db.sql`alter table service.webhook_deliveries drop constraint refuse_rows`
      const done = await waitFor(async () => {
        const ds = await ofEndpoint(e.id)
        return ds.length === 5 && ds.every((d) => d.state === "succeeded" && d.attempts === 1) ? ds : null
      }, "the five written")
      await fannedOut(w.db.sql)
      await sleep(300)
      expect(deliveryIds(path).sort()).toEqual(done.map((d) => d.id).sort())
    } finally {
      await w.db.sql`alter table service.webhook_deliveries drop constraint if exists refuse_rows`
      await engine.stop()
    }
  })

  it("a stopped engine has written what it sent, freed its partitions and left, and sends nothing more", async () => {
    const path = "/leaving"
    const e = await endpoint(path)
    const engine = await startEngine(w.deps)
    const mine = async () => {
      const [row] = await w.db.sql<{ parts: number; engines: number }[]>`select
        (select count(*)::int from service.webhook_fanout_parts where owner = ${engine.instanceId}) as parts,
        (select count(*)::int from service.webhook_engines where id = ${engine.instanceId}) as engines`
      return row!
    }
    try {
      await waitFor(async () => (await mine()).parts > 0, "partitions taken")
      await insertIncident(w.db.sql, w.company.id)
      await waitFor(() => at(w.receiver, path).length === 1, "the first request")
    } finally {
      await engine.stop()
    }
    expect(await mine()).toEqual({ parts: 0, engines: 0 })
    expect((await ofEndpoint(e.id)).map((d) => d.state)).toEqual(["succeeded"])
    await insertIncident(w.db.sql, w.company.id)
    await sleep(700)
    expect(at(w.receiver, path)).toHaveLength(1)
  })

  it("two engines share the work and each delivery is sent once", async () => {
    const path = "/shared"
    const e = await endpoint(path)
    const a = await startEngine(w.deps)
    const b = await startEngine(w.deps)
    try {
      for (let i = 0; i < 30; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(
        async () => (await ofEndpoint(e.id)).filter((d) => d.state === "succeeded").length === 30,
        "30 deliveries"
      )
      const sent = deliveryIds(path)
      expect(sent).toHaveLength(30)
      expect(new Set(sent).size).toBe(30)
      const [n] = await w.db.sql<{ n: number }[]>`select count(*)::int as n from service.webhook_attempts a
        join service.webhook_deliveries d on d.id = a.delivery_id where d.endpoint_id = ${e.id}`
      expect(n!.n).toBe(30)
    } finally {
      await a.stop()
      await b.stop()
    }
  })
})
