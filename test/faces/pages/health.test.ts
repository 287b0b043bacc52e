// Delivery health on the admin pages, over HTTP: an endpoint with deliveries of known outcomes
// and attempt times shows those counts in its charts (the SVG's bars, the legend and the table
// of figures agree), and the status page shows capture's lag and the quarantine's count.
import { randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { niceCountMax, niceMax } from "../../../src/faces/pages/charts.ts"
import { formatSeconds } from "../../../src/faces/pages/status.ts"
import { makeToken } from "../../support/http.ts"
import type { TestServer } from "../../support/server.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { startWebServer, webClient, type WebClient } from "../../support/pages.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("pure", () => {
  it("axes top at 1, 2 or 5 times a power of ten", () => {
    expect([0, 1, 3, 7, 10, 11, 240, 999].map(niceMax)).toEqual([1, 1, 5, 10, 10, 20, 500, 1000])
    // Counts' axes halve to whole numbers.
    expect([0, 1, 3, 5, 11, 30, 240, 999].map(niceCountMax)).toEqual([2, 2, 4, 10, 20, 40, 400, 1000])
  })
  it("durations read as people say them", () => {
    expect([4, 200, 3600, 7500].map(formatSeconds)).toEqual(["4 s", "3 min 20 s", "1 h", "2 h 5 min"])
  })
})

describe("delivery health and status on the admin pages", () => {
  const db = useDatabase()
  let server: TestServer
  let acme: TestCompany
  let client: WebClient
  const endpoint = randomUUID()

  /** A delivery as the engine leaves it, made `hours` ago; its latest attempt in its row, earlier ones apart. */
  const delivery = async (hours: number, state: string, times: ReadonlyArray<number>) => {
    const id = randomUUID()
    await db.sql.unsafe(
      `insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, origin, state, attempts,
         next_attempt_at, created_at, finished_at, last_attempt_at, last_status, last_duration_ms)
       values ($1, gen_random_uuid(), $2, 'incident.created', $3, 'receiver.test:443', $4, $5,
         case when $4 = 'pending' then now() + interval '1 hour' end, now() - $6 * interval '1 hour',
         case when $4 in ('succeeded', 'failed') then now() end, now(), 200, $7)`,
      [id, acme.id, endpoint, state, times.length, hours, times[times.length - 1] ?? null]
    )
    for (let i = 0; i < times.length - 1; i++)
      await db.sql`insert into service.webhook_earlier_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind)
        values (${id}, ${i + 1}, now(), ${times[i]!}, 503, 'http 503', 'http')`
  }

  beforeAll(async () => {
    server = await startWebServer(db.url)
    acme = await createCompany(db.sql)
    await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${endpoint}, ${acme.id}, 'Charted', 'https://receiver.test/hooks', array['incident.created'], '\\x00')`
    // Two hours ago: 5 delivered at once (100 ms each), 2 after a retry, 1 failed every attempt.
    for (let i = 0; i < 5; i++) await delivery(2, "succeeded", [100])
    for (let i = 0; i < 2; i++) await delivery(2, "succeeded", [3000, 100])
    await delivery(2, "failed", [400, 400, 400])
    // Three days ago: 4 delivered at once; outside the 24 hours, inside the week.
    for (let i = 0; i < 4; i++) await delivery(72, "succeeded", [100])
    const t = await makeToken(db, acme, "health test")
    client = webClient(server.url)
    expect((await client.signIn(t.token)).status).toBe(303)
  })
  afterAll(async () => {
    await server?.close()
  })

  const totalOf = (page: string, chart: string, outcome: string) => {
    const section = page.slice(page.indexOf(`id="${chart}"`))
    const m = new RegExp(`data-total="${outcome}">([^<]*)<`).exec(section)
    return m?.[1]
  }
  const barsOf = (page: string, chart: string) => {
    const section = page.slice(page.indexOf(`id="${chart}"`), page.indexOf("</svg>", page.indexOf(`id="${chart}"`)))
    const sums: Record<string, number> = {}
    for (const m of section.matchAll(/data-outcome="(\w+)" data-count="(\d+)"/g))
      sums[m[1]!] = (sums[m[1]!] ?? 0) + Number(m[2])
    return sums
  }

  it("an endpoint's page charts its deliveries of 24 hours and 7 days by outcome, and their answer times", async () => {
    const page = await client.get(`/admin/webhooks/endpoints/${endpoint}`)
    expect(page.status).toBe(200)
    expect(page.text).toContain('<h2 id="health-heading">Delivery health</h2>')
    expect(barsOf(page.text, "health-day")).toEqual({ succeeded: 5, retried: 2, failed: 1 })
    expect(barsOf(page.text, "health-week")).toEqual({ succeeded: 9, retried: 2, failed: 1 })
    for (const [chart, counts] of [
      ["health-day", { succeeded: "5", retried: "2", failed: "1", waiting: "0" }],
      ["health-week", { succeeded: "9", retried: "2", failed: "1", waiting: "0" }]
    ] as const)
      for (const [o, n] of Object.entries(counts)) expect(totalOf(page.text, chart, o)).toBe(n)
    // 5 + 4 + 3 attempts in the day: 7 of 100 ms, 3 of 400 (failed), 2 of 3000 (timed out, then
    // retried); each time shown as the top of its 4% bucket.
    const said = /Over 12 attempts: half answered within ([\d,]+) ms, 95% within ([\d,]+) ms\./.exec(page.text)
    expect(said).not.toBeNull()
    const [p50, p95] = [Number(said![1]!.replace(",", "")), Number(said![2]!.replace(",", ""))]
    expect(p50).toBeGreaterThanOrEqual(100)
    expect(p50).toBeLessThanOrEqual(104)
    expect(p95).toBeGreaterThanOrEqual(3000)
    expect(p95).toBeLessThanOrEqual(3120)
    // The figures as a table too, and the bars' own titles say what they count.
    expect(page.text).toMatch(
      /<tfoot><tr><th scope="row">All<\/th><td class="num">5<\/td><td class="num">2<\/td><td class="num">1<\/td>/
    )
    expect(page.text).toMatch(/<title>[0-9-]+ [0-9]{2}:00 UTC: 5 succeeded<\/title>/)
    // Server-rendered: no script draws it (the pages' one script is the shared app.js).
    expect(page.text.match(/<script/g)).toHaveLength(1)
  })

  it("a subscription a key made has a page of its own with its charts", async () => {
    const [key] = await db.sql<{ id: string }[]>`
      insert into service.api_keys (company_id, name, fingerprint, scopes, webhooks)
      values (${acme.id}, 'Zapier', ${Buffer.from(randomUUID())}, array['incidents'], true) returning id::text`
    const [sub] = await db.sql<{ id: string }[]>`
      insert into service.webhook_subscriptions (key_id, company_id, url, event)
      values (${key!.id}, ${acme.id}, 'https://receiver.test/zap', 'incident.created') returning id::text`
    for (const state of ["succeeded", "succeeded", "failed"])
      await db.sql`insert into service.webhook_deliveries (id, event_id, company_id, event, subscription_id, origin, state,
          attempts, created_at, finished_at, last_attempt_at, last_duration_ms)
        values (gen_random_uuid(), gen_random_uuid(), ${acme.id}, 'incident.created', ${sub!.id}, 'receiver.test:443',
          ${state}, ${state === "failed" ? 6 : 1}, now(), now(), now(), 120)`
    const list = await client.get("/admin/webhooks")
    expect(list.text).toContain(`href="/admin/webhooks/subscriptions/${sub!.id}"`)
    const page = await client.get(`/admin/webhooks/subscriptions/${sub!.id}`)
    expect(page.status).toBe(200)
    expect(page.text).toContain("<dt>Key</dt><dd>Zapier</dd>")
    expect(barsOf(page.text, "health-day")).toEqual({ succeeded: 2, failed: 1 })
    expect(totalOf(page.text, "health-week", "failed")).toBe("1")
    expect((await client.get(`/admin/webhooks/subscriptions/${randomUUID()}`)).status).toBe(404)
  })

  it("another company's endpoint shows no charts: 404", async () => {
    const other = await createCompany(db.sql)
    const theirs = randomUUID()
    await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${theirs}, ${other.id}, 'Theirs', 'https://receiver.test/x', array['incident.created'], '\\x00')`
    const page = await client.get(`/admin/webhooks/endpoints/${theirs}`)
    expect(page.status).toBe(404)
    expect(page.text).not.toContain("Delivery health")
  })

  it("the status page shows capture's lag and how many records the quarantine holds", async () => {
    let page = await client.get("/admin/status")
    expect(page.status).toBe(200)
    expect(page.text).toContain('<a href="/admin/status" aria-current="page">Status</a>')
    expect(page.text).toMatch(/id="quarantine-count" data-count="0"/)
    expect(page.text).toContain('id="capture-lag"')
    await db.sql`insert into service.capture_quarantine (company_id, lsn, tbl, key, error)
      values (${acme.id}, '0/1', 'incidents', '["1"]', 'score out of range'), (null, '0/1', 'incidents', '["2"]', 'bad')`
    page = await client.get("/admin/status")
    expect(page.text).toMatch(/id="quarantine-count" data-count="2"/)
    expect(page.text).toContain("(1 of your company's)")
  })
})
