// Upgrading a database whose deliveries were made before sql/020 (a delivery written once:
// docs/design.md, "Webhook delivery pays for durability once"): every row keeps its id, state and
// schedule, the delivery log reads the same attempts, the fan-out cursor stays where it was, and an
// engine carries on from there.
import { randomBytes, randomUUID } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadMigrations, migrate } from "../../../src/platform/db/migrate.ts"
import { getDelivery } from "../../../src/webhooks/deliveries/deliveries.ts"
import { endpointSecretContext } from "../../../src/platform/db/channels.ts"
import { encryptSecret } from "../../../src/platform/secrets/secrets-key.ts"
import { newSecret } from "../../../src/webhooks/net/signature.ts"
import { ensureDemoAppSchema } from "../../../src/platform/db/demo-schema.ts"
import { startHttpsReceiver, type Receiver } from "../../support/https-receiver.ts"
import { CA, LOOPBACK, at, startEngine, waitFor, type TestDeps } from "../../support/world.ts"
import { useDatabase } from "../../support/fixtures.ts"
import { runSql } from "../../support/sql.ts"

const db = useDatabase({ migrated: false })
let receiver: Receiver
beforeAll(async () => {
  await ensureDemoAppSchema(db.sql)
  receiver = await startHttpsReceiver()
})
afterAll(async () => {
  await receiver?.close()
})

type Attempt = {
  delivery_id: string
  number: number
  status: number | null
  error: string | null
  error_kind: string | null
  duration_ms: number
  response_snippet: string | null
  started_at: Date
}
type Row = {
  id: string
  state: string
  attempts: number
  next_attempt_at: Date | null
  held_reason: string | null
  last_status: number | null
}

describe("upgrading deliveries made before deliveries were written once (sql/020)", () => {
  it("keeps every delivery, its id, state, schedule and attempts; the engine carries on", async () => {
    const before = loadMigrations().filter((m) => m.name < "020")
    await migrate(db.sql, before)
    const deps: TestDeps = { sql: db.sql, secretsKey: randomBytes(32), allowed: LOOPBACK, ca: CA() }
    const company = "0b7b1a52-5f7e-4c1e-9a57-3f0f0a7d1c01"
    await db.sql`insert into service.companies (id, name, host, tier, api_enabled, modules, created_at)
      values (${company}, 'Acme', 'acme.upgrade.test', 'company', true, '{incidents}', now())`
    // As the endpoints of that release were written (today's operation writes later columns too).
    const e = { id: randomUUID() }
    await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
      values (${e.id}, ${company}, 'old', ${receiver.url("/old")}, '{incident.created}',
        ${encryptSecret(deps.secretsKey, newSecret(), endpointSecretContext(e.id))})`
    receiver.reply("/old", { status: 200 })
    const events = await db.sql<{ id: string }[]>`
      insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
      select gen_random_uuid(), ${company}, 'incident.created', 'incidents', gen_random_uuid(), ('0/' || to_hex(4096 + g))::pg_lsn, 0,
        '{"id":"x"}', now() - interval '2 hours'
      from generate_series(1, 4) g returning id::text`
    await db.sql`update service.webhook_fanout set commit_lsn = '0/1004', seq = 0`
    // Due now after a failed attempt; succeeded on the second; due in an hour; held.
    const rows = await db.sql<{ id: string }[]>`
      insert into service.webhook_deliveries (event_id, company_id, event, endpoint_id, origin, state, attempts, next_attempt_at,
        held_reason, last_status, last_error, last_attempt_at, finished_at)
      values
        (${events[0]!.id}, ${company}, 'incident.created', ${e.id}, 'o', 'pending', 1, now() - interval '1 minute', null, 500, 'http 500', now() - interval '16 minutes', null),
        (${events[1]!.id}, ${company}, 'incident.created', ${e.id}, 'o', 'succeeded', 2, null, null, 200, null, now() - interval '1 hour', now() - interval '1 hour'),
        (${events[2]!.id}, ${company}, 'incident.created', ${e.id}, 'o', 'pending', 1, now() + interval '1 hour', null, 503, 'http 503', now() - interval '1 minute', null),
        (${events[3]!.id}, ${company}, 'incident.created', ${e.id}, 'o', 'held', 0, null, 'the endpoint is switched off', null, null, null, null)
      returning id::text`
    const [due, done, later, held] = rows.map((r) => r.id)
    await db.sql`insert into service.webhook_attempts (delivery_id, number, started_at, duration_ms, status, error, error_kind, response_snippet) values
      (${due!}, 1, now() - interval '16 minutes', 12, 500, 'http 500', 'http', 'boom'),
      (${done!}, 1, now() - interval '2 hours', 9, 500, 'http 500', 'http', 'down'),
      (${done!}, 2, now() - interval '1 hour', 7, 200, null, null, 'ok'),
      (${later!}, 1, now() - interval '1 minute', 30, 503, 'http 503', 'http', '')`
    const read = () =>
      Promise.all([
        db.sql<
          Row[]
        >`select id::text, state, attempts, next_attempt_at, held_reason, last_status from service.webhook_deliveries order by id`,
        db.sql<
          Attempt[]
        >`select delivery_id::text, number, status, error, error_kind, duration_ms, response_snippet, started_at
          from service.webhook_attempts order by delivery_id, number`,
        db.sql<{ commit_lsn: string; seq: number }[]>`select commit_lsn::text, seq from service.webhook_fanout`
      ])
    const [rows0, attempts0, cursor0] = await read()

    expect(await migrate(db.sql)).toEqual(
      loadMigrations()
        .filter((m) => m.name >= "020")
        .map((m) => m.name)
    )
    const [rows1, attempts1, cursor1] = await read()
    expect(rows1).toEqual(rows0)
    expect(attempts1).toEqual(attempts0)
    expect(cursor1).toEqual(cursor0)
    const [parts] = await db.sql<{ n: number; same: boolean }[]>`
      select count(*)::int as n, bool_and(commit_lsn = '0/1004' and seq = 0) as same from service.webhook_fanout_parts`
    expect(parts).toEqual({ n: 12, same: true })
    // Only earlier attempts stay in a table of their own; a delivery's latest is in its row.
    const [earlier] = await db.sql<{ n: number }[]>`select count(*)::int as n from service.webhook_earlier_attempts`
    expect(earlier!.n).toBe(1)
    expect(
      (await runSql(deps.sql, getDelivery({ id: done! }))).attemptLog.map((a) => [a.number, a.status, a.response])
    ).toEqual([
      [1, 500, "down"],
      [2, 200, "ok"]
    ])

    // The engine sends the one due now under its id, releases the held one (its endpoint is
    // on), keeps the schedule of the other, and fans out nothing old (the cursor is past
    // every event).
    const engine = await startEngine(deps)
    try {
      await waitFor(
        async () =>
          (
            await db.sql`select 1 from service.webhook_deliveries where id in (${due!}, ${held!}) and state = 'succeeded'`
          ).length === 2,
        "the due and the held delivery"
      )
      expect(
        at(receiver, "/old")
          .map((r) => r.headers["service-delivery"])
          .sort()
      ).toEqual([due, held].sort())
      expect(
        (await runSql(deps.sql, getDelivery({ id: due! }))).attemptLog.map((a) => [a.number, a.status, a.response])
      ).toEqual([
        [1, 500, "boom"],
        [2, 200, ""]
      ])
      const [l] = await db.sql<
        Row[]
      >`select id::text, state, attempts, next_attempt_at, held_reason, last_status from service.webhook_deliveries where id = ${later!}`
      expect(l).toEqual(rows0.find((r) => r.id === later))
    } finally {
      await engine.stop()
    }
  })
})
