// bench/health: how long a destination's delivery health takes to read (the charts of the admin
// pages and the portal, src/webhooks/deliveries/health.ts) for an endpoint and a subscription
// each with BENCH_DELIVERIES deliveries in the 7 days' window, beside other destinations' rows,
// with some deliveries retried (their earlier attempts kept) and some failed. The baseline:
// the bare count of the same rows by the same index, the least any read of them costs.
//
//   npm run bench:health       embedded PostgreSQL in a temporary directory, or BENCH_DATABASE_URL
//   BENCH_DELIVERIES=100000 BENCH_OTHERS=300000 BENCH_RUNS=50 (defaults)
import { randomUUID } from "node:crypto"
import { Effect, Layer } from "effect"
import { Database } from "../src/platform/db/Database.ts"
import { Sql } from "../src/platform/db/Sql.ts"
import { deliveryHealth, healthStatement, windowStart, type Destination } from "../src/webhooks/deliveries/health.ts"
import { makeCompany } from "../test/support/app.ts"
import { benchDatabase, fmt, percentile, table } from "./support.ts"

const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 100_000)
const OTHERS = Number(process.env.BENCH_OTHERS ?? 300_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 50)

const db = await benchDatabase()
const { sql } = db
try {
  const company = await makeCompany(sql)
  await sql`insert into service.companies (id, name, host, tier, api_enabled, modules, created_at)
    values (${company.id}, 'Bench', ${company.host}, 'company', true, array['incidents'], now())
    on conflict (id) do nothing`
  const endpoint = randomUUID()
  const others = [randomUUID(), randomUUID(), randomUUID()]
  for (const id of [endpoint, ...others])
    await sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${id}, ${company.id}, ${`bench ${id}`}, 'https://receiver.test/hooks', array['incident.created'], '\\x00')`
  const [key] = await sql<{ id: string }[]>`
    insert into service.api_keys (company_id, name, fingerprint, scopes, webhooks)
    values (${company.id}, 'bench', ${Buffer.from(randomUUID())}, array['incidents'], true) returning id::text`
  const [sub] = await sql<{ id: string }[]>`
    insert into service.webhook_subscriptions (key_id, company_id, url, event)
    values (${key!.id}, ${company.id}, 'https://receiver.test/sub', 'incident.created') returning id::text`

  const [clock] = await sql<{ now: Date }[]>`select now()`
  const from = windowStart(clock!.now)
  const span = (clock!.now.getTime() - from.getTime()) / 1000
  // n deliveries for one destination, spread evenly over the window: 92% delivered at once, 5%
  // after 2 or 3 attempts, 2% failed 6 times, 1% failed once: waiting for a retry when made in
  // the last 30 hours (the retry schedule's span), else delivered at the second; answers of ~40-400 ms.
  const seed = async (column: "endpoint_id" | "subscription_id", id: string, n: number) => {
    const t0 = performance.now()
    await sql.unsafe(
      `insert into service.webhook_deliveries (id, event_id, company_id, event, ${column}, origin, state, attempts,
         next_attempt_at, created_at, finished_at, last_attempt_at, last_status, last_error, last_duration_ms, last_error_kind)
       select gen_random_uuid(), gen_random_uuid(), $1, 'incident.created', $2, 'receiver.test:443', s.state, s.attempts,
         case when s.state = 'pending' then t + interval '1 hour' end, t, case when s.state <> 'pending' then t end, t,
         case when s.state = 'succeeded' then 200 else 503 end, case when s.state = 'succeeded' then null else 'http 503' end,
         (40 + 360 * random() * random())::int, case when s.state = 'succeeded' then null else 'http' end
       from (select $3::timestamptz + (g * $5::float8 / $4) * interval '1 second' as t, g from generate_series(0, $4 - 1) g) x,
       lateral (select case when g % 100 < 92 then 'succeeded' when g % 100 < 97 then 'succeeded'
                            when g % 100 < 99 then 'failed' when t > now() - interval '30 hours' then 'pending'
                            else 'succeeded' end as state,
                       case when g % 100 < 92 then 1 when g % 100 < 97 then 2 + g % 2
                            when g % 100 < 99 then 6 when t > now() - interval '30 hours' then 1 else 2 end as attempts) s`,
      [company.id, id, from.toISOString(), n, span]
    )
    // The earlier attempts of deliveries that took more than one.
    await sql.unsafe(
      `insert into service.webhook_earlier_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind)
       select d.id, k, d.created_at, (40 + 360 * random())::int, 503, 'http 503', 'http'
       from service.webhook_deliveries d, generate_series(1, d.attempts - 1) k
       where d.${column} = $1 and d.attempts > 1`,
      [id]
    )
    return performance.now() - t0
  }
  let seeded = 0
  seeded += await seed("endpoint_id", endpoint, DELIVERIES)
  seeded += await seed("subscription_id", sub!.id, DELIVERIES)
  for (const other of others) seeded += await seed("endpoint_id", other, Math.round(OTHERS / others.length))
  await sql`vacuum analyze service.webhook_deliveries`
  await sql`vacuum analyze service.webhook_earlier_attempts`
  console.log(
    `seeded ${fmt(DELIVERIES)} deliveries to the endpoint, ${fmt(DELIVERIES)} to the subscription, ${fmt(OTHERS)} to 3 other endpoints, in ${fmt(seeded / 1000, 1)} s`
  )

  const layer = Sql.layer.pipe(Layer.provide(Layer.succeed(Database, { sql, url: db.url, embedded: true })))
  const health = (d: Destination) => Effect.runPromise(deliveryHealth(d).pipe(Effect.provide(layer)))
  const bare = (column: string, id: string) =>
    sql.unsafe(`select count(*) from service.webhook_deliveries where ${column} = $1 and created_at >= $2`, [
      id,
      from.toISOString()
    ])
  const time = async (run: () => Promise<unknown>) => {
    for (let i = 0; i < 3; i++) await run() // warm: plans, buffers
    const ms: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      const t0 = performance.now()
      await run()
      ms.push(performance.now() - t0)
    }
    return ms.sort((a, b) => a - b)
  }
  const rows: Array<Array<string>> = [["read", "p50 ms", "p95 ms", "max ms"]]
  const row = (name: string, ms: ReadonlyArray<number>) =>
    rows.push([name, fmt(percentile(ms, 50), 1), fmt(percentile(ms, 95), 1), fmt(ms[ms.length - 1]!, 1)])
  if (process.env.BENCH_EXPLAIN === "1") {
    const plan = await sql.unsafe(
      `explain (analyze, buffers) ${healthStatement(`d.endpoint_id = $2 and d.created_at >= $3::timestamptz`)}`,
      [from.getTime() / 1000, endpoint, from.toISOString()]
    )
    console.log(plan.map((r) => r["QUERY PLAN"]).join("\n"))
  }
  // The first read of a destination reads every hour live and keeps the finished ones.
  const once = async (d: Destination) => {
    await sql`delete from service.webhook_health_hours`
    const t0 = performance.now()
    await health(d)
    return performance.now() - t0
  }
  const cold = async (d: Destination) => {
    const ms: Array<number> = []
    for (let i = 0; i < Math.min(RUNS, 10); i++) ms.push(await once(d))
    await health(d)
    return ms.sort((a, b) => a - b)
  }
  row("health, endpoint, first read", await cold({ endpointId: endpoint }))
  row("health, endpoint", await time(() => health({ endpointId: endpoint })))
  row("  baseline: count(*) of its rows", await time(() => bare("endpoint_id", endpoint)))
  row("health, subscription, first read", await cold({ subscriptionId: sub!.id }))
  row("health, subscription", await time(() => health({ subscriptionId: sub!.id })))
  row("  baseline: count(*) of its rows", await time(() => bare("subscription_id", sub!.id)))
  const e = await health({ endpointId: endpoint })
  table(rows)
  const w = e.week.total
  console.log(
    `the endpoint's 7 days: ${fmt(w.counts.succeeded)} succeeded, ${fmt(w.counts.retried)} retried, ${fmt(w.counts.failed)} failed, ${fmt(w.counts.waiting)} waiting; ${fmt(w.attempts)} attempts, p50 ${w.p50} ms, p95 ${w.p95} ms`
  )
} finally {
  await db.close()
}
