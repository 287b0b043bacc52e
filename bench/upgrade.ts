// bench:upgrade: an upgrade as an operator meets it, from the oldest migration state this
// repository can build (the first commit's migrations: sql/002 alone) to today's, on a database
// of N records (default 1,000,000 corrective actions, workers and incidents, each with its
// mirror row and an event), while the release before keeps serving beside it:
// - a reader, as the read API reads: a record by id every 5 ms, a page of the events feed
//   every 50 ms;
// - a writer, as capture writes: every 20 ms a batch of 10 records in one transaction (their
//   mirror rows read, their views updated, an event each, their mirror rows written), with the
//   settings capture sets, and stamped with this release so that the fence lets it write.
// The same upgrade runs twice, each on its own copy of the same database: first by the runner
// of releases before 0.2.0 (the baseline: every pending migration in one transaction, in the
// texts those releases applied), then by today's runner. Prints, for each: how long the
// upgrade took, how many reads and batches ran meanwhile, their median before it, and the
// longest wait of a read and of a batch during it, with the migration that was running then.
//
//   npm run bench:upgrade                         1,000,000 records
//   npm run bench:upgrade -- --records 100000
//   npm run bench:upgrade -- --from 21            from the state of the release of 2026-11-26 morning
//                                                 (its last migration sql/021), not from sql/002
//   npm run bench:upgrade -- --only today         today's runner alone
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { parseArgs } from "node:util"
import postgres from "postgres"
import { connect, databaseUrl } from "../src/platform/db/Database.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { migrate, type MigrationEvent } from "../src/platform/db/migrate.ts"
import { loadMigrations, parseMigration, type Migration } from "../src/platform/db/migrations.ts"
import { freePort } from "../test/support/net.ts"
import { fmt, percentile, table } from "./support.ts"

const USAGE = "usage: npm run bench:upgrade -- [--records N] [--from MIGRATION_NUMBER] [--only baseline|today]"
const args = (() => {
  try {
    return parseArgs({
      options: {
        records: { type: "string", default: "1000000" },
        from: { type: "string", default: "2" },
        only: { type: "string" }
      },
      strict: true
    }).values
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`)
    process.exit(2)
  }
})()
const RECORDS = Number(args.records)
if (!Number.isInteger(RECORDS) || RECORDS < 1000) {
  console.error(`--records must be a whole number, 1000 or more, not "${args.records}"\n${USAGE}`)
  process.exit(2)
}
const FROM = Number(args.from)
if (!loadMigrations().some((m) => m.number === FROM)) {
  console.error(`--from must be the number of a migration in sql/, not "${args.from}"\n${USAGE}`)
  process.exit(2)
}
if (args.only !== undefined && args.only !== "baseline" && args.only !== "today") {
  console.error(`--only must be baseline or today, not "${args.only}"\n${USAGE}`)
  process.exit(2)
}

const ROOT = fileURLToPath(new URL("..", import.meta.url))
const RELEASED = join(ROOT, "test/platform/db/released/")
const COMPANIES = 5
const READ_EVERY_MS = 5
const FEED_EVERY_MS = 50
const WRITE_EVERY_MS = 20
const BATCH = 10

/** The migrations as releases before 0.2.0 applied them: the released text of each one rewritten since. */
const releasedMigrations = (): ReadonlyArray<Migration> => {
  const released = new Map(readdirSync(RELEASED).map((n) => [n, readFileSync(RELEASED + n, "utf8")] as const))
  return loadMigrations().map((m) => (released.has(m.name) ? parseMigration(m.name, released.get(m.name)!) : m))
}

/**
 * The runner of releases before 0.2.0, as it was: every pending migration in one transaction.
 * A deadlock with the writer rolls it all back; the service then failed to start and was
 * started again: so is it here, and the tries are counted.
 */
const oneTransaction = async (sql: postgres.Sql, migrations: ReadonlyArray<Migration>, at: (name: string) => void) => {
  for (let tries = 1; ; tries++) {
    try {
      return await oneTransactionOnce(sql, migrations, at)
    } catch (e) {
      if ((e as { code?: string }).code !== "40P01" || tries >= 5) throw e
      console.log(`the one-transaction runner was a deadlock's victim (try ${tries}): rolled back, started again`)
    }
  }
}

const oneTransactionOnce = async (
  sql: postgres.Sql,
  migrations: ReadonlyArray<Migration>,
  at: (name: string) => void
) =>
  sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(7351009001)`
    const done = new Set((await tx<{ name: string }[]>`select name from service.schema_migrations`).map((r) => r.name))
    for (const m of migrations) {
      if (done.has(m.name)) continue
      at(m.name)
      await tx.unsafe(m.sql)
      await tx`insert into service.schema_migrations (name, checksum) values (${m.name}, ${m.checksum})`
    }
  })

/** The database as the first commit's release left it (sql/002 alone), with N records. */
const buildOldest = async (sql: postgres.Sql) => {
  const first = loadMigrations().filter((m) => m.number === 2)
  await sql.begin(async (tx) => {
    await tx.unsafe("create schema service")
    await tx.unsafe(
      "create table service.schema_migrations (name text primary key, checksum text not null, applied_at timestamptz not null default now())"
    )
    await tx.unsafe(first[0]!.sql)
    await tx`insert into service.schema_migrations (name, checksum) values (${first[0]!.name}, ${first[0]!.checksum})`
  })
  const t0 = Date.now()
  for (let from = 1; from <= RECORDS; from += 100_000) {
    const to = Math.min(RECORDS, from + 99_999)
    // Corrective actions (status), one in ten a worker (name), one in ten an incident.
    await sql`
      with g as (
        select n, md5('r' || n)::uuid as id, md5('c' || (n % ${COMPANIES}))::uuid as company,
               case when n % 10 = 0 then 'workers' when n % 10 = 1 then 'incidents' else 'corrective-actions' end as resource,
               timestamptz '2024-01-01' + n * interval '1 minute' as created
          from generate_series(${from}::int, ${to}::int) n
      ), v as (
        insert into service.views (resource, id, company_id, created_at, name, status, body)
        select resource, id, company, created,
               case when resource = 'workers' then 'Worker ' || n end,
               case when resource = 'corrective-actions' then (array['open', 'in_progress', 'done'])[1 + n % 3] end,
               json_build_object('id', id, 'companyId', company, 'title', 'Record ' || n, 'description', repeat('x', 300),
                 'createdAt', to_char(created at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                 'updatedAt', to_char(created at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text
          from g
      ), r as (
        insert into service.rows (tbl, key, company_id, data)
        select replace(resource, '-', '_'), id::text, company, jsonb_build_object('id', id, 'title', 'Record ' || n)
          from g
      )
      insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
      select md5('e' || n)::uuid, company, 'record.created', resource, id, ('0/' || to_hex(4096 + n))::pg_lsn, 0,
             '{"id":"' || id || '"}', created
        from g`
  }
  await sql`vacuum analyze`
  console.log(`built the oldest state with ${fmt(RECORDS)} records in ${fmt((Date.now() - t0) / 1000, 1)} s`)
}

type Op = {
  readonly at: number
  readonly ms: number
  readonly kind: "read" | "feed" | "write"
  readonly failed: boolean
}

/** Reads and writes as the release before makes them, until stopped; each timed. */
const traffic = (url: string) => {
  const reader = postgres(url, {
    max: 2,
    onnotice: () => {},
    connection: { application_name: "safety-records-service" }
  })
  const writer = connect(url, 1)
  const ops: Op[] = []
  const errors = new Map<string, number>()
  let stopping = false
  let lsn = 16 ** 7
  const pick = () => 1 + Math.floor(Math.random() * RECORDS)
  const loop = async (kind: Op["kind"], every: number, f: () => Promise<unknown>) => {
    while (!stopping) {
      const t = performance.now()
      // A batch chosen as a deadlock's victim fails, as capture's would, and counts.
      const failed = await f().then(
        () => false,
        (e: Error) => {
          errors.set(e.message, (errors.get(e.message) ?? 0) + 1)
          return true
        }
      )
      const ms = performance.now() - t
      ops.push({ at: Date.now(), ms, kind, failed })
      if (ms < every) await new Promise((r) => setTimeout(r, every - ms))
    }
  }
  const read = () => {
    const n = pick()
    const resource = n % 10 === 0 ? "workers" : n % 10 === 1 ? "incidents" : "corrective-actions"
    return reader`select body from service.views where resource = ${resource} and id = md5(${`r${n}`})::uuid`
  }
  const feed = () =>
    reader`select id, payload from service.events where company_id = md5(${`c${pick() % COMPANIES}`})::uuid
           order by created_at desc, id desc limit 20`
  const write = () =>
    writer.begin(async (tx) => {
      await tx`select set_config('service.keeps_mirror', 'on', true)`
      const ns = [
        ...new Set(
          Array.from({ length: BATCH }, () => {
            let n = pick()
            while (n % 10 === 0 || n % 10 === 1) n = pick()
            return n
          })
        )
      ]
      const ids = ns.map((n) => `r${n}`)
      await tx`select data::text from service.rows where tbl = 'corrective_actions' and key = any(select md5(x)::uuid::text from unnest(${ids}::text[]) x)`
      await tx`update service.views set body = body, status = 'in_progress'
               where resource = 'corrective-actions' and id = any(select md5(x)::uuid from unnest(${ids}::text[]) x)`
      const lsns = ns.map(() => `0/${(lsn++).toString(16)}`)
      await tx`insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
               select gen_random_uuid(), company_id, 'record.updated', resource, id, l::pg_lsn, 0, body, now()
                 from unnest(${ids}::text[], ${lsns}::text[]) as x(k, l)
                 join service.views on resource = 'corrective-actions' and id = md5(k)::uuid`
      await tx`insert into service.rows (tbl, key, company_id, data)
               select 'corrective_actions', md5(x)::uuid::text, null, jsonb_build_object('id', x)
                 from unnest(${ids}::text[]) x
               on conflict (tbl, key) do update set data = excluded.data`
    })
  const running = Promise.all([
    loop("read", READ_EVERY_MS, read),
    loop("feed", FEED_EVERY_MS, feed),
    loop("write", WRITE_EVERY_MS, write)
  ])
  return {
    ops,
    errors,
    stop: async () => {
      stopping = true
      await running
      await Promise.all([reader.end(), writer.end()])
    }
  }
}

type Mark = { readonly at: number; readonly name: string }

/** One upgrade beside live traffic: the figures of one line of the table. */
const run = async (label: string, url: string, upgrade: (mark: (name: string) => void) => Promise<unknown>) => {
  const sql = connect(url, 2)
  const t = traffic(url)
  await new Promise((r) => setTimeout(r, 5_000)) // the median before
  const marks: Mark[] = []
  const start = Date.now()
  await upgrade((name) => marks.push({ at: Date.now(), name }))
  const end = Date.now()
  await new Promise((r) => setTimeout(r, 1_000))
  await t.stop()
  await sql.end()
  const before = (k: Op["kind"]) =>
    percentile(
      t.ops
        .filter((o) => o.kind === k && o.at < start)
        .map((o) => o.ms)
        .sort((a, b) => a - b),
      50
    )
  // An op that ended during the upgrade, or began during it.
  const during = (k: Op["kind"]) => t.ops.filter((o) => o.kind === k && o.at >= start && o.at - o.ms <= end)
  const running = (at: number) => [...marks].reverse().find((m) => m.at <= at)?.name ?? "-"
  const longest = (k: Op["kind"]) => {
    const ops = during(k)
    const worst = ops.reduce<Op | null>((w, o) => (w === null || o.ms > w.ms ? o : w), null)
    return {
      n: ops.length,
      worst,
      over1s: ops.filter((o) => o.ms > 1000).length,
      over100: ops.filter((o) => o.ms > 100).length,
      failed: ops.filter((o) => o.failed).length
    }
  }
  const reads = longest("read")
  const feeds = longest("feed")
  const writes = longest("write")
  return {
    label,
    errors: t.errors,
    seconds: (end - start) / 1000,
    rows: [
      ["read by id", before("read"), reads],
      ["events feed page", before("feed"), feeds],
      ["capture-like batch", before("write"), writes]
    ] as const,
    running
  }
}

const main = async () => {
  const dir = mkdtempSync(join(tmpdir(), "srs-bench-upgrade-"))
  chmodSync(dir, 0o755)
  const server = await startEmbedded({
    dataDir: dir,
    port: await freePort(),
    settings: { max_wal_size: "4GB", shared_buffers: "512MB", maintenance_work_mem: "256MB" }
  })
  const admin = postgres(server.url, { max: 1, onnotice: () => {} })
  try {
    await admin.unsafe("create database upgrade_oldest")
    const oldest = connect(databaseUrl(server.url, "upgrade_oldest"), 4)
    await buildOldest(oldest)
    if (FROM > 2) {
      // The state a release that stopped at FROM left, by the runner it had, before anyone reads.
      const t0 = Date.now()
      await oneTransaction(
        oldest,
        releasedMigrations().filter((m) => m.number <= FROM),
        () => {}
      )
      await oldest`vacuum analyze`
      console.log(`migrated it to sql/${args.from} in ${fmt((Date.now() - t0) / 1000, 1)} s (no traffic)`)
    }
    await oldest.end()
    const results = []
    for (const which of ["baseline", "today"] as const) {
      if (args.only !== undefined && args.only !== which) continue
      const name = `upgrade_${which}`
      await admin.unsafe(`create database ${name} template upgrade_oldest`)
      const url = databaseUrl(server.url, name)
      const sql = connect(url, 2)
      const lockWaits: MigrationEvent[] = []
      results.push(
        await run(which === "baseline" ? "one transaction (releases before 0.2.0)" : "online (today)", url, (mark) =>
          which === "baseline"
            ? oneTransaction(sql, releasedMigrations(), mark)
            : migrate(sql, loadMigrations(), {
                onEvent: (e) => {
                  if (e.kind === "start") mark(e.name)
                  if (e.kind === "lock-timeout") lockWaits.push(e)
                }
              })
        )
      )
      if (which === "today")
        console.log(
          `today's runner backed off ${lockWaits.length} time(s) on a lock (${[...new Set(lockWaits.map((e) => e.name))].join(", ") || "none"})`
        )
      await sql.end()
      await admin.unsafe(`drop database ${name} with (force)`)
    }
    console.log(
      `\nfrom sql/${String(FROM).padStart(3, "0")} to today's, ${fmt(RECORDS)} records; reader every ${READ_EVERY_MS} ms (feed every ${FEED_EVERY_MS} ms), a batch of ${BATCH} every ${WRITE_EVERY_MS} ms\n`
    )
    for (const r of results) {
      console.log(`${r.label}: the upgrade took ${fmt(r.seconds, 1)} s`)
      table([
        ["", "median before, ms", "during: n", "failed", "> 100 ms", "> 1 s", "longest, ms", "while"],
        ...r.rows.map(([what, median, l]) => [
          what,
          fmt(median, 1),
          fmt(l.n),
          fmt(l.failed),
          fmt(l.over100),
          fmt(l.over1s),
          l.worst === null ? "-" : fmt(l.worst.ms, 0),
          l.worst === null ? "-" : r.running(l.worst.at - l.worst.ms)
        ])
      ])
      for (const [message, n] of r.errors) console.log(`  failed ${n}x: ${message}`)
      console.log("")
    }
  } finally {
    await admin.end()
    await server.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
