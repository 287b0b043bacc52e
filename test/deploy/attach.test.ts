// Deployment beside the app's own database: one role (the app's owner) made the app's tables,
// a DBA ran the printed setup SQL for another, and the service runs as that least-privilege
// role. Records and webhooks flow, the app's schema is left as it was, and a publication
// altered to carry a NEVER column, a missing publication or missing app tables stop a start.
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import postgres from "postgres"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { setupSql } from "../../src/pipeline/capture/setup-sql.ts"
import { ensureDemoAppSchema } from "../../src/platform/db/demo-schema.ts"
import { runCli } from "../support/cli.ts"
import { makeCompany, insertIncident } from "../support/app.ts"
import { adminUrl, urlFor } from "../support/db.ts"
import { startHttpsReceiver, type Receiver } from "../support/https-receiver.ts"
import { freePort } from "../support/net.ts"
import { waitFor } from "../support/wait.ts"
import { startService, streaming, waitForUrl } from "../support/service-process.ts"

/** waitFor, where a check that fails (the service not up yet) counts as not yet. */
const until = <A>(check: () => Promise<A | undefined | false>, what: string, ms = 30_000): Promise<A> =>
  waitFor(() => check().catch(() => undefined), what, ms, 100) as Promise<A>

const withUser = (url: string, user: string, password: string) => {
  const u = new URL(url)
  u.username = user
  u.password = password
  return u.toString()
}

/** Everything that describes the app's tables: columns, types, constraints, indexes, triggers, owners, grants, identity. */
const appSchemaFingerprint = async (sql: postgres.Sql) =>
  sql<{ what: string }[]>`
    select concat_ws(' ', c.relname, c.relkind, pg_get_userbyid(c.relowner), c.relreplident, c.relacl::text) as what
      from pg_class c join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'app'
    union all
    select concat_ws(' ', c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attacl::text)
      from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where n.nspname = 'app' and a.attnum > 0 and not a.attisdropped
    union all
    select concat_ws(' ', conname, pg_get_constraintdef(k.oid)) from pg_constraint k join pg_namespace n on n.oid = k.connamespace where n.nspname = 'app'
    union all
    select concat_ws(' ', t.tgname, t.tgrelid::regclass::text) from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'app'
    order by 1`

/**
 * The deployment for a describe block: the app's owner and the service's role (logins with
 * one password), the app's database made by its owner with the app's tables (and, with
 * `ownDb`, an empty database for the service's own state), a receiver whose CA the service
 * trusts; all dropped afterwards, the children killed.
 */
const useAttached = (names: { appDb: string; ownDb?: string; owner: string; role: string; dir: string }) => {
  const t = {
    ...names,
    password: randomBytes(9).toString("hex"),
    children: [] as ChildProcess[],
    dir: mkdtempSync(join(tmpdir(), names.dir)),
    admin: undefined as unknown as postgres.Sql, // a superuser on the app's database (the DBA)
    ownAdmin: undefined as postgres.Sql | undefined, // a superuser on the service's database
    app: undefined as unknown as postgres.Sql, // the app, as the owner of its tables
    receiver: undefined as unknown as Receiver
  }
  beforeAll(async () => {
    chmodSync(t.dir, 0o755)
    const root = postgres(adminUrl(), { max: 1, onnotice: () => {} })
    await root.unsafe(`create role ${t.owner} login password '${t.password}'`)
    await root.unsafe(`create role ${t.role} login replication password '${t.password}'`)
    await root.unsafe(`create database ${t.appDb} owner ${t.owner}`)
    if (t.ownDb !== undefined) await root.unsafe(`create database ${t.ownDb}`)
    await root.end()
    t.admin = postgres(urlFor(t.appDb), { max: 1, onnotice: () => {} })
    if (t.ownDb !== undefined) t.ownAdmin = postgres(urlFor(t.ownDb), { max: 1, onnotice: () => {} })
    t.app = postgres(withUser(urlFor(t.appDb), t.owner, t.password), { max: 2, onnotice: () => {} })
    await ensureDemoAppSchema(t.app)
    t.receiver = await startHttpsReceiver()
    writeFileSync(join(t.dir, "ca.pem"), t.receiver.ca)
  })
  afterAll(async () => {
    for (const c of t.children) c.kill("SIGKILL")
    await t.receiver?.close()
    await t.app?.end({ timeout: 1 })
    await t.admin?.end({ timeout: 1 })
    await t.ownAdmin?.end({ timeout: 1 })
    const root = postgres(adminUrl(), { max: 1, onnotice: () => {} })
    try {
      for (const name of t.ownDb === undefined ? [t.appDb] : [t.ownDb, t.appDb])
        for (let i = 0; i < 50; i++) {
          await root`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name}`
          await root`select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = ${name} and not active`
          try {
            await root.unsafe(`drop database if exists ${name} with (force)`)
            break
          } catch {
            await new Promise((r) => setTimeout(r, 100))
          }
        }
      await root.unsafe(`drop role if exists ${t.role}`)
      await root.unsafe(`drop role if exists ${t.owner}`)
    } finally {
      await root.end()
    }
    rmSync(t.dir, { recursive: true, force: true })
  })
  return t
}

/**
 * Through the CLI, as the admin Ada: a key reading everything and an endpoint at `path` on
 * the receiver; then an incident titled `title` reaches the receiver, and the key reads it
 * from the service at `base`. Returns the key.
 */
const keyEndpointAndFlow = async (
  t: { readonly receiver: Receiver; readonly app: postgres.Sql },
  cliEnv: Record<string, string | undefined>,
  company: { id: string; host: string },
  path: string,
  title: string,
  base: string
) => {
  const as = ["--as", `ada@${company.host}`, "--json"]
  const key = await runCli(
    ["keys", "create", "--company", company.host, "--name", "BI", "--read", "all", ...as],
    cliEnv
  )
  expect(key.code, key.stderr).toBe(0)
  expect(key.stderr).toBe("")
  const apiKey = (JSON.parse(key.stdout) as { key: string }).key
  const endpoint = await runCli(
    [
      ...["endpoints", "create", "--company", company.host, "--name", "Ops"],
      ...["--url", t.receiver.url(path), "--events", "incident.created", ...as]
    ],
    cliEnv
  )
  expect(endpoint.code, endpoint.stderr).toBe(0)

  const incident = await insertIncident(t.app, company.id, { title })
  const delivery = await until(async () => t.receiver.requests.find((q) => q.path === path), "the webhook", 30_000)
  expect(JSON.parse(delivery.body.toString("utf8"))).toMatchObject({
    event: "incident.created",
    data: { id: incident, title }
  })
  const got = await fetch(`${base}/api/v1/incidents/${incident}`, { headers: { authorization: `Bearer ${apiKey}` } })
  expect(got.status).toBe(200)
  return apiKey
}

describe("attached to the app's own database, as a least-privilege role", () => {
  const tag = randomBytes(4).toString("hex")
  const publication = "safety_records_service"
  const t = useAttached({ appDb: `t_attach_${tag}`, owner: `app_owner_${tag}`, role: `srs_${tag}`, dir: "srs-attach-" })
  const { role, children } = t
  let serviceUrl: string
  let env: Record<string, string>

  beforeAll(() => {
    serviceUrl = withUser(urlFor(t.appDb), role, t.password)
    env = {
      DATABASE_URL: serviceUrl,
      DATA_DIR: t.dir,
      SECRETS_KEY: randomBytes(32).toString("base64"),
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: join(t.dir, "ca.pem"),
      REPLICATION_SLOT: `slot_${tag}`
    }
  })

  it("stops at start, changing nothing, where the app's tables are missing", async () => {
    const root = postgres(adminUrl(), { max: 1, onnotice: () => {} })
    const empty = `t_empty_${tag}`
    await root.unsafe(`create database ${empty}`)
    try {
      const r = startService({ ...env, DATABASE_URL: urlFor(empty), PORT: String(await freePort()) })
      children.push(r.child)
      expect(await r.exited()).toBe(1)
      expect(r.output()).toContain("The app's tables are missing")
      expect(r.output()).toContain("npm run seed -- --schema-only")
      const other = postgres(urlFor(empty), { max: 1, onnotice: () => {} })
      const schemas = await other<
        { n: number }[]
      >`select count(*)::int as n from pg_namespace where nspname in ('app', 'service')`
      await other.end()
      expect(schemas[0]!.n).toBe(0)
    } finally {
      await root.unsafe(`drop database ${empty} with (force)`)
      await root.end()
    }
  })

  it("without the DBA's publication, it stops naming the setup SQL (the role may not make one)", async () => {
    // The DBA's setup, less the publication.
    const text = setupSql({ role, publication })
    await t.admin.unsafe(text.replace(/do \$\$[\s\S]*?\$\$;/, ""))
    const r = startService({ ...env, PORT: String(await freePort()) })
    children.push(r.child)
    expect(await r.exited()).toBe(1)
    expect(r.output()).toContain(`Publication ${publication} does not exist, and role ${role} may not create it`)
    expect(r.output()).toContain(`database setup-sql --role ${role}`)
  })

  it("runs from the printed setup SQL: records and webhooks flow, NEVER columns unreadable, the app's schema unchanged", {
    timeout: 120_000
  }, async () => {
    await t.admin.unsafe(setupSql({ role, publication }))
    const company = await makeCompany(t.app, { host: `acme-${tag}.test` })
    await t.app`insert into app.users (company_id, name, email, role) values (${company.id}, 'Ada', ${`ada@${company.host}`}, 'admin')`
    await t.app`insert into app.workers (company_id, name, status, phone, email) values (${company.id}, 'Wim', 'active', '+1 555 0100', 'wim@example.test')`
    const before = await appSchemaFingerprint(t.admin)

    const port = await freePort()
    const service = startService({ ...env, PORT: String(port), REPLICATION_SLOT_FAILOVER: "true" })
    children.push(service.child)
    const base = `http://127.0.0.1:${port}`
    await waitForUrl(`${await service.opsUrl()}/readyz`, 60_000, streaming)

    // The role reads what it needs and nothing more.
    const srs = postgres(serviceUrl, { max: 1, onnotice: () => {} })
    try {
      await expect(srs`select phone from app.workers`).rejects.toThrow(/permission denied/)
      await expect(srs`insert into app.companies (name, host) values ('x', 'x.test')`).rejects.toThrow(
        /permission denied/
      )
      // The heartbeat that moves the slot on an idle database needs no more than REPLICATION.
      await srs`select pg_logical_emit_message(true, 'safety-records-heartbeat', '')`
      const [slot] = await srs<
        { failover: boolean }[]
      >`select failover from pg_replication_slots where slot_name = ${env.REPLICATION_SLOT!}`
      expect(slot?.failover).toBe(true)
    } finally {
      await srs.end()
    }

    const cliEnv = { ...env, PORT: undefined }
    const apiKey = await keyEndpointAndFlow(t, cliEnv, company, `/attach-${tag}`, "Attached", base)
    const workers = await (
      await fetch(`${base}/api/v1/workers`, { headers: { authorization: `Bearer ${apiKey}` } })
    ).text()
    // Wim's record by its fields, then the phone and e-mail as written: "555" alone occurs by
    // chance in the random UUIDs the answer holds (it did once: ...-55517be48b60).
    const wim = (JSON.parse(workers) as { data: Array<Record<string, unknown>> }).data.find((w) => w["name"] === "Wim")
    expect(wim).toBeDefined()
    expect(wim).not.toHaveProperty("phone")
    expect(wim).not.toHaveProperty("email")
    expect(workers).not.toContain("+1 555 0100")
    expect(workers).not.toContain("wim@example.test")

    service.child.kill("SIGTERM")
    expect(await service.exited()).toBe(0)
    expect(await appSchemaFingerprint(t.admin)).toEqual(before)
  })

  it("a publication altered to carry app.workers.phone stops the next start, naming it and the fix", async () => {
    await t.admin.unsafe(`alter publication ${publication} drop table app.workers`)
    await t.admin.unsafe(
      `alter publication ${publication} add table app.workers (id, company_id, name, job_title, employer, subcontractor_id, job_site_id, status, created_at, updated_at, phone)`
    )
    const r = startService({ ...env, PORT: String(await freePort()) })
    children.push(r.child)
    expect(await r.exited()).toBe(1)
    expect(r.output()).toContain("app.workers.phone is published, and it is NEVER sent")
    expect(r.output()).toContain(`alter publication ${publication} set table`)
    expect(r.output()).not.toMatch(/at .*\.ts:\d+/) // the reason, not a stack trace
  })
})

describe("the service's state in a database of its own, attached to the app's as a least-privilege role", () => {
  const tag = randomBytes(4).toString("hex")
  const publication = "safety_records_service"
  const t = useAttached({
    appDb: `t_attach_app_${tag}`,
    ownDb: `t_attach_own_${tag}`,
    owner: `app_owner2_${tag}`,
    role: `srs2_${tag}`,
    dir: "srs-attach-own-"
  })
  const { role, children } = t

  it("runs from the two printed parts: no CREATE, no schema, no write of its own in the app's database; records and webhooks flow", {
    timeout: 120_000
  }, async () => {
    await t.admin.unsafe(setupSql({ role, publication, part: "app" }))
    await t.ownAdmin!.unsafe(setupSql({ role, publication, part: "service" }))
    const company = await makeCompany(t.app, { host: `own-${tag}.test` })
    await t.app`insert into app.users (company_id, name, email, role) values (${company.id}, 'Ada', ${`ada@${company.host}`}, 'admin')`
    const before = await appSchemaFingerprint(t.admin)
    const env = {
      DATABASE_URL: withUser(urlFor(t.appDb), role, t.password),
      SERVICE_DATABASE_URL: withUser(urlFor(t.ownDb!), role, t.password),
      DATA_DIR: t.dir,
      SECRETS_KEY: randomBytes(32).toString("base64"),
      WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
      NODE_EXTRA_CA_CERTS: join(t.dir, "ca.pem"),
      REPLICATION_SLOT: `slot_own_${tag}`
    }
    // What the role may do in the app's database: replicate and read; nothing of its own.
    const [rights] = await t.admin<{ create: boolean; temp: boolean; schemas: number }[]>`
      select has_database_privilege(${role}, current_database(), 'CREATE') as create,
             has_database_privilege(${role}, current_database(), 'TEMP') as temp,
             (select count(*)::int from pg_namespace where nspowner = (select oid from pg_roles where rolname = ${role})) as schemas`
    expect(rights).toMatchObject({ create: false, schemas: 0 })

    const port = await freePort()
    const service = startService({ ...env, PORT: String(port) })
    children.push(service.child)
    await waitForUrl(`${await service.opsUrl()}/readyz`, 60_000, streaming)
    const cliEnv = { ...env, PORT: undefined }
    await keyEndpointAndFlow(t, cliEnv, company, `/own-${tag}`, "Own database", `http://127.0.0.1:${port}`)
    service.child.kill("SIGTERM")
    expect(await service.exited()).toBe(0)

    // The app's database: its schema as before, nothing of the service's, the slot the only thing it keeps.
    expect(await appSchemaFingerprint(t.admin)).toEqual(before)
    expect(await t.admin`select 1 from pg_namespace where nspname = 'service'`).toHaveLength(0)
    expect(
      await t.admin`select 1 from pg_class where relowner = (select oid from pg_roles where rolname = ${role})`
    ).toHaveLength(0)
    expect(await t.admin`select slot_name from pg_replication_slots where database = current_database()`).toEqual([
      { slot_name: env.REPLICATION_SLOT }
    ])
    // Everything the service wrote is in its own database.
    const [own] = await t.ownAdmin!<{ views: number; events: number; keys: number }[]>`
      select (select count(*)::int from service.views) as views, (select count(*)::int from service.events) as events,
             (select count(*)::int from service.api_keys) as keys`
    expect(own).toMatchObject({ events: 1, keys: 1 })
    expect(own!.views).toBeGreaterThan(0)
  })
})
