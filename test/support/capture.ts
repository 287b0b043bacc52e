import pg from "pg"
// Runs the real capture loop against a test database, and waits for it to catch up.
import { Effect, Fiber, Logger, Schedule } from "effect"
import type { Sql } from "postgres"
import { captureRun, CaptureStats, type CaptureOptions } from "../../src/pipeline/capture/run.ts"
import { lineLogger } from "../../src/platform/logging.ts"
import { parseLsn } from "../../src/platform/db/lsn.ts"
import { makeCompany } from "./app.ts"
import type { TestDatabase } from "./db.ts"
import { useDatabase, useResource } from "./fixtures.ts"
import { eventPayload } from "../../src/pipeline/outbox/events.ts"

export interface RunningCapture {
  readonly stats: CaptureStats
  readonly logs: Array<{ level: string; message: string; fields?: Record<string, unknown> }>
  /** Resolves once everything committed before the call is applied. */
  readonly settle: (timeoutMs?: number) => Promise<void>
  readonly stop: () => Promise<void>
  readonly done: Promise<void>
}

/** Where capture's log lines go: by default into `logs`. */
export type CaptureLog = (level: string, message: string, fields?: Record<string, unknown>) => void

export const startCapture = (
  db: Pick<TestDatabase, "sql" | "url" | "name">,
  options: Partial<CaptureOptions> & { readonly log?: CaptureLog } = {}
): RunningCapture => {
  const stats = new CaptureStats()
  const logs: Array<{ level: string; message: string; fields?: Record<string, unknown> }> = []
  const { log = (level, message, fields) => logs.push({ level, message, ...(fields ? { fields } : {}) }), ...rest } =
    options
  const opts: CaptureOptions = {
    url: db.url,
    slot: `slot_${db.name}`,
    publication: "safety_records_service",
    batchChanges: 2000,
    heartbeatMs: 60_000,
    ...rest
  }
  // Like the service: a failed run (connection lost, server restarted) is retried.
  const errors: unknown[] = []
  const fiber = Effect.runFork(
    captureRun(db.sql, opts, stats).pipe(
      Effect.tapError((e) =>
        Effect.sync(() => {
          errors.push(e)
          logs.push({ level: "retry", message: String(e) })
        })
      ),
      Effect.retry(Schedule.spaced("200 millis")),
      Effect.provide(Logger.layer([lineLogger((level, message, fields) => log(level, message, fields))]))
    )
  )
  const done = Effect.runPromise(Fiber.await(fiber)).then(() => {})
  // A mark in the app's WAL (its own database's, with two databases).
  const appSql = opts.app?.sql ?? db.sql
  const settle = async (timeoutMs = 20_000) => {
    const [row] = await appSql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'test-sync', '')::text as lsn`
    const target = parseLsn(row!.lsn)
    const deadline = Date.now() + timeoutMs
    while (stats.checkpoint < target) {
      if (Date.now() > deadline) {
        throw new Error(
          `capture did not catch up (checkpoint ${stats.checkpoint}, target ${target}); errors: ${errors.map(String).join("; ")}; logs: ${logs.map((l) => l.message).join(" | ")}; running=${stats.running} streaming=${stats.streaming}`
        )
      }
      await new Promise((r) => setTimeout(r, 10))
    }
  }
  return {
    stats,
    logs,
    settle,
    done,
    stop: async () => {
      await Effect.runPromise(Fiber.interrupt(fiber))
      await done
    }
  }
}

/** Reads a view's record, or undefined. */
export const view = async (sql: Sql, resource: string, id: string): Promise<Record<string, unknown> | undefined> => {
  const [row] = await sql<
    { body: string }[]
  >`select body from service.views where resource = ${resource} and id = ${id}`
  return row ? (JSON.parse(row.body) as Record<string, unknown>) : undefined
}

export const outbox = async (sql: Sql) =>
  (
    await sql<{ event: string; record_id: string; payload: string; commit_lsn: string; seq: number }[]>`
    select e.event, e.record_id::text, ${sql.unsafe(eventPayload("e"))} as payload, e.commit_lsn::text, e.seq
    from service.events e order by e.commit_lsn, e.seq`
  ).map((e) => ({
    ...e,
    data: JSON.parse(e.payload) as Record<string, unknown>
  }))

export interface CaptureWorld {
  readonly db: TestDatabase
  readonly cap: RunningCapture
  readonly company: { id: string; host: string }
}

/**
 * Capture started, caught up (within `timeoutMs`) and stopped: a first start builds the
 * views from the rows there (no events for those); a later one drains what was written meanwhile.
 */
export const catchUp = async (
  db: Pick<TestDatabase, "sql" | "url" | "name">,
  options: Partial<CaptureOptions> = {},
  timeoutMs = 60_000
) => {
  const cap = startCapture(db, options)
  await cap.settle(timeoutMs)
  await cap.stop()
}

/** Capture running on the database (caught up before the tests start), stopped afterwards. */
export const useCapture = (
  db: Pick<TestDatabase, "sql" | "url" | "name">,
  options: Partial<CaptureOptions> & { settleMs?: number } = {}
): RunningCapture => {
  const { settleMs, ...rest } = options
  return useResource(
    "capture",
    async () => {
      const cap = startCapture(db, rest)
      await cap.settle(settleMs)
      return cap
    },
    (cap) => cap.stop()
  )
}

/** For a describe block: a fresh database with one company and capture running and caught up. */
export const useCaptureWorld = (): CaptureWorld => {
  const db = useDatabase()
  const company = useResource(
    "the company",
    () => makeCompany(db.sql),
    async () => {}
  )
  const cap = useCapture(db)
  return { db, cap, company }
}

/**
 * Makes the decoder reject one numeric value, as it would any value it cannot read (it reads
 * numeric with pg-types' parser); returns what puts the parser back. The decoder takes the parser
 * at a table's next Relation message.
 */
export const rejectingNumeric = (value: string): (() => void) => {
  const original = pg.types.getTypeParser(1700)
  pg.types.setTypeParser(1700, (v: string) => {
    if (v === value) throw new Error("unreadable numeric")
    return v
  })
  return () => pg.types.setTypeParser(1700, original)
}
