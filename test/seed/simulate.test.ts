// The simulator plays the app at a rate, stops when told, and its expected-events tally is
// exactly what the rules of docs/events.md#event-kinds derive from the transactions it committed.
import { spawnSync } from "node:child_process"
import { beforeAll, beforeEach, describe, expect, it } from "vitest"
import { EVENT_KINDS } from "../../src/domain/event-kinds.ts"
import { seedDemo } from "../../src/seed/demo.ts"
import { simulate, type SimulationResult } from "../../src/seed/simulate.ts"
import { installEventOracle, oracleEvents } from "./event-oracle.ts"
import { useDatabase } from "../support/fixtures.ts"

const CREATED = {
  incidents: "incident.created",
  observations: "observation.created",
  corrective_actions: "corrective_action.created",
  audits: "audit.created",
  training_records: "training_record.created"
} as const

describe("simulate", () => {
  const db = useDatabase()
  const rowCounts = async () => {
    const out: Record<string, number> = {}
    for (const table of Object.keys(CREATED)) {
      const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from ${db.sql(`app.${table}`)}`
      out[table] = row!.n
    }
    return out
  }
  const total = (r: SimulationResult) => Object.values(r.operations).reduce((a, b) => a + b, 0)

  beforeAll(async () => {
    await seedDemo(db.sql)
    await installEventOracle(db.sql)
  })
  beforeEach(async () => {
    await db.sql`truncate oracle.log`
  })

  it("writes rows at a steady rate for the duration, and tallies the events they fire", async () => {
    const before = await rowCounts()
    const progress: number[] = []
    const result = await simulate(db.sql, {
      rate: 20,
      durationMs: 2000,
      seed: 7,
      progressEveryMs: 500,
      onProgress: (p) => progress.push(p.elapsedMs)
    })
    expect(result.failed, result.errors.join("\n")).toBe(0)
    const attempts = total(result) + result.skipped
    expect(attempts).toBeGreaterThanOrEqual(25) // 40 due; a loaded machine may lag
    expect(attempts).toBeLessThanOrEqual(41)
    expect(result.elapsedMs).toBeGreaterThanOrEqual(1900)
    expect(result.elapsedMs).toBeLessThan(6000) // its 2 s and the last operations in flight, on a loaded machine
    expect(progress.length).toBeGreaterThanOrEqual(2)
    expect(Object.keys(result.events).sort()).toEqual([...EVENT_KINDS].sort())

    // Created events are plain row counts (observations may also be deleted as duplicates).
    const after = await rowCounts()
    for (const [table, event] of Object.entries(CREATED)) {
      const removed = table === "observations" ? result.operations["observation.delete"] : 0
      expect(after[table]! - before[table]! + removed, table).toBe(result.events[event])
    }
    expect(after.incidents! - before.incidents!).toBeGreaterThan(0)
    expect(await oracleEvents(db.sql)).toEqual(result.events)
  })

  it("expects no events for a module the company has turned off, though it writes the records", async () => {
    const [before] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from app.permits p join app.companies c on c.id = p.company_id where c.host = 'globex.localhost'`
    const result = await simulate(db.sql, {
      rate: 40,
      durationMs: 600,
      seed: 3,
      company: "globex.localhost",
      weights: { "permit.request": 1, "permit.progress": 1 }
    })
    expect(result.failed, result.errors.join("\n")).toBe(0)
    const [after] = await db.sql<
      { n: number }[]
    >`select count(*)::int as n from app.permits p join app.companies c on c.id = p.company_id where c.host = 'globex.localhost'`
    expect(after!.n + result.operations["permit.progress"]).toBeGreaterThan(before!.n)
    expect(result.events["permit.approved"]).toBe(0)
    expect(result.events["permit.closed"]).toBe(0)
  })

  it("stops soon after its signal aborts, keeping what it committed", async () => {
    const stop = new AbortController()
    setTimeout(() => stop.abort(), 600)
    const started = Date.now()
    const result = await simulate(db.sql, { rate: 20, durationMs: 30_000, signal: stop.signal, seed: 8 })
    expect(Date.now() - started).toBeLessThan(5000) // of a run of 30 s, aborted at 0.6 s
    expect(total(result)).toBeGreaterThan(0)
    expect(result.failed).toBe(0)
    expect(await oracleEvents(db.sql)).toEqual(result.events)
  })

  it("keeps the tally exact with operations in flight at once, edge cases included", async () => {
    // Every operation, the ones that change a row twice in one transaction made common.
    const result = await simulate(db.sql, {
      rate: Infinity,
      maxOperations: 400,
      concurrency: 4,
      seed: 9,
      weights: {
        "incident.report": 3,
        "observation.report": 3,
        "observation.delete": 1,
        "correctiveAction.raise": 3,
        "correctiveAction.import": 1,
        "correctiveAction.progress": 6,
        "correctiveAction.rework": 3,
        "correctiveAction.quickFix": 3,
        "audit.perform": 2,
        "audit.score": 1,
        "inspection.perform": 3,
        "inspection.regrade": 3,
        "training.record": 2,
        "change.request": 3,
        "change.progress": 5,
        "change.fastTrack": 3,
        "permit.request": 3,
        "permit.progress": 5,
        "worker.edit": 1,
        "worker.hire": 1,
        "jobSite.rename": 1,
        "equipment.relocate": 1,
        "policy.acknowledge": 1,
        "subcontractor.paperwork": 1,
        "incident.progress": 1,
        "observation.close": 1
      }
    })
    expect(result.failed, result.errors.join("\n")).toBe(0)
    expect(total(result) + result.skipped).toBe(400)
    for (const op of [
      "correctiveAction.rework",
      "correctiveAction.quickFix",
      "change.fastTrack",
      "inspection.regrade"
    ] as const) {
      expect(result.operations[op], op).toBeGreaterThan(0)
    }
    for (const kind of EVENT_KINDS) expect(result.events[kind], kind).toBeGreaterThan(0)
    expect(await oracleEvents(db.sql)).toEqual(result.events)
  })

  it.each([
    [["--rate", "5", "--rate", "6"], /Invalid value for flag --rate: "2 occurrences"\. Expected: at most 1 value/],
    [["--rate", "0"], /Invalid value for flag --rate: "0"\. Expected: a number above 0/],
    [["--concurrency", "1.5"], /--concurrency/],
    [["--duration", "5x"], /Invalid value for flag --duration: "5x"\. Expected: 500ms, 30s, 5m or 1h/],
    [["--speed", "3"], /--speed/]
  ])("the command refuses %j with exit code 2, before it touches any database", (args, why) => {
    const r = spawnSync(process.execPath, ["src/faces/cli/simulate.ts", ...args], {
      encoding: "utf8",
      env: { ...process.env, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" }
    })
    expect(r.status).toBe(2)
    expect(r.stdout).toBe("")
    expect(r.stderr).toMatch(why)
    expect(r.stderr).toContain("See: npm run admin -- simulate --help")
  })

  it("refuses an unknown company and a rate that is not above 0", async () => {
    await expect(simulate(db.sql, { rate: 5, durationMs: 100, company: "nope.localhost" })).rejects.toThrow(
      /No company/
    )
    await expect(simulate(db.sql, { rate: 0 })).rejects.toThrow(/rate/)
  })
})
