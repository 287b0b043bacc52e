// After an outage: a receiver down for the whole retry schedule, its endpoint switched off,
// events missed while it was off, the receiver fixed, the endpoint turned on, and
// `replay --failed` sends exactly what it missed, each failed event with its original
// delivery id (receivers drop repeats by it) and the others with new ones.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { replay } from "../../../src/webhooks/replay/select.ts"
import { enableEndpoint } from "../../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident } from "../../support/app.ts"
import { runCli } from "../../support/cli.ts"
import {
  addEndpoint,
  addHook,
  ADMIN,
  deliveredTo,
  deliveries,
  deliveriesTo,
  makeKey,
  startEngine,
  useWorld,
  waitFor,
  type RunningEngine
} from "../../support/world.ts"
import type { DomainError } from "../../../src/domain/errors.ts"
import { cliMessage } from "../../../src/faces/cli/errors.ts"
import { runSql } from "../../support/sql.ts"

type Body = { id: string; event: string; createdAt: string; data: { id: string } }

const w = useWorld()
let engine: RunningEngine
beforeAll(async () => {
  // Six attempts 50 ms apart: the whole schedule passes in well under a second.
  engine = await startEngine(w.deps, { retrySchedule: "50ms,50ms,50ms,50ms,50ms" })
})
afterAll(async () => {
  await engine?.stop()
})

const bodiesAt = (path: string, from = 0) =>
  w.receiver.requests
    .filter((r) => r.path === path)
    .slice(from)
    .map((r) => JSON.parse(r.body.toString("utf8")) as Body)

/** The CLI's log lines on stderr (its stdout is the answer): a replay says when it starts and ends. */
const logLines = (stderr: string) =>
  stderr
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>)

const incidents = async (n: number) => {
  const ids: string[] = []
  for (let i = 0; i < n; i++) ids.push(await insertIncident(w.db.sql, w.company.id, { title: `Incident ${i}` }))
  await w.cap.settle()
  return ids
}

describe("replay after an outage", () => {
  it("a receiver down for the whole schedule; switched off; turned on; replay --failed sends exactly what it missed", async () => {
    const path = "/outage"
    w.receiver.reply(path, { status: 503 })
    const made = await addEndpoint(w, path, { name: "Outage" })
    // 15 deliveries that fail every attempt switch the endpoint off (docs/events.md#switching-off).
    const failedIncidents = await incidents(15)
    await waitFor(async () => {
      const [e] = await w.db.sql<
        { enabled: boolean }[]
      >`select enabled from service.webhook_endpoints where id = ${made.id}`
      return e?.enabled === false
    }, "the endpoint to be switched off")
    const rows = await deliveriesTo(w.db.sql, made.id)
    expect(rows).toHaveLength(15)
    expect(rows.every((d) => d.state === "failed" && d.attempts === 6)).toBe(true)
    expect(bodiesAt(path)).toHaveLength(90)
    const original = new Map<string, string>() // incident id -> delivery id
    for (const b of bodiesAt(path)) original.set(b.data.id, b.id)
    expect([...original.keys()].sort()).toEqual([...failedIncidents].sort())

    // While it is off, fan-out makes no deliveries for it.
    const missedWhileOff = await incidents(3)
    await new Promise((r) => setTimeout(r, 300))
    expect(await deliveriesTo(w.db.sql, made.id)).toHaveLength(15)

    // Counting first sends nothing.
    const dry = await runSql(w.db.sql, replay({ endpointId: made.id, failedOnly: true, dryRun: true, actor: ADMIN }))
    expect(dry).toMatchObject({
      matched: 18,
      resent: 15,
      created: 3,
      skippedDelivered: 0,
      skippedInFlight: 0,
      dryRun: true
    })
    expect(dry.destination).toMatchObject({ kind: "endpoint", id: made.id, on: false })

    // The receiver is fixed and the admin turns the endpoint on; nothing is sent by that alone.
    w.receiver.reply(path, { status: 200 })
    await runSql(w.deps.sql, enableEndpoint(ADMIN, { id: made.id }))
    await new Promise((r) => setTimeout(r, 500))
    const before = w.receiver.requests.filter((r) => r.path === path).length
    expect(before).toBe(90)

    // Replayed with the engine (and the replay lane beside it) paused: the replay is stored
    // with its plan, in event order, and no delivery changes until the lane hands them over.
    await engine.stop()
    const run = await runCli(["replay", "--endpoint", made.id, "--failed", "--json"], { DATABASE_URL: w.db.url })
    const told = logLines(run.stderr)
    expect(told.map((l) => [l.level, l.message])).toEqual([["info", "replay started"]])
    expect(told[0]).toMatchObject({
      replayId: expect.any(String),
      destination: { kind: "endpoint", id: made.id },
      failedOnly: true,
      dryRun: false,
      matched: 18,
      resent: 15,
      created: 3,
      source: "cli",
      ms: expect.any(Number)
    })
    expect(run.code).toBe(0)
    const summary = JSON.parse(run.stdout)
    expect(summary).toMatchObject({
      replayId: told[0]!.replayId,
      matched: 18,
      resent: 15,
      created: 3,
      skippedDelivered: 0,
      skippedInFlight: 0,
      dryRun: false,
      failedOnly: true,
      events: ["incident.created"]
    })
    expect(summary.destination).toMatchObject({ kind: "endpoint", id: made.id, on: true })
    const replayId = summary.replayId as string
    const [job] = await w.db.sql<{ state: string; total: number; source: string; actor_email: string | null }[]>`
      select state, total, source, actor_email from service.webhook_replays where id = ${replayId}`
    expect(job).toEqual({ state: "running", total: 18, source: "cli", actor_email: null })
    const planned = await w.db.sql<{ record_id: string; delivery_id: string | null }[]>`
      select e.record_id::text, i.delivery_id::text from service.webhook_replay_items i join service.events e on e.id = i.event_id
      where i.replay_id = ${replayId} and i.state = 'queued' order by i.seq`
    expect(planned.map((r) => r.record_id)).toEqual([...failedIncidents, ...missedWhileOff])
    expect(planned.filter((r) => r.delivery_id !== null)).toHaveLength(15)
    const untouched = await deliveriesTo(w.db.sql, made.id)
    expect(untouched).toHaveLength(15)
    expect(untouched.every((d) => d.state === "failed")).toBe(true)
    engine = await startEngine(w.deps, { retrySchedule: "50ms,50ms,50ms,50ms,50ms" })
    await waitFor(() => bodiesAt(path, before).length >= 18, "18 replayed deliveries")
    await waitFor(async () => {
      const [r] = await w.db.sql<
        { state: string; sent: number }[]
      >`select state, sent from service.webhook_replays where id = ${replayId}`
      return r?.state === "finished" && r.sent === 18
    }, "the replay to finish")
    // a finished replay keeps its counts, not its items
    expect((await w.db.sql`select 1 from service.webhook_replay_items where replay_id = ${replayId}`).length).toBe(0)
    const replayed = bodiesAt(path, before)
    // exactly the missed events, each once
    expect(replayed.map((b) => b.data.id).sort()).toEqual([...failedIncidents, ...missedWhileOff].sort())
    // the 15 that had failed keep their delivery ids; the 3 missed while off get new ones
    for (const b of replayed) {
      if (failedIncidents.includes(b.data.id)) expect(b.id).toBe(original.get(b.data.id))
      else expect([...original.values()]).not.toContain(b.id)
    }
    const after = await deliveriesTo(w.db.sql, made.id)
    expect(after).toHaveLength(18)
    expect(after.every((d) => d.state === "succeeded")).toBe(true)
    // the activity log says who replayed what
    const [log] = await w.db.sql<{ actor_email: string | null; details: Record<string, unknown> }[]>`
      select actor_email, details from service.activity where kind = 'deliveries.replayed' and subject_id = ${made.id}`
    expect(log).toMatchObject({
      actor_email: null,
      details: { replayId, destination: "endpoint", failedOnly: true, resent: 15, created: 3 }
    })

    // A second replay --failed finds nothing left to send.
    const again = await runSql(w.db.sql, replay({ endpointId: made.id, failedOnly: true, dryRun: false, actor: ADMIN }))
    expect(again).toMatchObject({ replayId: null, matched: 18, resent: 0, created: 0, skippedDelivered: 18 })
  })

  it("without --failed resends delivered events with the same ids; --since/--until/--event narrow it", async () => {
    const path = "/all"
    const made = await addEndpoint(w, path, { name: "All", events: ["incident.created", "corrective_action.created"] })
    // Event times are commit times to the millisecond: the fourth commits a little later so
    // --until can fall between the third and the fourth.
    const ids = await incidents(3)
    await new Promise((r) => setTimeout(r, 20))
    ids.push(...(await incidents(1)))
    // Received is not yet recorded: wait for the engine to write the outcomes, or replay
    // rightly counts the still-leased rows as in flight.
    await deliveredTo(w.db.sql, made.id, 4, "4 deliveries recorded")
    const first = new Map(bodiesAt(path).map((b) => [b.data.id, b.id]))
    const [middle] = await w.db.sql<
      { at: Date }[]
    >`select created_at as at from service.events where record_id = ${ids[2]!}`
    const until = new Date(middle!.at.getTime() + 1)
    const before = bodiesAt(path).length
    const progress: Array<[number, number]> = []
    const s = await runSql(
      w.db.sql,
      replay(
        { endpointId: made.id, events: ["incident.created"], until, failedOnly: false, dryRun: false, actor: ADMIN },
        (p) => progress.push([p.done, p.total])
      )
    )
    expect(s).toMatchObject({ matched: 3, resent: 3, created: 0 })
    expect(progress).toEqual([
      [0, 3],
      [3, 3]
    ])
    const [log] = await w.db.sql<{ actor_email: string | null }[]>`
      select actor_email from service.activity where kind = 'deliveries.replayed' and subject_id = ${made.id}`
    expect(log!.actor_email).toBe("admin@example.test")
    await waitFor(() => bodiesAt(path, before).length >= 3, "3 resent")
    await new Promise((r) => setTimeout(r, 300))
    const resent = bodiesAt(path, before)
    expect(resent.map((b) => b.data.id).sort()).toEqual(ids.slice(0, 3).sort())
    for (const b of resent) expect(b.id).toBe(first.get(b.data.id))
  })

  it("refuses what it cannot do", async () => {
    const made = await addEndpoint(w, "/narrow", { name: "Narrow" })
    const base = { failedOnly: false, dryRun: true, actor: ADMIN }
    const none = await runSql(w.db.sql, replay({ ...base })).then(
      () => undefined,
      (e: DomainError) => e
    )
    expect(none).toMatchObject({ _tag: "Invalid", field: "endpoint" })
    expect(cliMessage(none!)).toBe("name one destination: --endpoint <id> or --subscription <id>")
    await expect(
      runSql(w.db.sql, replay({ ...base, endpointId: "3f1d1e0e-0000-4000-8000-000000000000" }))
    ).rejects.toMatchObject({ _tag: "NotFound" })
    await expect(
      runSql(w.db.sql, replay({ ...base, endpointId: made.id, events: ["permit.closed"] }))
    ).rejects.toMatchObject({
      message: `the endpoint ${made.id} does not take permit.closed events (it takes incident.created)`
    })
    await expect(runSql(w.db.sql, replay({ ...base, endpointId: made.id, events: ["nope"] }))).rejects.toMatchObject({
      message: 'unknown event "nope"'
    })
    await expect(
      runSql(
        w.db.sql,
        replay({ ...base, endpointId: made.id, since: new Date("2026-01-02"), until: new Date("2026-01-01") })
      )
    ).rejects.toMatchObject({ _tag: "Invalid", field: "since" })
  })

  it("a subscription made through the API: npm run admin -- replay --subscription, --dry-run, --json", async () => {
    const path = "/sub"
    const keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"], webhooks: true })
    const { subscription } = await addHook(w, path, { keyId })
    const ids = await incidents(2)
    const recorded = async () =>
      (await deliveries(w.db.sql)).filter((d) => d.subscription_id === subscription.id && d.state === "succeeded")
        .length === 2
    await waitFor(recorded, "2 deliveries recorded")
    const first = new Map(bodiesAt(path).map((b) => [b.data.id, b.id]))
    const env = { DATABASE_URL: w.db.url }
    const dry = await runCli(["replay", "--subscription", subscription.id, "--dry-run", "--json"], env)
    expect(logLines(dry.stderr).map((l) => l.message)).toEqual(["replay dry run"])
    expect(logLines(dry.stderr)[0]).toMatchObject({
      replayId: null,
      destination: { kind: "subscription", id: subscription.id },
      dryRun: true,
      matched: 2
    })
    expect(dry.code).toBe(0)
    expect(JSON.parse(dry.stdout)).toMatchObject({
      destination: { kind: "subscription", id: subscription.id, on: true },
      matched: 2,
      resent: 2,
      created: 0,
      dryRun: true
    })
    expect(bodiesAt(path)).toHaveLength(2)
    const before = bodiesAt(path).length
    const r = await runCli(["replay", "--subscription", subscription.id, "--json"], env)
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ matched: 2, resent: 2, created: 0, dryRun: false })
    await waitFor(() => bodiesAt(path, before).length >= 2, "2 resent")
    await waitFor(recorded, "2 resent deliveries recorded")
    for (const b of bodiesAt(path, before)) expect(b.id).toBe(first.get(b.data.id))
    expect(
      bodiesAt(path, before)
        .map((b) => b.data.id)
        .sort()
    ).toEqual([...ids].sort())
    // a person gets a summary; mistakes get exit code 1 and a message
    const human = await runCli(["replay", "--subscription", subscription.id, "--failed", "--dry-run"], env)
    expect(human.code).toBe(0)
    expect(human.stdout).toContain(`Dry run: would replay to subscription ${subscription.id}`)
    expect(human.stdout).toContain("skipped:   2 already delivered")
    const bad = await runCli(["replay", "--subscription", subscription.id, "--since", "yesterday"], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("--since must be")
  })
})
