// A destination's rate (deliveries per second): live deliveries, their retries and a replay
// of them all keep to it, to a real HTTPS receiver. Only lower bounds on time are asserted
// (never faster than the rate), which a slow machine cannot break.
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Sql } from "../../../src/platform/db/Sql.ts"
import { startReplay } from "../../../src/webhooks/replay/manage.ts"
import { insertIncident } from "../../support/app.ts"
import type { RecordedRequest } from "../../support/https-receiver.ts"
import { addEndpoint, ADMIN, at, deliveries, startEngine, useEngineWorld, waitFor } from "../../support/world.ts"

const s = useEngineWorld()

/**
 * The least gap between two recorded starts at 5 a second (200 ms), less the send path's
 * jitter (a start is recorded a moment after the scheduler lets it go); unpaced, starts would be
 * a few ms apart. Over all of them the jitter does not add up: the span is checked to the rate.
 */
const PACED_GAP = 150

/** Gaps between consecutive times, in ms. */
const gaps = (ms: ReadonlyArray<number>) => {
  const times = [...ms].sort((a, b) => a - b)
  return times.slice(1).map((t, i) => t - times[i]!)
}

/** When each attempt to the endpoint started, as the engine recorded it. */
const starts = async (endpointId: string) =>
  (
    await s.w.db.sql<{ started_at: Date }[]>`
      select a.started_at from service.webhook_attempts a join service.webhook_deliveries d on d.id = a.delivery_id
      where d.endpoint_id = ${endpointId}`
  ).map((a) => a.started_at.getTime())

/** Arrivals at the receiver: a request's own time varies (a new connection's handshake), never by a whole interval. */
const arrivals = (rs: ReadonlyArray<RecordedRequest>) => rs.map((r) => r.arrivedAt)

describe("a destination's rate", () => {
  it("live deliveries, retries and a replay all keep to it", { timeout: 60_000 }, async () => {
    const path = "/paced"
    // Every delivery's first request fails: each is retried, at the same rate.
    const seen = new Set<string>()
    s.w.receiver.reply(path, (r) => {
      const id = String(r.headers["service-delivery"])
      if (seen.has(id)) return { status: 200 }
      seen.add(id)
      return { status: 500 }
    })
    const e = await addEndpoint(s.w, path, { name: "paced", rateLimit: 5 })
    s.engine = await startEngine(s.w.deps, { retrySchedule: "100ms,100ms,100ms,100ms,100ms", replayRate: 100 })
    for (let i = 0; i < 6; i++) await insertIncident(s.w.db.sql, s.w.company.id)
    await waitFor(
      async () =>
        (await deliveries(s.w.db.sql)).filter((d) => d.endpoint_id === e.id && d.state === "succeeded").length === 6,
      "6 delivered",
      20_000
    )
    const live = at(s.w.receiver, path)
    expect(live).toHaveLength(12)
    // 5 a second: attempts are let go at least 200 ms apart. Each records its start a moment
    // after it was let go (the send path's own work, a few ms on a busy machine), so two
    // recorded starts may read a little less; unpaced, they would be a few ms apart.
    const liveStarts = await starts(e.id)
    expect(liveStarts).toHaveLength(12)
    for (const g of gaps(liveStarts)) expect(g).toBeGreaterThanOrEqual(PACED_GAP)
    const span = (ms: ReadonlyArray<number>) => Math.max(...ms) - Math.min(...ms)
    expect(span(liveStarts)).toBeGreaterThanOrEqual(11 * 200 - 50)
    expect(span(arrivals(live))).toBeGreaterThanOrEqual(11 * 200 - 200)

    // A replay of all six, the lane handing over 100 a second: still 5 a second to the receiver.
    const started = await Effect.runPromise(
      startReplay(ADMIN, s.w.company.id, "api", { endpointId: e.id }).pipe(Effect.provide(Sql.fromPool(s.w.db.sql)))
    )
    expect("replay" in started).toBe(true)
    await waitFor(() => at(s.w.receiver, path).length === 18, "6 replayed", 20_000)
    const replayed = at(s.w.receiver, path).slice(12)
    const all = await waitFor(async () => {
      const st = await starts(e.id)
      return st.length === 18 ? st : null
    }, "the replay's attempts recorded")
    for (const g of gaps(all)) expect(g).toBeGreaterThanOrEqual(PACED_GAP)
    expect(span(arrivals(replayed))).toBeGreaterThanOrEqual(5 * 200 - 200)
  })
})
