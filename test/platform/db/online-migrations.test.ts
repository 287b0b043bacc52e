// Migrations rewritten to run online (docs/design.md, "Online migrations") leave the schema
// exactly as their released texts did, and databases that applied those texts are neither
// refused nor migrated again. The released texts are kept beside this test (released/), as
// deployments applied them.
import { createHash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import type postgres from "postgres"
import { describe, expect, it } from "vitest"
import { loadMigrations, migrate } from "../../../src/platform/db/migrate.ts"
import { parseMigration, recordedChecksum, type Migration } from "../../../src/platform/db/migrations.ts"
import { useDatabase } from "../../support/fixtures.ts"

const RELEASED = fileURLToPath(new URL("./released/", import.meta.url))
const released = new Map(readdirSync(RELEASED).map((name) => [name, readFileSync(RELEASED + name, "utf8")] as const))
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")

/** The migrations as deployments applied them: the released text where one was rewritten since. */
const asReleased = (): ReadonlyArray<Migration> =>
  loadMigrations().map((m) => {
    const text = released.get(m.name)
    return text === undefined ? m : parseMigration(m.name, text)
  })

/** Everything in schema service a release's code could notice, as comparable text. */
const catalog = async (sql: postgres.Sql) => {
  const rows = await sql<{ kind: string; name: string; def: string }[]>`
    select 'column' as kind, c.relname || '.' || a.attname as name,
           format_type(a.atttypid, a.atttypmod) || case when a.attnotnull then ' not null' else '' end
             || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '') || ' #' ||
             (select count(*) from pg_attribute b where b.attrelid = a.attrelid and b.attnum > 0 and not b.attisdropped and b.attnum <= a.attnum) as def
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where n.nspname = 'service' and c.relkind in ('r', 'v', 'u', 'p') and a.attnum > 0 and not a.attisdropped
    union all
    select 'relation', c.relname, c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '') || ' ' || c.relpersistence::text
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'service' and c.relkind <> 'S'
    union all
    select 'index', c.relname, pg_get_indexdef(i.indexrelid) || case when i.indisvalid then '' else ' INVALID' end
      from pg_index i join pg_class c on c.oid = i.indexrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'service'
    union all
    select 'constraint', t.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
      from pg_constraint k join pg_class t on t.oid = k.conrelid join pg_namespace n on n.oid = t.relnamespace
     where n.nspname = 'service'
    union all
    select 'function', p.oid::regprocedure::text, pg_get_functiondef(p.oid)
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = 'service'
    union all
    select 'trigger', t.tgname || ' on ' || c.relname, pg_get_triggerdef(t.oid)
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'service' and not t.tgisinternal
    union all
    select 'view', c.relname, pg_get_viewdef(c.oid)
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'service' and c.relkind = 'v'
    order by 1, 2`
  return rows.map((r) => `${r.kind} ${r.name}: ${r.def}`)
}

describe("migrations rewritten to run online", () => {
  it("each names the checksum of its released text, and each released text has its rewrite", () => {
    const current = new Map(loadMigrations().map((m) => [m.name, m] as const))
    for (const [name, text] of released) {
      const m = current.get(name)
      expect(m, name).toBeDefined()
      expect(m!.equivalents, name).toContain(sha256(text))
      expect(m!.checksum, `${name} is rewritten`).not.toBe(sha256(text))
      expect(recordedChecksum(m!), name).toBe(sha256(text))
    }
    for (const m of current.values()) if (m.equivalents.length > 0) expect(released.has(m.name), m.name).toBe(true)
  })

  const old = useDatabase({ migrated: false })
  const fresh = useDatabase({ migrated: false })

  it("leave the schema exactly as their released texts did", async () => {
    await migrate(old.sql, asReleased())
    await migrate(fresh.sql)
    expect(await catalog(fresh.sql)).toEqual(await catalog(old.sql))
  })

  it("accept a database that applied the released texts, and apply nothing again", async () => {
    expect(await migrate(old.sql)).toEqual([])
    const recorded = await fresh.sql<{ name: string; checksum: string }[]>`
      select name, checksum from service.schema_migrations where name = any(${[...released.keys()]}) order by name`
    // What a release that knows only the released text would find, and accept.
    expect(recorded.map((r) => r.checksum)).toEqual(recorded.map((r) => sha256(released.get(r.name)!)))
  })

  const a = useDatabase({ migrated: false })
  const b = useDatabase({ migrated: false })

  it("fill in what they backfill as their released texts did (the mirror's text, the views' change times)", async () => {
    const upTo = (n: number, ms: ReadonlyArray<Migration>) => ms.filter((m) => m.number <= n)
    for (const db of [a, b]) {
      await migrate(db.sql, upTo(5, loadMigrations()))
      await db.sql`
        insert into service.rows (tbl, key, company_id, data)
        select 'incidents', md5(g::text)::uuid::text, gen_random_uuid(), jsonb_build_object('id', g, 'title', 'T ' || g)
          from generate_series(1, 12000) g`
      await db.sql`
        insert into service.views (resource, id, company_id, created_at, body)
        select 'incidents', md5(g::text)::uuid, gen_random_uuid(), timestamptz '2026-01-01' + g * interval '1 minute',
               case when g % 3 = 0 then '{"id":"x"}'
                    else json_build_object('updatedAt', to_char((timestamptz '2026-06-01' + g * interval '1 second') at time zone 'UTC',
                           'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text end
          from generate_series(1, 12000) g`
    }
    await migrate(a.sql)
    await migrate(b.sql, asReleased())
    const read = (sql: postgres.Sql) =>
      Promise.all([
        sql`select tbl, key, data from service.rows order by tbl, key`,
        sql`select id, updated_at, changed_at from service.views order by id`
      ])
    const [ra, rb] = await Promise.all([read(a.sql), read(b.sql)])
    expect(ra[0]).toEqual(rb[0])
    expect(ra[0][0]!.data).toEqual(expect.stringContaining('"title": "T'))
    expect(ra[1].length).toBe(12000)
    expect(ra[1]).toEqual(rb[1])
    expect(ra[1].filter((r) => r.updated_at === null).length).toBe(4000)
  })

  const c = useDatabase({ migrated: false })
  const d = useDatabase({ migrated: false })

  it("move each delivery's latest attempt into its row as the released sql/020 did", async () => {
    for (const db of [c, d]) {
      await migrate(
        db.sql,
        loadMigrations().filter((m) => m.number < 20)
      )
      const company = "0b7b1a52-5f7e-4c1e-9a57-3f0f0a7d1c01"
      await db.sql`insert into service.webhook_endpoints (id, company_id, name, url, events, secret)
        values (${company}, ${company}, 'e', 'https://x.test/', '{incident.created}', '\\x00')`
      await db.sql`insert into service.events (id, company_id, event, resource, record_id, commit_lsn, seq, payload, created_at)
        select md5(g::text)::uuid, ${company}, 'incident.created', 'incidents', md5('r' || g)::uuid,
               ('0/' || to_hex(4096 + g))::pg_lsn, 0, '{}', timestamptz '2026-11-20'
          from generate_series(1, 12000) g`
      await db.sql`insert into service.webhook_deliveries (id, event_id, company_id, event, endpoint_id, origin, state, attempts,
          next_attempt_at, finished_at, created_at)
        select md5('d' || g)::uuid, md5(g::text)::uuid, ${company}, 'incident.created', ${company}, 'o',
               case when g % 4 = 0 then 'pending' else 'succeeded' end, g % 3,
               case when g % 4 = 0 then timestamptz '2026-11-21' end, case when g % 4 <> 0 then timestamptz '2026-11-21' end,
               timestamptz '2026-11-20'
          from generate_series(1, 12000) g`
      await db.sql`insert into service.webhook_attempts (delivery_id, number, started_at, duration_ms, status, error, response_snippet)
        select md5('d' || g)::uuid, n, timestamptz '2026-11-20' + n * interval '1 minute', 10 * n, 200 + n, 'e' || n, 's' || g
          from generate_series(1, 12000) g, generate_series(1, g % 3) n`
    }
    await migrate(c.sql)
    await migrate(d.sql, asReleased())
    const read = (sql: postgres.Sql) =>
      Promise.all([
        sql`select * from service.webhook_deliveries order by id`,
        sql`select * from service.webhook_earlier_attempts order by delivery_id, number`,
        sql`select * from service.webhook_attempts order by delivery_id, number`
      ])
    const [rc, rd] = await Promise.all([read(c.sql), read(d.sql)])
    expect(rc).toEqual(rd)
    expect(rc[2].length).toBe(12000) // 4,000 with no attempt, 4,000 with one, 4,000 with two
    expect(rc[1].length).toBe(4000)
  })

  const before = useDatabase({ migrated: false })

  it("accept a database migrated by releases whose texts differed only in comments since (2026-11-22 to 26)", async () => {
    const EARLIER = fileURLToPath(new URL("./earlier/", import.meta.url))
    const earlier = new Map(readdirSync(EARLIER).map((n) => [n, readFileSync(EARLIER + n, "utf8")] as const))
    const current = loadMigrations()
    for (const [name, text] of earlier) expect(current.find((m) => m.name === name)!.accepted).toContain(sha256(text))
    // As the release of 2026-11-24 applied them (its last migration sql/021), then sql/030 as 2026-11-26's did.
    const then = asReleased()
      .filter((m) => m.number <= 30)
      .map((m) => (earlier.has(m.name) ? parseMigration(m.name, earlier.get(m.name)!) : m))
    await migrate(before.sql, then)
    expect(await migrate(before.sql)).toEqual(current.filter((m) => m.number > 30).map((m) => m.name))
  })
})
