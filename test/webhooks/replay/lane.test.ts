// The replay lane as the service runs it, with the real engine and receiver: every delivery
// process runs a lane, and two of them on one database send a replay's deliveries once each;
// a replay's start and end are one JSON log line each (docs/operations.md#logs).
import { Effect, Exit, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { startReplay, stopReplay } from "../../../src/webhooks/replay/manage.ts"
import { LoggingLive } from "../../../src/platform/logging.ts"
import { makeReplayLane } from "../../../src/webhooks/replay/lane.ts"
import { Sql } from "../../../src/platform/db/Sql.ts"
import { insertIncident } from "../../support/app.ts"
import { captureStdout } from "../../support/observed.ts"
import {
  ADMIN,
  at,
  startEngine,
  useWorld,
  waitFor,
  type RunningEngine,
  addEndpoint,
  deliveredTo
} from "../../support/world.ts"

const w = useWorld()
let engine: RunningEngine
beforeAll(async () => {
  engine = await startEngine(w.deps, { replayLane: false })
})
afterAll(async () => {
  await engine?.stop()
})

const db = () => Sql.fromPool(w.db.sql)

describe("the replay lane", () => {
  it("two lanes on one database send each delivery once; start and finish are one log line each", async () => {
    const path = "/lanes"
    const e = await addEndpoint(w, path, { name: "Lanes" })
    const ids: Array<string> = []
    for (let i = 0; i < 12; i++) ids.push(await insertIncident(w.db.sql, w.company.id))
    await deliveredTo(w.db.sql, e.id, 12, "12 delivered")
    const logs = captureStdout()
    const scope = Effect.runSync(Scope.make())
    try {
      for (let i = 0; i < 2; i++) {
        await Effect.runPromise(
          Scope.provide(scope)(makeReplayLane({ rate: 20, pollMs: 200 })).pipe(
            Effect.provide(db()),
            Effect.provide(LoggingLive)
          )
        )
      }
      const started = await Effect.runPromise(
        startReplay(ADMIN, w.company.id, "api", { endpointId: e.id }).pipe(
          Effect.provide(db()),
          Effect.provide(LoggingLive)
        )
      )
      if (!("replay" in started)) throw new Error("expected a replay")
      const id = started.replay.id
      await waitFor(async () => {
        const [r] = await w.db.sql<{ state: string }[]>`select state from service.webhook_replays where id = ${id}`
        return r?.state === "finished"
      }, "the replay to finish")
      await waitFor(() => at(w.receiver, path).length >= 24, "12 replayed")
      await new Promise((r) => setTimeout(r, 500))
      const replayed = at(w.receiver, path)
        .slice(12)
        .map((r) => (JSON.parse(r.body.toString("utf8")) as { data: { id: string } }).data.id)
      expect(replayed.sort()).toEqual([...ids].sort())
      const lines = logs
        .lines()
        .filter((l) => typeof l.message === "string" && (l.message as string).startsWith("replay "))
      expect(lines.map((l) => l.message)).toEqual(["replay started", "replay finished"])
      expect(lines[0]).toMatchObject({
        level: "info",
        replayId: id,
        destination: { kind: "endpoint", id: e.id },
        queued: 12,
        source: "api",
        by: "admin@example.test"
      })
      expect(lines[1]).toMatchObject({
        level: "info",
        replayId: id,
        destination: { kind: "endpoint", id: e.id },
        queued: 12,
        sent: 12,
        skipped: 0,
        ms: expect.any(Number)
      })
      // and a cancel is one line too (a finished replay cannot be cancelled: no line)
      const again = await Effect.runPromise(
        startReplay(ADMIN, w.company.id, "api", { endpointId: e.id, since: "2000-01-01", until: "2000-01-02" }).pipe(
          Effect.provide(db())
        )
      )
      expect("plan" in again && again.plan.deliveries).toBe(0)
      const failed = await Effect.runPromise(
        Effect.result(stopReplay(ADMIN, w.company.id, id).pipe(Effect.provide(db())))
      )
      expect(failed._tag).toBe("Failure")
    } finally {
      logs.stop()
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  })

  it("a switch-off is one log line with the endpoint, its company and the reason", async () => {
    await engine.stop()
    const logs = captureStdout()
    try {
      engine = await startEngine(w.deps, { retrySchedule: "", replayLane: false, jsonLogs: true })
      const path = "/gone-dark"
      w.receiver.reply(path, { status: 503 })
      const e = await addEndpoint(w, path, { name: "Dark" })
      for (let i = 0; i < 15; i++) await insertIncident(w.db.sql, w.company.id)
      await waitFor(
        () => logs.lines().some((l) => l.message === "webhook endpoint switched off"),
        "the switch-off line"
      )
      const lines = logs.lines().filter((l) => l.message === "webhook endpoint switched off")
      expect(lines).toEqual([
        expect.objectContaining({
          level: "warn",
          endpointId: e.id,
          companyId: w.company.id,
          reason: "15 deliveries in a row failed every attempt; last error: http 503"
        })
      ])
    } finally {
      logs.stop()
    }
  })
})
