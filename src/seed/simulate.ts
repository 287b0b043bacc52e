// Keeps playing the app at a steady rate: operations (operations.ts) chosen by weight, one
// transaction each, until the duration ends, a count is reached or the signal aborts.
// Returns what was done and the events those transactions must fire, for benches and the
// capture tests to compare with the outbox. On a postgres.js handle, as the seed: it plays
// the app, not the service (demo.ts).
import { setTimeout as sleep } from "node:timers/promises"
import type { Sql } from "postgres"
import { EVENT_KINDS, EVENT_RESOURCE, type EventKind } from "../domain/event-kinds.ts"
import { DEMO_HOST } from "./demo.ts"
import {
  DEFAULT_WEIGHTS,
  type Effects,
  OPERATION_NAMES,
  OPERATIONS,
  type OperationName,
  type SimulationContext,
  type Tx
} from "./operations.ts"
import { seededRandom } from "./random.ts"
import type { CompanyRefs, EquipmentRef, Ref } from "./records.ts"

export { DEFAULT_WEIGHTS, OPERATION_NAMES, type OperationName } from "./operations.ts"

export interface SimulateOptions {
  /** Operations per second; Infinity runs them back to back. */
  readonly rate: number
  /** Stop after this long (default: until the signal aborts or maxOperations is reached). */
  readonly durationMs?: number
  /** Stop after this many operations have been attempted. */
  readonly maxOperations?: number
  readonly signal?: AbortSignal
  /** The company's host (default acme.localhost); it must exist (npm run seed). */
  readonly company?: string
  /** Seed of the choices (default: from the clock). */
  readonly seed?: number
  /** Operations in flight at once (default 1); the rate is shared between them. */
  readonly concurrency?: number
  /** Replaces the default weights; an operation left out (or 0) is never done. */
  readonly weights?: Partial<Record<OperationName, number>>
  readonly progressEveryMs?: number
  readonly onProgress?: (progress: SimulationProgress) => void
}

export interface SimulationProgress {
  readonly elapsedMs: number
  /** Committed operations that wrote something, per operation. */
  readonly operations: Record<OperationName, number>
  /** Attempts that found nothing to act on (e.g. no open permit); nothing was written. */
  readonly skipped: number
  /** Transactions that failed and rolled back; they count nowhere else. */
  readonly failed: number
  /** Events the committed transactions must fire, per event kind (all 11 keys). */
  readonly events: Record<EventKind, number>
}

export interface SimulationResult extends SimulationProgress {
  readonly companyId: string
  readonly host: string
  /** The first few failures' messages. */
  readonly errors: ReadonlyArray<string>
}

const zeros = <K extends string>(keys: ReadonlyArray<K>) =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>

const SUPERVISORS = ["Foreman", "Site supervisor", "Safety officer"]

/** What the operations point at, read once at the start (hires are added as they commit). */
export const loadContext = async (sql: Sql, host: string, seed: number): Promise<SimulationContext> => {
  const [company] = await sql<
    { id: string; host: string }[]
  >`select id, host from app.companies where lower(host) = lower(${host})`
  if (!company) throw new Error(`No company with host ${host}: run "npm run seed" first, or pass --company <host>.`)
  const id = company.id
  const [jobSites, workers, equipment, subcontractors, users, [incidents]] = await Promise.all([
    sql<Ref[]>`select id, name, created_at as at from app.job_sites where company_id = ${id} and active`,
    sql<
      (Ref & { job_title: string | null })[]
    >`select id, name, job_title, created_at as at from app.workers where company_id = ${id} and status = 'active'`,
    sql<
      EquipmentRef[]
    >`select id, name, coalesce(category, 'Ladder') as category, created_at as at from app.equipment where company_id = ${id}`,
    sql<
      Ref[]
    >`select id, name, created_at as at from app.subcontractors where company_id = ${id} and status = 'active'`,
    sql<{ name: string }[]>`select name from app.users where company_id = ${id}`,
    sql<
      { n: number }[]
    >`select coalesce(max(substring(reference from '[0-9]+$')::int), 0)::int as n from app.incidents where company_id = ${id}`
  ])
  const staff = [
    ...users.map((u) => u.name),
    ...workers.filter((w) => SUPERVISORS.includes(w.job_title ?? "")).map((w) => w.name)
  ]
  const refs: CompanyRefs = {
    companyId: id,
    slug: company.host.split(".")[0] ?? "company",
    mailDomain: `${company.host.split(".")[0] ?? "company"}.example`,
    jobSites: [...jobSites],
    workers: workers.map(({ id, name, at }) => ({ id, name, at })),
    equipment: [...equipment],
    subcontractors: [...subcontractors],
    staff: staff.length > 0 ? staff : ["Site Supervisor"]
  }
  return { host: company.host, r: seededRandom(seed), refs, nextIncident: (incidents?.n ?? 0) + 1 }
}

export const simulate = async (sql: Sql, options: SimulateOptions): Promise<SimulationResult> => {
  const { rate, signal } = options
  if (!(rate > 0)) throw new RangeError(`rate must be above 0 (operations per second), not ${rate}`)
  const ctx = await loadContext(sql, options.company ?? DEMO_HOST, options.seed ?? Date.now())
  const weights = Object.fromEntries(
    Object.entries(options.weights ?? DEFAULT_WEIGHTS).filter(([name, w]) => (w ?? 0) > 0 && name in OPERATIONS)
  ) as Partial<Record<OperationName, number>>
  if (Object.keys(weights).length === 0) throw new RangeError("no operation has a weight above 0")

  // The service makes no events for a module the company has turned off (its records still
  // reach the views): only those of modules that are on are expected.
  const modulesOn = new Set(
    (
      await sql<
        { module: string }[]
      >`select module from app.company_modules where company_id = ${ctx.refs.companyId} and enabled`
    ).map((m) => m.module)
  )
  const operations = zeros(OPERATION_NAMES)
  const events = zeros(EVENT_KINDS)
  const errors: string[] = []
  let skipped = 0
  let failed = 0
  const started = performance.now()
  const elapsed = () => performance.now() - started
  const snapshot = (): SimulationProgress => ({
    elapsedMs: Math.round(elapsed()),
    operations: { ...operations },
    skipped,
    failed,
    events: { ...events }
  })

  const deadline = options.durationMs === undefined ? Infinity : started + options.durationMs
  const interval = Number.isFinite(rate) ? 1000 / rate : 0
  const done = () => signal?.aborted === true || performance.now() >= deadline
  let slot = 0
  let origin = started

  // Operations in flight at once can deadlock (one deletes an observation while another closes
  // its action): PostgreSQL rolls one back, and the app, like any client, runs it again.
  const RETRIED = new Set(["40P01", "40001"]) // deadlock_detected, serialization_failure
  const attempt = async (name: OperationName, tries = 5): Promise<Effects | null> => {
    try {
      return await sql.begin((tx) => OPERATIONS[name](tx as unknown as Tx, ctx))
    } catch (cause) {
      const code = (cause as { code?: unknown }).code
      if (tries > 1 && typeof code === "string" && RETRIED.has(code)) return attempt(name, tries - 1)
      throw cause
    }
  }

  const runOne = async (name: OperationName) => {
    try {
      const effects = await attempt(name)
      if (effects === null) {
        skipped++
        return
      }
      operations[name]++
      for (const e of effects.events) if (modulesOn.has(EVENT_RESOURCE[e])) events[e]++
      effects.committed?.()
    } catch (cause) {
      failed++
      if (errors.length < 10) errors.push(`${name}: ${cause instanceof Error ? cause.message : String(cause)}`)
    }
  }

  const loop = async () => {
    while (!done()) {
      const i = slot++
      if (options.maxOperations !== undefined && i >= options.maxOperations) return
      const due = origin + i * interval
      const wait = Math.min(due, deadline) - performance.now()
      if (wait > 0) {
        try {
          await sleep(wait, undefined, signal ? { signal } : undefined)
        } catch {
          return // aborted while waiting
        }
      } else if (-wait > 1000) {
        // More than a second behind (the database is slower than the rate): do not burst.
        origin = performance.now() - i * interval
      }
      if (done()) return
      await runOne(ctx.r.weighted(weights))
    }
  }

  const timer =
    options.onProgress === undefined
      ? undefined
      : setInterval(() => options.onProgress!(snapshot()), options.progressEveryMs ?? 5000)
  timer?.unref()
  try {
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 1) }, loop))
  } finally {
    if (timer) clearInterval(timer)
  }
  return { ...snapshot(), companyId: ctx.refs.companyId, host: ctx.host, errors }
}
