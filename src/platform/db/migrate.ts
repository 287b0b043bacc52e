// Ordered migrations of the service's own schema from sql/ (migrations.ts reads them), each
// applied once and recorded. They never touch the app's tables (the demo's copy,
// sql/demo/app.sql, is applied apart).
//
// Online (docs/design.md, "Online migrations"): processes of the release before keep serving
// while a new one migrates, so no migration may hold a lock their reads, capture or deliveries
// wait on for long.
// - Each migration commits on its own: one's locks are gone before the next begins.
// - A `steps` migration runs its statements that cannot share a transaction (an index built
//   concurrently, a backfill committing its batches) alone, and the rest in transactions
//   between them; each finished step is recorded, so a run cut short resumes at the step it
//   was in (steps are written to be run again).
// - A statement waiting for a lock holds up everyone queued behind it: every lock is asked for
//   with a short lock_timeout, and on a timeout the transaction is rolled back and tried again a
//   little later, with a longer timeout, up to LOCK_TIMEOUTS_MS's last. Statements whose locks
//   leave reads and writes alone (CONCURRENTLY, VALIDATE CONSTRAINT) wait as long as it takes.
// - The whole run holds a session advisory lock, so processes starting together apply each
//   migration once; the others wait for it, polling (takeRunLock).
//
// Before any migration, the runner makes its own tables (the applied migrations, the steps
// done, the schema fence) and the fence's guard (fence.ts); each migration records the schema
// generation it reached and raises the fence if it says so, in its own transaction.
import type { ReservedSql, Sql } from "postgres"
import { syncDeclared } from "./declared.ts"
import { ensureGuards, installFence, raiseFence, recordGeneration } from "./fence.ts"
import { compareReleases, RELEASE } from "../release.ts"
import {
  accepts,
  loadMigrations,
  recordedChecksum,
  stepsOf,
  waitsWithoutBlocking,
  type Migration
} from "./migrations.ts"

export { loadMigrations, type Migration } from "./migrations.ts"

const LOCK_KEY = 7_351_009_001 // arbitrary, stable: "migrations of this service"

/** lock_timeout of successive tries of a statement that blocks others while it waits for a lock (the last repeats). */
export const LOCK_TIMEOUTS_MS: ReadonlyArray<number> = [50, 100, 200, 300, 400, 500]
/** How long a migration keeps trying for its locks before the start gives up, naming who holds them. */
const LOCK_PATIENCE_MS = 15 * 60_000

/** What the runner does, as it does it (the service logs it; bench:upgrade times it). */
export type MigrationEvent =
  | { readonly kind: "start"; readonly name: string; readonly steps: number; readonly from: number }
  | { readonly kind: "step"; readonly name: string; readonly step: number; readonly ms: number }
  | { readonly kind: "applied"; readonly name: string; readonly ms: number }
  | {
      readonly kind: "lock-timeout"
      readonly name: string
      readonly attempt: number
      readonly timeoutMs: number
      readonly holders: ReadonlyArray<string>
    }

export interface MigrateOptions {
  readonly onEvent?: (e: MigrationEvent) => void
  readonly lockTimeoutsMs?: ReadonlyArray<number>
  readonly lockPatienceMs?: number
}

/** Applies pending migrations; returns the names it applied. */
export const migrate = async (
  sql: Sql,
  migrations: ReadonlyArray<Migration> = loadMigrations(),
  options: MigrateOptions = {}
): Promise<ReadonlyArray<string>> => {
  const conn = await sql.reserve()
  try {
    await takeRunLock(conn)
    try {
      return await run(new Runner(conn, options), migrations)
    } finally {
      await conn`select pg_advisory_unlock(${LOCK_KEY})`.catch(() => {})
      await conn`reset lock_timeout`.catch(() => {})
    }
  } finally {
    conn.release()
  }
}

/**
 * The run's advisory lock, polled for: a session waiting in pg_advisory_lock would hold a
 * snapshot all along, and an index the other runner builds concurrently waits for every older
 * snapshot to end, so the two would wait for each other for ever.
 */
const takeRunLock = async (conn: ReservedSql) => {
  for (;;) {
    const [r] = await conn<{ ok: boolean }[]>`select pg_try_advisory_lock(${LOCK_KEY}) as ok`
    if (r?.ok) return
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
}

const run = async (r: Runner, migrations: ReadonlyArray<Migration>) => {
  await r.transaction("(bootstrap)", bootstrap)
  const done = new Map(
    (await r.conn<{ name: string; checksum: string }[]>`select name, checksum from service.schema_migrations`).map(
      (row) => [row.name, row.checksum] as const
    )
  )
  const applied: string[] = []
  for (const m of migrations) {
    const seen = done.get(m.name)
    if (seen !== undefined) {
      if (!accepts(m, seen))
        throw new Error(`Migration ${m.name} was changed after it was applied; add a new migration instead.`)
      continue
    }
    // Raising the fence above this build would fence out the very process applying it.
    if (m.fence !== null && compareReleases(m.fence, RELEASE.version) > 0)
      throw new Error(
        `Migration ${m.name} raises the schema fence to release ${m.fence}, newer than this build's ${RELEASE.version}: package.json's version must be ${m.fence} or newer`
      )
    const t0 = Date.now()
    await (m.steps ? applySteps(r, m) : applyWhole(r, m))
    r.event({ kind: "applied", name: m.name, ms: Date.now() - t0 })
    applied.push(m.name)
  }
  await r.transaction("(declared functions)", syncDeclared)
  return applied
}

/**
 * The runner's own tables, made when missing: in a least-privilege deployment a DBA made the
 * schema, owned by the service's role, and the role may not create schemas.
 */
const bootstrap = async (tx: ReservedSql) => {
  const [schema] = await tx<
    { ok: boolean }[]
  >`select exists (select 1 from pg_namespace where nspname = 'service') as ok`
  if (!schema?.ok) await tx.unsafe(`create schema service`)
  await tx.unsafe(`
    create table if not exists service.schema_migrations (
      name text primary key,
      checksum text not null,
      applied_at timestamptz not null default now()
    )`)
  await tx.unsafe(`
    create table if not exists service.schema_migration_steps (
      name text primary key,
      checksum text not null,
      done integer not null,
      at timestamptz not null default now()
    )`)
  await installFence(tx)
}

/** Records a migration as applied, with the generation it reached; guards the fenced tables it made. */
const record = async (tx: ReservedSql, m: Migration) => {
  await tx`insert into service.schema_migrations (name, checksum) values (${m.name}, ${recordedChecksum(m)})`
  await recordGeneration(tx, m.number)
  await ensureGuards(tx)
}

const applyWhole = async (r: Runner, m: Migration) => {
  r.event({ kind: "start", name: m.name, steps: 1, from: 0 })
  await r.transaction(m.name, async (tx) => {
    if (m.fence !== null) await raiseFence(tx, m.fence, m.name)
    await tx.unsafe(m.sql)
    await record(tx, m)
  })
}

const applySteps = async (r: Runner, m: Migration) => {
  const steps = stepsOf(m.sql)
  const [progress] = await r.conn<{ checksum: string; done: number }[]>`
    select checksum, done from service.schema_migration_steps where name = ${m.name}`
  const from = progress?.checksum === m.checksum ? progress.done : 0
  r.event({ kind: "start", name: m.name, steps: steps.length, from })
  // The fence rises before the first step changes anything.
  if (m.fence !== null) await r.transaction(m.name, (tx) => raiseFence(tx, m.fence!, m.name))
  const markDone = (tx: ReservedSql, n: number) => tx`
    insert into service.schema_migration_steps (name, checksum, done) values (${m.name}, ${m.checksum}, ${n})
    on conflict (name) do update set checksum = excluded.checksum, done = excluded.done, at = now()`
  for (let i = from; i < steps.length; i++) {
    const t0 = Date.now()
    const step = steps[i]!
    if (step.alone) {
      await r.alone(m.name, step.statements[0]!)
      await markDone(r.conn, i + 1)
    } else {
      await r.transaction(m.name, async (tx) => {
        for (const s of step.statements) await tx.unsafe(s)
        await markDone(tx, i + 1)
      })
    }
    r.event({ kind: "step", name: m.name, step: i + 1, ms: Date.now() - t0 })
  }
  await r.transaction(m.name, async (tx) => {
    await record(tx, m)
    await tx`delete from service.schema_migration_steps where name = ${m.name}`
  })
}

const LOCK_NOT_AVAILABLE = "55P03"
const DEADLOCK = "40P01"

/** The runner's connection, its lock discipline and what it reports. */
class Runner {
  readonly conn: ReservedSql
  private readonly options: MigrateOptions
  private readonly timeouts: ReadonlyArray<number>
  private readonly patienceMs: number
  constructor(conn: ReservedSql, options: MigrateOptions) {
    this.conn = conn
    this.options = options
    this.timeouts = options.lockTimeoutsMs ?? LOCK_TIMEOUTS_MS
    this.patienceMs = options.lockPatienceMs ?? LOCK_PATIENCE_MS
  }

  event(e: MigrationEvent) {
    this.options.onEvent?.(e)
  }

  /** `f` in one transaction whose every lock is asked for with a short timeout; tried again when one times out. */
  transaction<A>(name: string, f: (tx: ReservedSql) => Promise<A>): Promise<A> {
    return this.retrying(name, async (timeoutMs) => {
      await this.conn.unsafe("begin")
      try {
        await this.conn.unsafe(`set local lock_timeout = ${timeoutMs}`)
        const a = await f(this.conn)
        await this.conn.unsafe("commit")
        return a
      } catch (e) {
        await this.conn.unsafe("rollback").catch(() => {})
        throw e
      }
    })
  }

  /** A statement that cannot run in a transaction. */
  async alone(name: string, statement: string): Promise<void> {
    const index = /^\s*create\s+(?:unique\s+)?index\s+concurrently\s+(?:if\s+not\s+exists\s+)?"?(\w+)"?/im.exec(
      statement.replace(/--[^\n]*/g, "")
    )?.[1]
    // A concurrent build cut short leaves its index invalid, and IF NOT EXISTS would keep it.
    if (index !== undefined) await this.dropInvalid(index)
    if (waitsWithoutBlocking(statement)) {
      await this.conn.unsafe("set lock_timeout = 0")
      await this.conn.unsafe(statement)
    } else {
      await this.retrying(name, async (timeoutMs) => {
        await this.conn.unsafe(`set lock_timeout = ${timeoutMs}`)
        await this.conn.unsafe(statement)
      })
    }
    if (index !== undefined && (await this.invalid(index)))
      throw new Error(`Migration ${name}: the index service.${index} was built invalid`)
  }

  private async invalid(index: string): Promise<boolean> {
    const [r] = await this.conn<{ invalid: boolean }[]>`
      select not i.indisvalid as invalid from pg_index i join pg_class c on c.oid = i.indexrelid
        join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'service' and c.relname = ${index}`
    return r?.invalid ?? false
  }

  private async dropInvalid(index: string) {
    if (await this.invalid(index)) {
      await this.conn.unsafe("set lock_timeout = 0")
      await this.conn.unsafe(`drop index concurrently if exists service.${index}`)
    }
  }

  private async retrying<A>(name: string, attempt: (timeoutMs: number) => Promise<A>): Promise<A> {
    const started = Date.now()
    for (let n = 1; ; n++) {
      const timeoutMs = this.timeouts[Math.min(n, this.timeouts.length) - 1]!
      try {
        return await attempt(timeoutMs)
      } catch (e) {
        const code = (e as { code?: string }).code
        if (code !== LOCK_NOT_AVAILABLE && code !== DEADLOCK) throw e
        const holders = await this.longTransactions()
        if (Date.now() - started > this.patienceMs)
          throw new Error(
            `Migration ${name} could not take its locks in ${Math.round((Date.now() - started) / 1000)} s (${n} tries); long transactions on the service's database: ${holders.join("; ") || "none now"}`
          )
        this.event({ kind: "lock-timeout", name, attempt: n, timeoutMs, holders })
        await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** n, 5_000) * (0.5 + Math.random() / 2)))
      }
    }
  }

  /** Sessions in a transaction for more than a second: who may hold the lock a migration waits for. */
  private async longTransactions(): Promise<Array<string>> {
    const rows = await this.conn<{ pid: number; name: string; secs: number; query: string }[]>`
      select pid, application_name as name, extract(epoch from now() - xact_start)::int as secs, left(query, 80) as query
        from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid() and xact_start < now() - interval '1 second'
       order by xact_start limit 5`
    return rows.map((r) => `pid ${r.pid} (${r.name || "no name"}) for ${r.secs} s: ${r.query}`)
  }
}
