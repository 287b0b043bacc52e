// A fresh database per test file (or per test), migrated, on the run's one server.
import { randomBytes } from "node:crypto"
import { inject } from "vitest"
import postgres from "postgres"
import { connect } from "../../src/platform/db/Database.ts"
import { ensureDemoAppSchema, prepareDemoDatabase } from "../../src/platform/db/demo-schema.ts"
import { migrate } from "../../src/platform/db/migrate.ts"

export interface TestDatabase {
  readonly name: string
  readonly url: string
  readonly sql: postgres.Sql
  /** Drops replication slots of this database, then the database. */
  readonly drop: () => Promise<void>
}

export const adminUrl = () => inject("pgAdminUrl")

export const urlFor = (database: string) => {
  const u = new URL(adminUrl())
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * A new database: with `migrated` (default true) the demo's app tables and the service's
 * migrations, else empty; `holds` says which of the two alone (the app's or the service's
 * database of a pair: freshSplit).
 */
export const freshDatabase = async (
  options: { migrated?: boolean; holds?: "app" | "service"; prefix?: string } = {}
): Promise<TestDatabase> => {
  const name = `${options.prefix ?? "t"}_${randomBytes(6).toString("hex")}`
  const admin = postgres(adminUrl(), { max: 1, onnotice: () => {} })
  await admin.unsafe(`create database ${name}`)
  await admin.end()
  const url = urlFor(name)
  const sql = connect(url, 5)
  if (options.holds === "app") await ensureDemoAppSchema(sql)
  else if (options.holds === "service") await migrate(sql)
  else if (options.migrated ?? true) await prepareDemoDatabase(sql)
  return {
    name,
    url,
    sql,
    drop: async () => {
      await sql.end({ timeout: 2 })
      const admin = postgres(adminUrl(), { max: 1, onnotice: () => {} })
      try {
        // A terminated walsender leaves its slot active until the process has exited, and a
        // database with an active slot cannot be dropped: retry for a few seconds.
        for (let attempt = 0; ; attempt++) {
          await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`
          await admin`select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = ${name} and not active`
          try {
            await admin.unsafe(`drop database if exists ${name} with (force)`)
            break
          } catch (e) {
            if (attempt >= 50 || !/replication slot/.test((e as Error).message)) throw e
            await new Promise((r) => setTimeout(r, 100))
          }
        }
      } finally {
        await admin.end()
      }
    }
  }
}

/**
 * Two databases on the run's server, as SERVICE_DATABASE_URL deploys the service: `app` holds
 * the demo's app tables only (the app writes there, capture follows it), `service` the
 * service's schema only (capture's state, views, outbox, keys). `name` names the slot.
 */
export interface SplitDatabases {
  readonly app: TestDatabase
  readonly service: TestDatabase
  readonly name: string
  /** Service-side view of the pair for the capture helpers: the service's database, with the app's beside it. */
  readonly capture: { readonly app: { readonly url: string; readonly sql: postgres.Sql } }
  readonly drop: () => Promise<void>
}

export const freshSplit = async (): Promise<SplitDatabases> => {
  const app = await freshDatabase({ holds: "app", prefix: "ta" })
  const service = await freshDatabase({ holds: "service", prefix: "ts" })
  return {
    app,
    service,
    name: service.name,
    capture: { app: { url: app.url, sql: app.sql } },
    drop: async () => {
      await service.drop()
      await app.drop()
    }
  }
}
