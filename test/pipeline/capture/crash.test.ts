// Crash safety: the capture process is killed (SIGKILL) at random moments while the app
// writes thousands of transactions. Afterwards the views equal a fresh projection and the
// outbox holds exactly the events the writer's transitions call for.
import { spawn, type ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { simulate } from "../../../src/seed/simulate.ts"
import { catchUp } from "../../support/capture.ts"
import { diffAgainstFreshProjection } from "../../support/projection.ts"
import { useDemoDatabase } from "../../support/fixtures.ts"

const CHILD = fileURLToPath(new URL("../../support/capture-child.ts", import.meta.url))

describe("capture survives SIGKILL at random moments", () => {
  const db = useDemoDatabase()

  it("views and outbox end exact after repeated kills", { timeout: 240_000 }, async () => {
    const slot = `slot_${db.name}`
    // The first start builds the views from the seeded rows (no events for those).
    await catchUp(db, { slot })
    let child: ChildProcess | null = null
    const startChild = () => {
      child = spawn(process.execPath, [CHILD], {
        env: { ...process.env, CAPTURE_URL: db.url, CAPTURE_SLOT: slot, CAPTURE_BATCH: "200", CAPTURE_LARGE: "300" },
        stdio: "ignore"
      })
    }
    startChild()
    const writer = simulate(db.sql, {
      rate: Infinity,
      maxOperations: 3000,
      concurrency: 2,
      company: "acme.localhost",
      seed: 42
    })
    let finished = false
    void writer.finally(() => (finished = true))
    let kills = 0
    let killsWhileWriting = 0
    while (!finished || kills < 6) {
      await new Promise((r) => setTimeout(r, 150 + Math.floor(Math.random() * 900)))
      const c = child as ChildProcess | null
      if (c && c.exitCode === null) {
        c.kill("SIGKILL")
        await new Promise((r) => c.once("exit", r))
        kills++
        if (!finished) killsWhileWriting++
      }
      startChild()
      if (kills >= 12 && finished) break
    }
    const result = await writer
    expect(result.failed).toBe(0)
    ;(child as ChildProcess | null)?.kill("SIGKILL")
    // A last, clean run catches up.
    await new Promise((r) => setTimeout(r, 300))
    await catchUp(db, { slot }, 30_000)

    const counts = await db.sql<
      { event: string; n: number }[]
    >`select event, count(*)::int as n from service.events group by event`
    const actual = Object.fromEntries(counts.map((r) => [r.event, r.n]))
    const expected = Object.fromEntries(Object.entries(result.events).filter(([, n]) => n > 0))
    expect(kills).toBeGreaterThanOrEqual(6)
    expect(killsWhileWriting).toBeGreaterThanOrEqual(3)
    expect(actual).toEqual(expected)

    const { diff, views } = await diffAgainstFreshProjection(db)
    expect(views).toBeGreaterThan(1000)
    expect(diff).toEqual([])
  })
})
