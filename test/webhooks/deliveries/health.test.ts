// A destination's delivery health (docs/events.md#delivery-health): the counts and times a
// chart shows, read from delivery rows written as the engine writes them; the hours kept once
// finished (sql/070), read again after a Send Again, and an open delivery followed until it
// finishes.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import {
  deliveryHealth,
  percentileOf,
  windowStart,
  type DeliveryHealth
} from "../../../src/webhooks/deliveries/health.ts"
import { freshDatabase, type TestDatabase } from "../../support/db.ts"
import { runSql } from "../../support/sql.ts"

describe("pure", () => {
  it("percentiles are the nearest rank of the histogram", () => {
    const h = new Map([
      [10, 50],
      [100, 45],
      [1000, 5]
    ])
    expect(percentileOf(h, 0.5)).toBe(10)
    expect(percentileOf(h, 0.51)).toBe(100)
    expect(percentileOf(h, 0.95)).toBe(100)
    expect(percentileOf(h, 0.96)).toBe(1000)
    expect(percentileOf(new Map(), 0.5)).toBeNull()
  })

  it("the week starts at midnight UTC six days before today", () => {
    expect(windowStart(new Date("2026-03-10T13:45:00Z")).toISOString()).toBe("2026-03-04T00:00:00.000Z")
    expect(windowStart(new Date("2026-03-10T00:00:00Z")).toISOString()).toBe("2026-03-04T00:00:00.000Z")
  })
})

describe("read from the delivery log", () => {
  let db: TestDatabase
  const endpoint = randomUUID()
  const company = randomUUID()
  const hoursAgo = (h: number) => `now() - interval '${h} hours'`

  /** A delivery as the engine leaves it: state, attempts, and its latest attempt in its row; earlier ones apart. */
  const delivery = async (
    created: string,
    state: "succeeded" | "failed" | "pending" | "held",
    attempts: number,
    times: ReadonlyArray<number> = [],
    errorKind: string | null = null
  ) => {
    const id = randomUUID()
    const last = times[times.length - 1] ?? null
    await db.sql.unsafe(
      `insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, origin, state, attempts,
         next_attempt_at, created_at, finished_at, last_attempt_at, last_duration_ms, last_error_kind)
       values ($1, gen_random_uuid(), $2, 'incident.created', $3, 'receiver.test:443', $4, $5,
         case when $4 = 'pending' then now() + interval '1 hour' end, ${created},
         case when $4 in ('succeeded', 'failed') then ${created} end, case when $6::int is not null then ${created} end, $6, $7)`,
      [id, company, endpoint, state, attempts, last, errorKind]
    )
    for (let i = 0; i < times.length - 1; i++)
      await db.sql`insert into service.webhook_earlier_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind)
        values (${id}, ${i + 1}, now(), ${times[i]!}, 503, 'http 503', 'http')`
    return id
  }
  const health = () => runSql(db.sql, deliveryHealth({ endpointId: endpoint }))
  const kept = () =>
    db.sql<{ hour: Date; succeeded: number; open: string[] }[]>`
      select hour, succeeded, open::text[] as open from service.webhook_health_hours where destination_id = ${endpoint} order by hour`
  const totals = (h: DeliveryHealth) => h.day.total.counts

  let failedId: string
  let openId: string
  beforeAll(async () => {
    db = await freshDatabase()
    // Three hours ago: 3 at the first attempt (50, 60, 70 ms), 1 after a retry (a 9000 ms
    // timeout, then 80 ms), 1 failed (6 attempts of 200 ms), 1 waiting for its retry (a 300
    // ms failure), 1 not sent by an open circuit. Now: 1 not attempted yet.
    for (const ms of [50, 60, 70]) await delivery(hoursAgo(3), "succeeded", 1, [ms])
    await delivery(hoursAgo(3), "succeeded", 2, [9000, 80])
    failedId = await delivery(hoursAgo(3), "failed", 6, [200, 200, 200, 200, 200, 200])
    openId = await delivery(hoursAgo(3), "pending", 1, [300])
    await delivery(hoursAgo(3), "pending", 1, [0], "circuit")
    await delivery("now()", "pending", 0)
    // Eight days ago: outside the week.
    await delivery(hoursAgo(24 * 8), "failed", 1, [100])
  })
  afterAll(() => db?.drop())

  it("counts each delivery by its outcome now, and times its attempts", async () => {
    const h = await health()
    expect(totals(h)).toEqual({ succeeded: 3, retried: 3, failed: 1, waiting: 1 })
    expect(h.week.total.counts).toEqual(totals(h))
    // 3 + 2 + 6 + 1 attempts timed; the one an open circuit kept back is not.
    expect(h.day.total.attempts).toBe(12)
    // Each the top of the 4% bucket the exact value falls in: never below it, at most 4% above.
    expect(h.day.total.p50).toBeGreaterThanOrEqual(200)
    expect(h.day.total.p50).toBeLessThanOrEqual(200 * 1.04)
    expect(h.day.total.p95).toBeGreaterThanOrEqual(9000)
    expect(h.day.total.p95).toBeLessThanOrEqual(9000 * 1.04)
    expect(h.day.buckets).toHaveLength(24)
    expect(h.week.buckets).toHaveLength(7)
    const threeHoursAgo = h.day.buckets[h.day.buckets.length - 4]!
    expect(threeHoursAgo.counts).toEqual({ succeeded: 3, retried: 3, failed: 1, waiting: 0 })
    expect(h.day.buckets[h.day.buckets.length - 1]!.counts.waiting).toBe(1)
  })

  it("keeps each past hour once: its finished deliveries, and the ids of those still open", async () => {
    const rows = await kept()
    // Every past hour of the week, the empty ones too; not the hour under way.
    expect(rows.length).toBeGreaterThan(140)
    const busy = rows.filter((r) => r.succeeded > 0)
    expect(busy).toHaveLength(1)
    expect(busy[0]!.open).toHaveLength(2)
    expect(busy[0]!.open).toContain(openId)
    // Read again from what was kept: the same.
    expect(totals(await health())).toEqual({ succeeded: 3, retried: 3, failed: 1, waiting: 1 })
  })

  it("follows an open delivery until it finishes, then keeps it", async () => {
    await db.sql`update service.webhook_deliveries set state = 'succeeded', attempts = 2, next_attempt_at = null,
      finished_at = now() where id = ${openId}`
    const h = await health()
    expect(totals(h)).toEqual({ succeeded: 3, retried: 3, failed: 1, waiting: 1 })
    const busy = (await kept()).filter((r) => r.succeeded > 0)
    expect(busy[0]!.open).toHaveLength(1)
    expect(busy[0]!.open).not.toContain(openId)
  })

  it("reads an hour again once a finished delivery in it is sent again", async () => {
    // An hour kept before the window moved past it: dropped when hours are kept next.
    await db.sql`insert into service.webhook_health_hours (destination_id, hour, succeeded, retried, failed, times, open)
      values (${endpoint}, date_bin('1 hour', now() - interval '8 days', 'epoch'), 0, 0, 1, '{}', '{}')`
    expect((await kept()).filter((r) => r.hour < windowStart(new Date()))).toHaveLength(1)
    // As Send Again leaves it (src/webhooks/deliveries/deliveries.ts): pending, due at once.
    await db.sql`update service.webhook_deliveries set state = 'pending', next_attempt_at = 'epoch', manual = true,
      finished_at = null where id = ${failedId}`
    expect((await kept()).filter((r) => r.succeeded > 0)).toHaveLength(0)
    const h = await health()
    expect(totals(h)).toEqual({ succeeded: 3, retried: 4, failed: 0, waiting: 1 })
    // Kept anew, with the delivery sent again among the open ones.
    const busy = (await kept()).filter((r) => r.succeeded > 0)
    expect(busy).toHaveLength(1)
    expect(busy[0]!.open).toContain(failedId)
    const from = windowStart(new Date(h.at))
    expect((await kept()).filter((r) => r.hour < from)).toEqual([])
  })

  it("a destination deleted takes its hours with it", async () => {
    await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${endpoint}, ${company}, 'gone', 'https://receiver.test/', array['incident.created'], '\\x00')`
    await db.sql`delete from service.webhook_endpoints where id = ${endpoint}`
    expect(await kept()).toHaveLength(0)
  })

  it("an id that is not a UUID is no destination", async () => {
    await expect(runSql(db.sql, deliveryHealth({ endpointId: "nope" }))).rejects.toMatchObject({ _tag: "NotFound" })
  })
})
