// Ordered migrations of the service's own schema from sql/, each applied once and recorded.
// They never touch the app's tables (the demo's copy, sql/demo/app.sql, is applied apart).
// The whole run holds a transaction-scoped advisory lock, so two processes starting
// together apply them once.
import { createHash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type { Sql } from "postgres"

const SQL_DIR = fileURLToPath(new URL("../../../sql/", import.meta.url))
const LOCK_KEY = 7_351_009_001 // arbitrary, stable: "migrations of this service"

export interface Migration {
  readonly name: string
  readonly sql: string
  readonly checksum: string
}

export const loadMigrations = (dir = SQL_DIR): ReadonlyArray<Migration> =>
  readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((name) => {
      const sql = readFileSync(dir + name, "utf8")
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") }
    })

/** Applies pending migrations; returns the names it applied. */
export const migrate = async (sql: Sql, migrations = loadMigrations()): Promise<ReadonlyArray<string>> =>
  sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${LOCK_KEY})`
    // In a least-privilege deployment a DBA made the schema, owned by the service's role,
    // and the role may not create schemas: create it only when it is missing.
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
    const done = new Map(
      (await tx<{ name: string; checksum: string }[]>`select name, checksum from service.schema_migrations`).map(
        (r) => [r.name, r.checksum] as const
      )
    )
    const applied: string[] = []
    for (const m of migrations) {
      const seen = done.get(m.name)
      if (seen !== undefined) {
        if (seen !== m.checksum) {
          throw new Error(`Migration ${m.name} was changed after it was applied; add a new migration instead.`)
        }
        continue
      }
      await tx.unsafe(m.sql)
      await tx`insert into service.schema_migrations (name, checksum) values (${m.name}, ${m.checksum})`
      applied.push(m.name)
    }
    return applied
  })
