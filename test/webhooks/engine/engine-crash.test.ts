// Crash safety of delivery: three engine processes share the work while they are killed
// (SIGKILL) at random moments during a burst of changes, and replaced. A first attempt is sent
// before its row is written, so a kill between the two sends it again: under the same id.
// Afterwards every change is one event, every (event, destination) one delivery row with the
// id that is a function of them, delivered, and every request the receiver got for it carried
// that id. The survivors share the fan-out partitions. An endpoint that orders by record gets
// each corrective action's events (created, closed, closed again) in the order they happened,
// kills or not: a request for a later one never comes before the last for an earlier one.
import { spawn, type ChildProcess } from "node:child_process"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { deliveryId } from "../../../src/webhooks/engine/ids.ts"
import { addEndpoint, addHook, CA, makeKey, sleep, useEngineWorld, waitFor } from "../../support/world.ts"

const CHILD = fileURLToPath(new URL("./engine-child.ts", import.meta.url))
const s = useEngineWorld()

type Child = {
  readonly process: ChildProcess
  stats: { id: string; attempts: number; inFlight: number; partitions: number } | null
}

describe("engines killed during a burst", () => {
  it("every delivery arrives under its one id, and three processes share the work", { timeout: 240_000 }, async () => {
    const w = s.w
    const destinations: Array<{ path: string; endpointId: string | null; subscriptionId: string | null }> = []
    for (const path of ["/crash-a", "/crash-b", "/crash-c"]) {
      // A short wait widens the window between a send and its write.
      w.receiver.reply(path, { status: 200, delayMs: 40 })
      const e = await addEndpoint(w, path)
      destinations.push({ path, endpointId: e.id, subscriptionId: null })
    }
    w.receiver.reply("/crash-sub", { status: 200, delayMs: 40 })
    const keyId = await makeKey(w.db.sql, w.company.id, { scopes: ["incidents"] })
    const { subscription } = await addHook(w, "/crash-sub", { keyId })
    destinations.push({ path: "/crash-sub", endpointId: null, subscriptionId: subscription.id })
    w.receiver.reply("/crash-ordered", { status: 200, delayMs: 40 })
    const ordered = await addEndpoint(w, "/crash-ordered", {
      name: "ordered",
      events: ["corrective_action.created", "corrective_action.closed"],
      ordering: "record"
    })

    const children: Array<Child> = []
    const start = () => {
      const child = spawn(process.execPath, [CHILD], {
        env: {
          ...process.env,
          ENGINE_URL: w.db.url,
          ENGINE_SECRETS_KEY: Buffer.from(w.deps.secretsKey).toString("base64"),
          ENGINE_CA: CA()
        },
        stdio: ["ignore", "pipe", "inherit"]
      })
      const c: Child = { process: child, stats: null }
      createInterface({ input: child.stdout! }).on("line", (line) => {
        try {
          c.stats = JSON.parse(line)
        } catch {
          // a log line
        }
      })
      children.push(c)
      return c
    }
    const live = () => children.filter((c) => c.process.exitCode === null && c.process.signalCode === null)
    try {
      for (let i = 0; i < 3; i++) start()
      await waitFor(() => live().every((c) => c.stats !== null), "three engines running", 60_000)

      // The burst: 400 incidents in small transactions, while a random engine is killed
      // every 0.3-0.9 s and replaced.
      let written = 0
      const burst = (async () => {
        while (written < 400) {
          const n = Math.min(1 + Math.floor(Math.random() * 5), 400 - written)
          await w.db.sql.begin(async (tx) => {
            for (let i = 0; i < n; i++) {
              await tx`insert into app.incidents (company_id, reference, type, title, description, occurred_at, severity)
                values (${w.company.id}, ${`CRASH-${written + i}`}, 'injury', 'Burst', 'Burst', now(), 'minor')`
            }
          })
          written += n
          await sleep(Math.floor(Math.random() * 40))
        }
      })()
      let kills = 0
      let killsWhileWriting = 0
      let finished = false
      // Beside it, 30 corrective actions, each closed, reopened and closed again: three events
      // each (reopening fires none), each change in its own transaction, interleaved.
      const actions: Array<string> = []
      const actionBurst = (async () => {
        for (let i = 0; i < 30; i++) {
          const [a] = await w.db.sql<{ id: string }[]>`
            insert into app.corrective_actions (company_id, title, source, status, priority, owner)
            values (${w.company.id}, ${`CRASH-ACTION-${i}`}, 'manual', 'open', 'high', 'Sam') returning id::text`
          actions.push(a!.id)
          await sleep(Math.floor(Math.random() * 30))
        }
        for (const status of ["completed", "open", "completed"]) {
          for (const id of actions) {
            await w.db.sql`update app.corrective_actions set status = ${status} where id = ${id}`
            await sleep(Math.floor(Math.random() * 20))
          }
        }
      })()
      void Promise.all([burst, actionBurst]).finally(() => (finished = true))
      while (!finished || kills < 6) {
        await sleep(300 + Math.floor(Math.random() * 600))
        // Preferably one with requests on the wire: killed between a send and its write.
        const victims = live().filter((c) => (c.stats?.inFlight ?? 0) > 0)
        const pool = victims.length > 0 ? victims : live()
        const victim = pool[Math.floor(Math.random() * pool.length)]
        if (victim) {
          if (!finished) killsWhileWriting++
          victim.process.kill("SIGKILL")
          await new Promise((r) => victim.process.once("exit", r))
          kills++
        }
        start()
        if (kills >= 12 && finished) break
      }
      await burst
      await actionBurst
      expect(kills).toBeGreaterThanOrEqual(6)
      expect(killsWhileWriting).toBeGreaterThanOrEqual(3)
      await w.cap.settle(60_000)

      // Every change is one event.
      const events = await w.db.sql<{ id: string; record_id: string }[]>`
        select e.id::text, e.record_id::text from service.events e join app.incidents i on i.id = e.record_id
        where i.reference like 'CRASH-%' and e.event = 'incident.created'`
      expect(events).toHaveLength(400)
      expect(new Set(events.map((e) => e.record_id)).size).toBe(400)

      // Every (event, destination) ends as one delivery row, delivered, with the id that is a function of them.
      const expected = new Map<string, { event: string; record: string; path: string }>()
      for (const e of events) {
        for (const d of destinations)
          expected.set(deliveryId(e.id, d.endpointId, d.subscriptionId), {
            event: e.id,
            record: e.record_id,
            path: d.path
          })
      }
      const rows = await waitFor(
        async () => {
          const r = await w.db.sql<{ id: string; state: string; attempts: number }[]>`
          select d.id::text, d.state, d.attempts from service.webhook_deliveries d
          join service.events e on e.id = d.event_id join app.incidents i on i.id = e.record_id where i.reference like 'CRASH-%'`
          return r.length === expected.size && r.every((x) => x.state === "succeeded") ? r : null
        },
        "every delivery written as succeeded",
        120_000
      )
      expect(new Set(rows.map((r) => r.id))).toEqual(new Set(expected.keys()))

      // Every request carried its delivery's one id; some went twice (a kill between send and write).
      const got = new Map<string, number>()
      for (const d of destinations) {
        for (const req of w.receiver.requests.filter((r) => r.path === d.path)) {
          const body = JSON.parse(req.body.toString("utf8")) as { id: string; data: { id: string } }
          expect(req.headers["service-delivery"]).toBe(body.id)
          const want = expected.get(body.id)
          expect(want, `delivery ${body.id} is one of the expected ones`).toBeDefined()
          expect([want!.record, want!.path]).toEqual([body.data.id, d.path])
          got.set(body.id, (got.get(body.id) ?? 0) + 1)
        }
      }
      expect(new Set(got.keys())).toEqual(new Set(expected.keys()))

      // The ordered endpoint: each action's three events, delivered, each under its one id; and
      // per action, what arrived is in the order the events happened.
      const actionEvents = await w.db.sql<{ id: string; record_id: string }[]>`
        select e.id::text, e.record_id::text from service.events e where e.record_id = any(${actions}::uuid[])
        order by e.commit_lsn, e.seq`
      expect(actionEvents).toHaveLength(90)
      const rank = new Map<string, { record: string; n: number }>()
      const perRecord = new Map<string, number>()
      for (const e of actionEvents) {
        const n = perRecord.get(e.record_id) ?? 0
        perRecord.set(e.record_id, n + 1)
        rank.set(deliveryId(e.id, ordered.id, null), { record: e.record_id, n })
      }
      await waitFor(
        async () => {
          const r = await w.db.sql<{ state: string }[]>`
            select state from service.webhook_deliveries where endpoint_id = ${ordered.id}`
          return r.length === 90 && r.every((x) => x.state === "succeeded")
        },
        "every ordered delivery written as succeeded",
        120_000
      )
      const seen = new Map<string, number>()
      const arrivedIds = new Set<string>()
      for (const req of w.receiver.requests.filter((r) => r.path === "/crash-ordered")) {
        const body = JSON.parse(req.body.toString("utf8")) as { id: string }
        const at = rank.get(body.id)
        expect(at, `delivery ${body.id} is one of the ordered ones`).toBeDefined()
        expect(at!.n, `record ${at!.record}: no event after a later one`).toBeGreaterThanOrEqual(
          seen.get(at!.record) ?? 0
        )
        seen.set(at!.record, at!.n)
        arrivedIds.add(body.id)
      }
      expect(arrivedIds).toEqual(new Set(rank.keys()))

      // The three that run now share the fan-out partitions between them.
      const owners = await waitFor(
        async () => {
          const r = await w.db.sql<{ owner: string; n: number }[]>`
          select owner::text, count(*)::int as n from service.webhook_fanout_parts where owner is not null and lease_until > now() group by owner`
          return r.length === 3 && r.every((x) => x.n === 4) ? r : null
        },
        "three owners of four partitions each",
        20_000
      )
      expect(new Set(owners.map((o) => o.owner))).toEqual(new Set(live().map((c) => c.stats!.id)))
      // Some were killed between a send and its write: sent again, under the same id.
      const repeats = [...got.values()].filter((n) => n > 1).length
      process.stdout.write(
        `crash test: ${kills} kills, ${expected.size} deliveries, ${repeats} sent again under their id\n`
      )
      expect(repeats).toBeGreaterThan(0)
    } finally {
      for (const c of live()) c.process.kill("SIGKILL")
    }
  })
})
