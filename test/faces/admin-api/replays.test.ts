import { beforeAll, describe, expect, it } from "vitest"
import { collectDatabase, makeServiceMetrics } from "../../../src/faces/ops/metrics.ts"
import { replayWindow } from "../../../src/webhooks/replay/lane.ts"
import { operationsStatus } from "../../../src/faces/ops/status.ts"
import { openApiChecker, request, type OpenApiChecker, caller, makeToken } from "../../support/http.ts"
import { sample } from "../../support/observed.ts"
import { insertIncident } from "../../support/app.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { at, fannedOut, sleep, useServiceWorld, waitFor } from "../../support/world.ts"
import { runSql } from "../../support/sql.ts"

const NO_SUCH = "00000000-0000-4000-8000-000000000000"
/** REPLAY_RATE of this file's lane: slow, so a replay of 30 lasts 15 s unless cancelled. */
const RATE = 2

type Body = { readonly id: string; readonly data: { readonly id: string } }

describe("admin HTTP API: replays", () => {
  let acme: TestCompany
  let other: TestCompany
  const { db, cap, receiver, server } = useServiceWorld({
    seed: async (sql) => {
      acme = await createCompany(sql, { name: "Acme Safety", mirrored: false })
      other = await createCompany(sql, { name: "Other Works", mirrored: false })
    },
    engine: { replayRate: RATE }
  })
  let checker: OpenApiChecker
  let token: string
  let otherToken: string

  const send = caller(server, () => checker)
  const call = (method: string, path: string, t: string, body?: unknown) => send(method, path, { token: t, body })
  const admin = (method: string, path: string, body?: unknown) => call(method, path, token, body)
  const foreign = (method: string, path: string, body?: unknown) => call(method, path, otherToken, body)

  const newToken = async (company: TestCompany) => (await makeToken(db, company, "replays test")).token

  const createEndpoint = async (name: string, path: string, t = token) => {
    const a = await call("POST", "/admin/v1/endpoints", t, {
      name,
      url: receiver.url(path),
      events: ["incident.created"]
    })
    expect(a.status, a.text).toBe(201)
    return a.json.id as string
  }

  const bodies = (path: string) =>
    at(receiver, path).map((r) => ({ ...(JSON.parse(r.body.toString("utf8")) as Body), arrivedAt: r.arrivedAt }))

  const stateOf = async (endpointId: string) =>
    db.sql<{ id: string; state: string; attempts: number; record_id: string }[]>`
      select d.id::text, d.state, d.attempts, e.record_id::text from service.webhook_deliveries d join service.events e on e.id = d.event_id
      where d.endpoint_id = ${endpointId} order by e.commit_lsn, e.seq`

  const replayRows = async () =>
    Number((await db.sql<{ n: number }[]>`select count(*)::int as n from service.webhook_replays`)[0]!.n)

  beforeAll(async () => {
    checker = await openApiChecker((await request(server.url, "/admin/v1/openapi.json")).json)
    token = await newToken(acme)
    otherToken = await newToken(other)
  })

  it("documents the operations and requires an admin token", async () => {
    for (const [method, path] of [
      ["POST", "/admin/v1/replays"],
      ["GET", "/admin/v1/replays"],
      ["GET", `/admin/v1/replays/${NO_SUCH}`],
      ["POST", `/admin/v1/replays/${NO_SUCH}/cancel`]
    ] as const) {
      const template = path.replaceAll(NO_SUCH, "{id}")
      expect(checker.document.paths[template]?.[method.toLowerCase()], `${method} ${template}`).toBeDefined()
      const a = await request(server.url, path, { method, ...(method === "POST" ? { body: "{}" } : {}) })
      expect(a.status).toBe(401)
    }
  })

  it("a dry run counts and changes nothing; the replay goes at REPLAY_RATE, live deliveries never wait behind it; status and metrics follow it; cancel stops it midway", async () => {
    const path = "/busy"
    // A receiver that takes its time: without a lane, a replay handed over at once would fill
    // the engine's queue for it, and live deliveries would wait behind all of it.
    receiver.reply(path, { status: 200, delayMs: 150 })
    const endpointId = await createEndpoint("Busy", path)
    const first: Array<string> = []
    for (let i = 0; i < 30; i++) first.push(await insertIncident(db.sql, acme.id, { title: `Old ${i}` }))
    await waitFor(
      async () => (await stateOf(endpointId)).filter((d) => d.state === "succeeded").length === 30,
      "30 delivered",
      60_000
    )
    const originalIds = new Map(bodies(path).map((b) => [b.data.id, b.id]))
    const before = at(receiver, path).length
    const rowsBefore = await stateOf(endpointId)

    // Dry run: how many deliveries to which destination; nothing stored, nothing sent.
    const dry = await admin("POST", "/admin/v1/replays", { endpointId, dryRun: true })
    expect(dry.status).toBe(200)
    expect(dry.json).toMatchObject({
      dryRun: true,
      destination: { kind: "endpoint", id: endpointId, url: receiver.url(path), on: true },
      events: ["incident.created"],
      failedOnly: false,
      matched: 30,
      resend: 30,
      create: 0,
      deliveries: 30,
      skippedDelivered: 0,
      skippedInFlight: 0,
      rate: 10, // the server's REPLAY_RATE (its default); the lane here runs at RATE
      estimatedSeconds: 3
    })
    await sleep(500)
    expect(await replayRows()).toBe(0)
    expect(at(receiver, path)).toHaveLength(before)
    expect(await stateOf(endpointId)).toEqual(rowsBefore)

    // The replay: 201, running, everything queued and nothing sent yet.
    const made = await admin("POST", "/admin/v1/replays", { endpointId })
    expect(made.status, made.text).toBe(201)
    const replayId = made.json.id as string
    expect(made.json).toMatchObject({
      companyId: acme.id,
      state: "running",
      destination: { kind: "endpoint", id: endpointId, url: receiver.url(path), name: "Busy", on: true },
      failedOnly: false,
      source: "api",
      createdBy: acme.adminEmail,
      finishedAt: null,
      cancelledBy: null,
      plan: { matched: 30, resend: 30, create: 0, skippedDelivered: 0, skippedInFlight: 0 },
      progress: { queued: 30, remaining: 30 },
      waiting: null
    })

    // `status` and the metrics show it with its progress (the CLI's text and --json of a
    // running replay: test/faces/pages/replays.test.ts, where one waits for as long as it takes).
    const shown = (await runSql(db.sql, operationsStatus(`slot_${db.name}`))).replays
    expect(shown.map((r) => [r.id, r.state, r.progress.queued])).toEqual([[replayId, "running", 30]])
    expect(shown[0]!.progress.remaining).toBeGreaterThan(0)
    const metrics = makeServiceMetrics()
    const stop = await runSql(db.sql, collectDatabase(metrics))
    const scraped = await metrics.registry.scrape()
    stop()
    expect(sample(scraped, "srs_replays_running")).toBe(1)
    expect(sample(scraped, "srs_replay_remaining_deliveries")).toBeGreaterThan(0)

    // Live events while it runs: from the moment the event was in the outbox (so capture's own
    // latency aside), each arrives with at most the lane's window (one second's worth) and what
    // the lane hands over meanwhile ahead of it, never behind what the replay still has queued.
    const live: Array<{ id: string; queuedThen: number }> = []
    for (let i = 0; i < 3; i++) {
      await sleep(700)
      const progress = (await admin("GET", `/admin/v1/replays/${replayId}`)).json.progress
      const id = await insertIncident(db.sql, acme.id, { title: `Live ${i}` })
      live.push({ id, queuedThen: progress.queued - progress.sent - progress.inEngine - progress.skipped })
    }
    const arrived = await waitFor(() => {
      const all = bodies(path)
      const got = live.map((l) => all.find((b) => b.data.id === l.id))
      return got.every((b) => b !== undefined) ? got.map((b) => b!) : undefined
    }, "the live deliveries")
    for (const [i, l] of live.entries()) {
      // From the moment the event was in the outbox: the engine sends a first attempt straight
      // from fan-out and writes its row afterwards, so the row's own time is after the send.
      const [made] = await db.sql<{ at: Date }[]>`
        select e.created_at as at from service.events e where e.record_id = ${l.id} and e.event = 'incident.created'`
      const replayedMeanwhile = bodies(path)
        .slice(before)
        .filter(
          (b) => first.includes(b.data.id) && b.arrivedAt >= made!.at.getTime() && b.arrivedAt <= arrived[i]!.arrivedAt
        ).length
      expect(l.queuedThen, "the replay still had work queued").toBeGreaterThan(replayWindow(RATE) + 2 * RATE)
      expect(replayedMeanwhile, `replayed deliveries ahead of live ${i}`).toBeLessThanOrEqual(
        replayWindow(RATE) + 2 * RATE
      )
    }

    // Cancel midway: sent stays sent; what was not sent stays as it was, and is never sent.
    await waitFor(
      async () => (await admin("GET", `/admin/v1/replays/${replayId}`)).json.progress.sent >= 10,
      "10 replayed",
      30_000
    )
    const cancelled = await admin("POST", `/admin/v1/replays/${replayId}/cancel`)
    expect(cancelled.status, cancelled.text).toBe(200)
    expect(cancelled.json).toMatchObject({
      id: replayId,
      state: "cancelled",
      cancelledBy: acme.adminEmail,
      waiting: null
    })
    const p = cancelled.json.progress
    expect(p.sent).toBeGreaterThanOrEqual(10)
    expect(p.remaining).toBeGreaterThan(0)
    expect(p.inEngine).toBe(0)
    expect(p.sent + p.skipped + p.restored + p.remaining).toBe(30)
    expect(cancelled.json.finishedAt).not.toBeNull()
    await sleep(1_500)
    const replayed = bodies(path)
      .slice(before)
      .filter((b) => first.includes(b.data.id))
    expect(replayed).toHaveLength(p.sent)
    // the oldest events, each once, with its original delivery id
    expect(replayed.map((b) => b.data.id).sort()).toEqual(first.slice(0, p.sent).sort())
    for (const b of replayed) expect(b.id).toBe(originalIds.get(b.data.id))
    // every delivery is as it was: delivered, nothing pending or held for the endpoint
    expect(
      (await stateOf(endpointId)).filter((d) => first.includes(d.record_id)).every((d) => d.state === "succeeded")
    ).toBe(true)
    expect(await db.sql`select 1 from service.webhook_replay_items where replay_id = ${replayId}`).toHaveLength(0)

    // Cancelled is final: 409, and nothing changes.
    const again = await admin("POST", `/admin/v1/replays/${replayId}/cancel`)
    expect(again.status).toBe(409)
    expect(again.json.error).toBe(`replay ${replayId} is cancelled already`)
    const after = await admin("GET", `/admin/v1/replays/${replayId}`)
    expect(after.json).toEqual(cancelled.json)
    expect((await admin("GET", "/admin/v1/replays")).json.data.map((r: { id: string }) => r.id)).toEqual([replayId])
    expect((await foreign("GET", "/admin/v1/replays")).json.data).toEqual([])
    expect((await foreign("GET", `/admin/v1/replays/${replayId}`)).status).toBe(404)
    expect((await foreign("POST", `/admin/v1/replays/${replayId}/cancel`)).status).toBe(404)

    // The activity log: who started it, who cancelled it.
    const log = (await admin("GET", "/admin/v1/activity?kind=deliveries")).json.data as Array<{
      kind: string
      actorEmail: string
      details: Record<string, unknown>
    }>
    expect(log.map((e) => [e.kind, e.actorEmail, e.details.replayId])).toEqual([
      ["deliveries.replay_cancelled", acme.adminEmail, replayId],
      ["deliveries.replayed", acme.adminEmail, replayId]
    ])
    expect(log[0]!.details).toMatchObject({
      destination: "endpoint",
      sent: p.sent,
      notSent: p.remaining,
      restored: p.restored
    })
  })

  it("a replay with nothing left to go finishes on its own; failed only skips what was delivered", async () => {
    const path = "/quiet"
    const endpointId = await createEndpoint("Quiet", path)
    for (let i = 0; i < 3; i++) await insertIncident(db.sql, acme.id)
    await waitFor(
      async () => (await stateOf(endpointId)).filter((d) => d.state === "succeeded").length === 3,
      "3 delivered"
    )
    const nothing = await admin("POST", "/admin/v1/replays", { endpointId, failedOnly: true })
    expect(nothing.status).toBe(200)
    expect(nothing.json).toMatchObject({ dryRun: false, matched: 3, deliveries: 0, skippedDelivered: 3 })
    const made = await admin("POST", "/admin/v1/replays", { endpointId, events: ["incident.created"] })
    expect(made.status).toBe(201)
    const done = await waitFor(async () => {
      const a = await admin("GET", `/admin/v1/replays/${made.json.id}`)
      return a.json.state === "finished" ? a.json : undefined
    }, "the replay to finish")
    expect(done.progress).toEqual({ queued: 3, sent: 3, inEngine: 0, skipped: 0, restored: 0, remaining: 0 })
    expect(done.finishedAt).not.toBeNull()
    expect((await admin("POST", `/admin/v1/replays/${made.json.id}/cancel`)).status).toBe(409)
  })

  it("refuses what it cannot do with a JSON error, and changes nothing", async () => {
    const endpointId = await createEndpoint("Strict", "/strict")
    const theirs = await createEndpoint("Theirs", "/theirs", otherToken)
    await settledEvents()
    const before = await replayRows()
    const cases: Array<[unknown, number, string | RegExp]> = [
      [{}, 400, "name one destination: endpointId or subscriptionId"],
      [{ endpointId, subscriptionId: NO_SUCH }, 400, "name one destination: endpointId or subscriptionId"],
      [{ endpointId: NO_SUCH }, 404, `no endpoint ${NO_SUCH}`],
      [{ endpointId: "nope" }, 404, 'no endpoint "nope"'],
      [{ endpointId: theirs }, 404, `no endpoint ${theirs}`],
      [{ subscriptionId: NO_SUCH, dryRun: true }, 404, `no subscription ${NO_SUCH}`],
      [{ endpointId, since: "yesterday" }, 400, /^since must be /],
      [{ endpointId, until: "2026-13-01" }, 400, /^until must be /],
      [
        { endpointId, since: "2026-03-02", until: "2026-03-01" },
        400,
        "since (2026-03-02T00:00:00.000Z) must be before until (2026-03-01T00:00:00.000Z)"
      ],
      [
        { endpointId, events: ["permit.closed"] },
        400,
        `the endpoint ${endpointId} does not take permit.closed events (it takes incident.created)`
      ],
      [{ endpointId, events: ["nope"] }, 400, 'unknown event "nope"'],
      [{ endpointId, failedOnly: "yes" }, 400, /^invalid request body: /],
      [{ endpointId, rate: 1000 }, 400, /^unknown field "rate" in the request body: it takes /],
      ["not json", 400, /invalid request body|JSON/i]
    ]
    for (const [body, status, message] of cases) {
      const a = await admin("POST", "/admin/v1/replays", body)
      expect(a.status, JSON.stringify(body)).toBe(status)
      if (typeof message === "string") expect(a.json.error).toBe(message)
      else expect(a.json.error).toMatch(message)
    }
    expect((await admin("GET", `/admin/v1/replays/${NO_SUCH}`)).status).toBe(404)
    expect((await admin("GET", "/admin/v1/replays/nope")).json.error).toBe('no replay "nope"')
    expect((await admin("POST", `/admin/v1/replays/${NO_SUCH}/cancel`)).status).toBe(404)
    expect((await admin("GET", "/admin/v1/replays?state=running")).status).toBe(400)
    expect(await replayRows()).toBe(before)
  })

  const settledEvents = async () => {
    await cap.settle()
    await fannedOut(db.sql)
  }
})
