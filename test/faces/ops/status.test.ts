// The operator's status: the releases, capture, outbox backlog, deliveries due and failing,
// endpoints switched off and why, keys near expiry; from the library and from the real CLI.
import { hostname } from "node:os"
import { describe, expect, it } from "vitest"
import { assessStatus, operationsStatus, type OperationsStatus } from "../../../src/faces/ops/status.ts"
import { loadMigrations } from "../../../src/platform/db/migrations.ts"
import { RELEASE } from "../../../src/platform/release.ts"
import { insertIncident } from "../../support/app.ts"
import { runCli } from "../../support/cli.ts"
import { addEndpoint, fanoutNow, makeKey, useWorld, waitFor } from "../../support/world.ts"
import { startCapture } from "../../support/capture.ts"
import { freshDatabase } from "../../support/db.ts"
import { freePort } from "../../support/net.ts"
import { runSql } from "../../support/sql.ts"

const DAY = 86_400_000
const w = useWorld()
const slot = () => `slot_${w.db.name}`

describe("status", () => {
  it("reports capture, backlog, deliveries, endpoints switched off and keys near expiry", async () => {
    await waitFor(() => w.cap.stats.streaming, "capture to stream")
    const empty = await runSql(w.db.sql, operationsStatus(slot()))
    expect(empty.capture).toMatchObject({
      slot: slot(),
      slotExists: true,
      slotActive: true,
      leaderRunning: true,
      gapReason: null
    })
    expect(empty.capture.lagBytes).toBeGreaterThanOrEqual(0)
    // who leads: the lock's session, named by the leader after its host and process id
    expect(empty.capture.leader).toMatchObject({
      pid: expect.any(Number),
      applicationName: `safety-records-service capture leader ${hostname()}:${process.pid}`
    })
    expect(Date.parse(empty.capture.leader!.since!)).toBeLessThanOrEqual(Date.now())
    expect(empty.outbox.backlog).toBe(0)
    expect(empty.endpointsSwitchedOff).toEqual([])
    expect(empty.keysNearExpiry).toEqual([])

    await addEndpoint(w, "/on", { name: "On" })
    const off = await addEndpoint(w, "/off", { name: "Off" })
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
    const waiting = await runSql(w.db.sql, operationsStatus(slot()))
    expect(waiting.outbox.backlog).toBe(2)
    expect(waiting.outbox.oldestBacklogAt).not.toBeNull()
    expect(waiting.endpointsSwitchedOff).toEqual([
      expect.objectContaining({
        id: off.id,
        name: "Off",
        reason: "15 deliveries in a row failed every attempt; last error: 503",
        held: 0
      })
    ])
    expect(waiting.keysNearExpiry.map((k) => k.id)).toEqual([soon])

    // fanned out: due now (only the endpoint that is on gets deliveries)
    await fanoutNow(w.db.sql)
    const due = await runSql(w.db.sql, operationsStatus(slot()))
    expect(due.outbox.backlog).toBe(0)
    expect(due.deliveries).toMatchObject({ due: 2, scheduled: 0, inFlight: 0, failing: 0, held: 0, failedLast24h: 0 })
    // one failed attempt with a retry later, one held, one failed for good
    const ids = (
      await w.db.sql<{ id: string }[]>`select id::text from service.webhook_deliveries order by created_at, id`
    ).map((r) => r.id)
    await w.db
      .sql`update service.webhook_deliveries set attempts = 1, next_attempt_at = now() + interval '1 hour' where id = ${ids[0]!}`
    await w.db
      .sql`update service.webhook_deliveries set state = 'failed', attempts = 6, next_attempt_at = null, finished_at = now() where id = ${ids[1]!}`
    const mixed = await runSql(w.db.sql, operationsStatus(slot()))
    expect(mixed.deliveries).toMatchObject({ due: 0, scheduled: 1, failing: 1, failedLast24h: 1 })

    // the CLI shows the same, for scripts and for people
    const env = { DATABASE_URL: w.db.url, REPLICATION_SLOT: slot() }
    const j = await runCli(["status", "--json"], env)
    expect(j.stderr).toBe("")
    // an endpoint is switched off: degraded
    expect(j.code).toBe(1)
    const answer = JSON.parse(j.stdout)
    expect(Object.keys(answer)).toEqual([
      "at",
      "release",
      "capture",
      "outbox",
      "deliveries",
      "endpointsSwitchedOff",
      "replays",
      "keysNearExpiry",
      "readReplicas",
      "health"
    ])
    expect(answer.readReplicas).toEqual([]) // READ_DATABASE_URL unset (test/platform/db/read-replicas.test.ts has some)
    // No service process runs here (test/service/schema-fence.test.ts lists one); the releases are this tool's and the database's.
    const lastRaise = loadMigrations().findLast((m) => m.fence !== null)!
    expect(answer.release).toEqual({
      version: RELEASE.version,
      generation: RELEASE.generation,
      database: {
        generation: RELEASE.generation,
        // The last migration that raised the fence says which release it asks for.
        oldestWriter: lastRaise.fence,
        raisedBy: lastRaise.name,
        changedAt: expect.any(String)
      },
      processes: []
    })
    expect(answer.replays).toEqual([]) // none running (test/faces/admin-api/replays.test.ts shows one)
    expect(answer.health).toEqual({ state: "degraded", reasons: ["1 webhook endpoint is switched off"] })
    expect(answer.capture).toMatchObject({
      slot: slot(),
      slotExists: true,
      leaderRunning: true,
      leader: empty.capture.leader
    })
    expect(answer.deliveries).toEqual(mixed.deliveries)
    expect(answer.endpointsSwitchedOff[0].id).toBe(off.id)
    const text = await runCli(["status"], env)
    expect(text.code).toBe(1)
    expect(text.stdout).toContain("Health: DEGRADED\n  - 1 webhook endpoint is switched off")
    expect(text.stdout).toContain(
      `Releases\n  this tool:   ${RELEASE.version} (schema generation ${RELEASE.generation})\n  database:    schema generation ${RELEASE.generation}; takes writes from release ${lastRaise.fence} or newer (since ${lastRaise.name})\n  processes:   0 seen in the last minute`
    )
    expect(text.stdout).toMatch(
      new RegExp(
        `leader: +safety-records-service capture leader ${hostname()}:${process.pid}, backend pid ${empty.capture.leader!.pid}`
      )
    )
    expect(text.stdout).toContain("Endpoints switched off: 1")
    expect(text.stdout).toContain("15 deliveries in a row failed every attempt")
    expect(text.stdout).toContain("Replays running: 0")
    expect(text.stdout).toContain("Keys expiring within 14 days: 1")
    // like every command it accepts --as <admin e-mail>, and refuses one that names no admin
    await w.db.sql`insert into app.users (company_id, name, email, role) values
      (${w.company.id}, 'Olu Operator', 'olu@status.test', 'admin'), (${w.company.id}, 'Wes Worker', 'wes@status.test', 'member')`
    expect((await runCli(["status", "--as", "olu@status.test", "--json"], env)).code).toBe(1)
    const notAdmin = await runCli(["status", "--as", "wes@status.test"], env)
    expect(notAdmin.code).toBe(1)
    expect(notAdmin.stderr).toContain("wes@status.test is not an admin")

    // fan-out moves by partitions of the outbox, each with its own cursor: an event waits only
    // while its own partition's cursor is before it
    await insertIncident(w.db.sql, w.company.id)
    await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    expect((await runSql(w.db.sql, operationsStatus(slot()))).outbox.backlog).toBe(2)
    const [a, b] = await w.db.sql<{ id: string; created_at: Date }[]>`
      select e.id::text, e.created_at from service.events e, service.webhook_fanout f
      where (e.commit_lsn, e.seq) > (f.commit_lsn, f.seq) order by e.commit_lsn, e.seq`
    await w.db.sql`update service.webhook_fanout_parts p set commit_lsn = e.commit_lsn, seq = e.seq
      from service.events e where e.id = ${a!.id} and p.part = service.webhook_part(e.id)`
    const partly = await runSql(w.db.sql, operationsStatus(slot()))
    expect(partly.outbox.backlog).toBe(1)
    expect(partly.outbox.oldestBacklogAt).toBe(b!.created_at.toISOString())

    // capture stopped: no leader, slot inactive
    await w.cap.stop()
    // The server ends the slot's walsender a moment after capture hangs up.
    const stopped = await waitFor(
      async () => {
        const s = await runSql(w.db.sql, operationsStatus(slot()))
        return s.capture.slotActive ? undefined : s
      },
      "the slot to be inactive after capture stopped",
      10_000,
      50
    )
    expect(stopped.capture).toMatchObject({ slotExists: true, slotActive: false, leaderRunning: false, leader: null })
    expect((await runCli(["status"], env)).stdout).toMatch(/leader: +no leader: no capture process is running/)
  })
})

describe("status exit codes, for scripts: 0 healthy, 1 degraded, 2 broken", () => {
  it("healthy, capture behind, no leader, the slot lost, the database down: each with its code and why", {
    timeout: 150_000
  }, async () => {
    const db = await freshDatabase()
    const cap = startCapture(db)
    try {
      await waitFor(() => cap.stats.streaming, "capture to stream")
      await cap.settle()
      const env = { DATABASE_URL: db.url, REPLICATION_SLOT: `slot_${db.name}` }
      const status = async (...args: string[]) => {
        const r = await runCli(["status", "--json", ...args], env)
        return {
          code: r.code,
          stderr: r.stderr,
          health: JSON.parse(r.stdout).health as { state: string; reasons: string[] }
        }
      }

      expect(await status()).toEqual({ code: 0, stderr: "", health: { state: "healthy", reasons: [] } })
      const text = await runCli(["status"], env)
      expect(text.code).toBe(0)
      expect(text.stdout).toContain("Health: HEALTHY\n")

      // Capture an hour behind (WAL waits, nothing applied since): over the threshold, or not.
      // Held still while status looks: a keepalive as the cluster's WAL moves (other databases'
      // writes) would store a checkpoint and make it current again.
      await db.sql`update service.capture_state set applied_at = now() - interval '1 hour'`
      const [behind, within] = await db.sql.begin(async (tx) => {
        await tx`lock table service.capture_state in share mode`
        return [await status("--lag-threshold", "300"), await status("--lag-threshold", "100000")]
      })
      expect(behind.code).toBe(1)
      expect(behind.health.state).toBe("degraded")
      expect(behind.health.reasons).toEqual([expect.stringMatching(/^capture is 36\d\d s behind \(threshold 300 s\)$/)])
      expect(within.code).toBe(0)

      // No process captures: degraded (a standby usually takes over within seconds).
      await cap.stop()
      const leaderless = await status("--lag-threshold", "100000")
      expect(leaderless.code).toBe(1)
      expect(leaderless.health.reasons).toEqual([expect.stringContaining("no capture leader")])

      // The slot is gone while capture had a checkpoint: lost, broken.
      await db.sql`select pg_drop_replication_slot(${`slot_${db.name}`})`
      const lost = await status("--lag-threshold", "100000")
      expect(lost.code).toBe(2)
      expect(lost.health.state).toBe("broken")
      expect(lost.health.reasons[0]).toContain(`replication slot slot_${db.name} is missing: it was lost`)
      expect(lost.health.reasons).toContainEqual(expect.stringContaining("no capture leader"))
      expect((await runCli(["status"], env)).stdout).toMatch(/^Health: BROKEN$/m)
    } finally {
      await cap.stop()
      await db.drop()
    }

    // The database does not answer: broken, and the answer says why (JSON on stdout, as always).
    const down = { DATABASE_URL: `postgres://nobody:nothing@127.0.0.1:${await freePort()}/none` }
    const j = await runCli(["status", "--json"], down)
    expect(j.code).toBe(2)
    expect(j.stderr).toBe("")
    const answer = JSON.parse(j.stdout)
    expect(Object.keys(answer)).toEqual(["at", "health"])
    expect(answer.health).toEqual({ state: "broken", reasons: [expect.stringMatching(/^database: .*ECONNREFUSED/)] })
    const t = await runCli(["status"], down)
    expect(t.code).toBe(2)
    expect(t.stdout).toMatch(/^Health: BROKEN\n {2}- database: /)
  })

  it("says why for every state it knows", () => {
    const base: OperationsStatus = {
      at: "2026-11-01T00:00:00.000Z",
      release: {
        version: "0.3.0",
        generation: 45,
        database: {
          generation: 45,
          oldestWriter: "0.3.0",
          raisedBy: "045_x.sql",
          changedAt: "2026-11-01T00:00:00.000Z"
        },
        processes: []
      },
      capture: {
        slot: "s",
        slotExists: true,
        slotActive: true,
        walStatus: "reserved",
        invalidationReason: null,
        checkpointLsn: "0/10",
        confirmedLsn: "0/10",
        behindSlot: false,
        serverLsn: "0/10",
        lagBytes: 0,
        lagSeconds: 0,
        sinceAppliedSeconds: 1,
        retainedWalBytes: 100,
        safeWalBytes: 1000,
        walKeepSizeBytes: 2000,
        lastCommitAt: null,
        appliedAt: null,
        bootstrappedAt: null,
        gapAt: null,
        gapReason: null,
        stalledAt: null,
        stallReason: null,
        stallReconnects: 0,
        leaderRunning: true,
        leader: { pid: 1, applicationName: "x", clientAddress: null, since: null },
        quarantine: { count: 0, first: null, broken: [], resyncing: [] }
      },
      outbox: { backlog: 0, oldestBacklogAt: null, newestEventAt: null },
      deliveries: { due: 0, scheduled: 0, inFlight: 0, failing: 0, held: 0, failedLast24h: 0, oldestDueAt: null },
      endpointsSwitchedOff: [],
      replays: [],
      keysNearExpiry: [],
      readReplicas: [{ replica: "standby:5432/srs", usable: true, lagSeconds: 0.4, problem: null }]
    }
    const capture = (c: Partial<OperationsStatus["capture"]>): OperationsStatus => ({
      ...base,
      capture: { ...base.capture, ...c }
    })
    /** The status with the capture's quarantine as given; the rest of it empty. */
    const quarantine = (q: Partial<OperationsStatus["capture"]["quarantine"]>) =>
      assessStatus(capture({ quarantine: { count: 0, first: null, broken: [], resyncing: [], ...q } }))
    expect(assessStatus(base)).toEqual({ state: "healthy", reasons: [] })
    expect(
      assessStatus({
        ...base,
        readReplicas: [
          ...base.readReplicas,
          { replica: "b:5432/srs", usable: false, lagSeconds: 9, problem: "behind by more than READ_MAX_LAG (5 s)" }
        ]
      })
    ).toEqual({
      state: "degraded",
      reasons: [
        "read replica b:5432/srs is skipped (behind by more than READ_MAX_LAG (5 s)): the API reads from the other replicas or the primary"
      ]
    })
    const process = (release: string, writable: boolean) => ({
      release,
      generation: 45,
      roles: ["api", "capture", "delivery"],
      host: "h",
      pid: 7,
      startedAt: "2026-11-01T00:00:00.000Z",
      seenAt: "2026-11-01T00:00:00.000Z",
      writable,
      fenceReason: writable ? null : "too old"
    })
    expect(
      assessStatus({
        ...base,
        release: { ...base.release, processes: [process("0.3.0", true), process("0.3.1", true)] }
      })
    ).toEqual({ state: "healthy", reasons: [] })
    expect(assessStatus({ ...base, release: { ...base.release, processes: [process("0.2.0", false)] } })).toEqual({
      state: "degraded",
      reasons: [
        "process h:7 runs release 0.2.0, older than the 0.3.0 the database takes writes from: it writes nothing; replace it"
      ]
    })
    expect(assessStatus(capture({ lagSeconds: 61 })).state).toBe("degraded")
    expect(assessStatus(capture({ lagSeconds: 61 }), { lagThresholdSeconds: 120 }).state).toBe("healthy")
    expect(assessStatus(capture({ walStatus: "unreserved" })).reasons).toEqual([
      "replication slot s is about to lose WAL (wal_status unreserved, 1000 bytes to go)"
    ])
    expect(assessStatus(capture({ walStatus: "lost", invalidationReason: "wal_removed" }))).toMatchObject({
      state: "broken",
      reasons: [expect.stringContaining("was invalidated (wal_removed)")]
    })
    expect(assessStatus(capture({ behindSlot: true, confirmedLsn: "0/20" }))).toEqual({
      state: "broken",
      reasons: [
        "the service's database is behind replication slot s: its checkpoint 0/10 is before the slot's confirmed 0/20 (restored from an older backup?); capture refuses until npm run admin -- rebuild-views --fresh-snapshot (events for changes in between are not sent)"
      ]
    })
    expect(assessStatus(capture({ slotExists: false, checkpointLsn: null })).reasons).toEqual([
      "replication slot s does not exist yet: capture has not started"
    ])
    expect(
      assessStatus(capture({ stalledAt: "2026-11-01T00:00:00.000Z", stallReason: "quiet", stallReconnects: 2 })).reasons
    ).toEqual(["capture stalled since 2026-11-01T00:00:00.000Z (2 reconnects so far): quiet"])
    expect(assessStatus(capture({ leader: null, leaderRunning: false })).state).toBe("degraded")
    expect(quarantine({ count: 2, first: { id: "7", table: "audits", key: "k", error: "bad score" } })).toEqual({
      state: "degraded",
      reasons: [
        "capture holds 2 records in quarantine (capture quarantine list); the first: #7 app.audits k: bad score"
      ]
    })
    expect(
      quarantine({
        broken: [
          {
            table: "audits",
            problems: ["app.audits.score is text; the service reads it as numeric"],
            since: "2026-11-01T00:00:00.000Z"
          }
        ]
      })
    ).toMatchObject({
      state: "broken",
      reasons: [expect.stringContaining("app.audits.score is text; the service reads it as numeric")]
    })
    expect(
      quarantine({ resyncing: [{ table: "audit_items", rows: 1000, since: "2026-11-01T00:00:00.000Z" }] })
    ).toEqual({
      state: "degraded",
      reasons: [
        "capture is re-reading app.audit_items from the app table since 2026-11-01T00:00:00.000Z (1000 rows so far): the records it held shape again when it is done"
      ]
    })
  })
})
