// The operator's status: capture, outbox backlog, deliveries due and failing, endpoints
// switched off and why, keys near expiry; from the library and from the real CLI.
import { hostname } from "node:os"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { operationsStatus } from "../../src/operations/status.ts"
import { createEndpoint } from "../../src/webhooks/endpoints.ts"
import { insertIncident } from "../support/app.ts"
import { runCli } from "../admin/run-cli.ts"
import { ADMIN, fanoutNow, makeKey, startWorld, waitFor, type World } from "../webhooks/support.ts"

const DAY = 86_400_000
let w: World
const slot = () => `slot_${w.db.name}`

beforeAll(async () => {
  w = await startWorld()
})
afterAll(async () => {
  await w?.close()
})

describe("status", () => {
  it("reports capture, backlog, deliveries, endpoints switched off and keys near expiry", async () => {
    await waitFor(() => w.cap.stats.streaming, "capture to stream")
    const empty = await operationsStatus(w.db.sql, slot())
    expect(empty.capture).toMatchObject({ slot: slot(), slotExists: true, slotActive: true, leaderRunning: true, gapReason: null })
    expect(empty.capture.lagBytes).toBeGreaterThanOrEqual(0)
    // who leads: the lock's session, named by the leader after its host and process id
    expect(empty.capture.leader).toMatchObject({ pid: expect.any(Number), applicationName: `safety-records-service capture leader ${hostname()}:${process.pid}` })
    expect(Date.parse(empty.capture.leader!.since!)).toBeLessThanOrEqual(Date.now())
    expect(empty.outbox.backlog).toBe(0)
    expect(empty.endpointsSwitchedOff).toEqual([])
    expect(empty.keysNearExpiry).toEqual([])

    await createEndpoint(w.deps, ADMIN, { companyId: w.company.id, name: "On", url: w.receiver.url("/on"), events: ["incident.created"] })
    const off = await createEndpoint(w.deps, ADMIN, { companyId: w.company.id, name: "Off", url: w.receiver.url("/off"), events: ["incident.created"] })
    // as the engine switches one off
    await w.db.sql`update service.webhook_endpoints set enabled = false, disabled_at = now(),
      disabled_reason = '15 deliveries in a row failed every attempt; last error: 503' where id = ${off.id}`
    const soon = await makeKey(w.db.sql, w.company.id, { expiresAt: new Date(Date.now() + 3 * DAY) })
    await makeKey(w.db.sql, w.company.id, { expiresAt: new Date(Date.now() + 40 * DAY) })
    await makeKey(w.db.sql, w.company.id, { expiresAt: null })
    await insertIncident(w.db.sql, w.company.id)
    await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()

    // no engine runs: the events wait in the outbox
    const waiting = await operationsStatus(w.db.sql, slot())
    expect(waiting.outbox.backlog).toBe(2)
    expect(waiting.outbox.oldestBacklogAt).not.toBeNull()
    expect(waiting.endpointsSwitchedOff).toEqual([
      expect.objectContaining({ id: off.id, name: "Off", reason: "15 deliveries in a row failed every attempt; last error: 503", held: 0 })
    ])
    expect(waiting.keysNearExpiry.map((k) => k.id)).toEqual([soon])

    // fanned out: due now (only the endpoint that is on gets deliveries)
    await fanoutNow(w.db.sql)
    const due = await operationsStatus(w.db.sql, slot())
    expect(due.outbox.backlog).toBe(0)
    expect(due.deliveries).toMatchObject({ due: 2, scheduled: 0, inFlight: 0, failing: 0, held: 0, failedLast24h: 0 })
    // one failed attempt with a retry later, one held, one failed for good
    const ids = (await w.db.sql<{ id: string }[]>`select id::text from service.webhook_deliveries order by created_at, id`).map((r) => r.id)
    await w.db.sql`update service.webhook_deliveries set attempts = 1, next_attempt_at = now() + interval '1 hour' where id = ${ids[0]!}`
    await w.db.sql`update service.webhook_deliveries set state = 'failed', attempts = 6, next_attempt_at = null, finished_at = now() where id = ${ids[1]!}`
    const mixed = await operationsStatus(w.db.sql, slot())
    expect(mixed.deliveries).toMatchObject({ due: 0, scheduled: 1, failing: 1, failedLast24h: 1 })

    // the CLI shows the same, for scripts and for people
    const env = { DATABASE_URL: w.db.url, REPLICATION_SLOT: slot() }
    const j = await runCli(["status", "--json"], env)
    expect(j.stderr).toBe("")
    expect(j.code).toBe(0)
    const answer = JSON.parse(j.stdout)
    expect(Object.keys(answer)).toEqual(["at", "capture", "outbox", "deliveries", "endpointsSwitchedOff", "keysNearExpiry"])
    expect(answer.capture).toMatchObject({ slot: slot(), slotExists: true, leaderRunning: true, leader: empty.capture.leader })
    expect(answer.deliveries).toEqual(mixed.deliveries)
    expect(answer.endpointsSwitchedOff[0].id).toBe(off.id)
    const text = await runCli(["status"], env)
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(new RegExp(`leader: +safety-records-service capture leader ${hostname()}:${process.pid}, backend pid ${empty.capture.leader!.pid}`))
    expect(text.stdout).toContain("Endpoints switched off: 1")
    expect(text.stdout).toContain("15 deliveries in a row failed every attempt")
    expect(text.stdout).toContain("Keys expiring within 14 days: 1")
    // like every command it accepts --as <admin e-mail>, and refuses one that names no admin
    await w.db.sql`insert into app.users (company_id, name, email, role) values
      (${w.company.id}, 'Olu Operator', 'olu@status.test', 'admin'), (${w.company.id}, 'Wes Worker', 'wes@status.test', 'member')`
    expect((await runCli(["status", "--as", "olu@status.test", "--json"], env)).code).toBe(0)
    const notAdmin = await runCli(["status", "--as", "wes@status.test"], env)
    expect(notAdmin.code).toBe(1)
    expect(notAdmin.stderr).toContain("wes@status.test is not an admin")

    // capture stopped: no leader, slot inactive
    await w.cap.stop()
    const stopped = await operationsStatus(w.db.sql, slot())
    expect(stopped.capture).toMatchObject({ slotExists: true, slotActive: false, leaderRunning: false, leader: null })
    expect((await runCli(["status"], env)).stdout).toMatch(/leader: +no leader: no capture process is running/)
  })
})
