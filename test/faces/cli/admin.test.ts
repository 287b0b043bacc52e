// The admin CLI as a person or a script runs it: the real `node src/faces/cli/admin.ts` against
// the test database (DATABASE_URL), its --json answers, its errors and exit codes, the
// 20-key limit, and the activity log.
import { readFileSync } from "node:fs"
import { Effect } from "effect"
import { beforeAll, describe, expect, it } from "vitest"
import { createKey } from "../../../src/access/keys/store.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { makeKey, provideDb, request } from "../../support/http.ts"
import { createCompany, seedRecords, type TestCompany } from "../../support/views.ts"
import { runCli } from "../../support/cli.ts"
import { useDatabase, useServer } from "../../support/fixtures.ts"

describe("admin CLI", () => {
  const db = useDatabase()
  const server = useServer(db)
  let acme: TestCompany
  let env: Record<string, string>
  const cli = (...args: Array<string>) => runCli(args, env)
  /** `keys create` for a company, by name, reading `read`, as `as`, with `more` flags. */
  const createKeyCli = (company: string, name: string, read: string, as: string, ...more: Array<string>) =>
    cli("keys", "create", "--company", company, "--name", name, "--read", read, "--as", as, ...more)

  beforeAll(async () => {
    acme = await createCompany(db.sql, { name: "Acme Safety" })
    await seedRecords(db.sql, "incidents", acme.id, 2)
    env = { DATABASE_URL: db.url }
  })

  it("keys create --json prints {id, key} once; the key works", async () => {
    const r = await createKeyCli(acme.host, "Power BI", "incidents,workers", acme.adminEmail, "--json")
    expect(r.stderr).toBe("")
    expect(r.code).toBe(0)
    const answer = JSON.parse(r.stdout)
    expect(Object.keys(answer)).toEqual(["id", "key"])
    expect(answer.key).toMatch(/^mk_[A-Za-z0-9_-]{43}$/)
    const a = await request(server.url, "/api/v1", { key: answer.key })
    expect(a.status).toBe(200)
    expect(a.json.key).toMatchObject({ id: answer.id, name: "Power BI", expiresAt: null, webhooks: false })
    expect(a.json.resources.map((x: { name: string }) => x.name)).toEqual(["incidents", "workers"])
    // only the fingerprint is stored
    const [row] = await db.sql<
      { fingerprint: Buffer }[]
    >`select fingerprint from service.api_keys where id = ${answer.id}`
    expect(row!.fingerprint.toString("hex")).toBe(
      (await import("node:crypto")).createHash("sha256").update(answer.key).digest("hex")
    )
    // not the key, nor any part of it (docs/api.md#keys), in the keys or in the activity log. Ids and
    // times are left out of the dump: a 6-character piece of the key could occur in them by chance.
    const random = answer.key.slice(3)
    const chance = /^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d{2}-\d{2}T[\d:.]+Z)$/
    for (const table of ["service.api_keys", "service.activity"]) {
      const rows = await db.sql.unsafe(`select * from ${table}`)
      const dump = JSON.stringify(rows, (_, v: unknown) => (typeof v === "string" && chance.test(v) ? "" : v))
      for (let i = 0; i + 6 <= random.length; i += 6) expect(dump, table).not.toContain(random.slice(i, i + 6))
    }
  })

  it("keys create for a company the API does not serve makes the key and warns on stderr, JSON alone on stdout", async () => {
    const team = await createCompany(db.sql, { name: "Team Co", tier: "team" })
    const r = await createKeyCli(team.host, "early", "all", team.adminEmail, "--json")
    expect(r.code).toBe(0)
    expect(Object.keys(JSON.parse(r.stdout))).toEqual(["id", "key"])
    expect(r.stderr).toBe(
      "warning: Team Co is on the team tier: the API answers this key 403 until the company is on the Company tier.\n"
    )
    const off = await createCompany(db.sql, { name: "Off Co", apiEnabled: false })
    const o = await createKeyCli(off.host, "early", "all", off.adminEmail)
    expect(o.code).toBe(0)
    expect(o.stderr).toBe(
      "warning: the API is turned off for Off Co: it answers this key 403 until the API is turned on.\n"
    )
  })

  it("keys create for a person: by company id, all resources, webhooks, an expiry", async () => {
    const r = await createKeyCli(
      acme.id,
      "Zapier",
      "all",
      acme.adminEmail.toUpperCase(),
      "--webhooks",
      "--expires",
      "90d"
    )
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('Created API key "Zapier"')
    expect(r.stdout).toContain("reads:    all")
    expect(r.stdout).toContain("webhooks: yes")
    const key = /mk_[A-Za-z0-9_-]{43}/.exec(r.stdout)![0]
    const a = await request(server.url, "/api/v1", { key })
    expect(a.json.resources).toHaveLength(RESOURCES.length)
    const days = (Date.parse(a.json.key.expiresAt) - Date.now()) / 86_400_000
    expect(days).toBeGreaterThan(89.9)
    expect(days).toBeLessThanOrEqual(90)
  })

  it("keys list --json shows name, scopes, who made it, created, expires, last used, request count, state", async () => {
    const r = await cli("keys", "list", "--company", acme.host, "--json")
    expect(r.code).toBe(0)
    const keys = JSON.parse(r.stdout)
    expect(keys.length).toBeGreaterThanOrEqual(2)
    const zap = keys.find((k: { name: string }) => k.name === "Zapier")
    expect(zap).toMatchObject({
      scopes: [...RESOURCES],
      webhooks: true,
      createdBy: acme.adminEmail,
      state: "active",
      revokedAt: null
    })
    for (const field of ["id", "createdAt", "expiresAt", "lastUsedAt", "requestCount"])
      expect(zap).toHaveProperty(field)
    const text = await cli("keys", "list", "--company", acme.host, "--as", acme.adminEmail)
    expect(text.code).toBe(0)
    for (const column of ["NAME", "READS", "MADE BY", "CREATED", "EXPIRES", "LAST USED", "REQUESTS", "STATE"])
      expect(text.stdout).toContain(column)
    expect(text.stdout).toContain("Zapier")
  })

  it("keys revoke: the next request gets 401, the activity log says who did what to which key", async () => {
    const created = JSON.parse((await createKeyCli(acme.host, "temp", "incidents", acme.adminEmail, "--json")).stdout)
    expect((await request(server.url, "/api/v1/incidents", { key: created.key })).status).toBe(200)
    // a subscription the key made is deleted with it
    const hasSubscriptions = (await db.sql`select to_regclass('service.webhook_subscriptions') as t`)[0]!.t !== null
    if (hasSubscriptions) {
      await db.sql`insert into service.webhook_subscriptions (key_id, company_id, url, event) values (${created.id}, ${acme.id}, 'https://example.com/hook', 'incident.created')`
    }
    const r = await cli("keys", "revoke", created.id, "--as", acme.adminEmail, "--json")
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({
      id: created.id,
      name: "temp",
      state: "revoked",
      revokedBy: acme.adminEmail
    })
    const after = await request(server.url, "/api/v1/incidents", { key: created.key })
    expect(after.status).toBe(401)
    expect(after.json.error).toBe("this API key was revoked")
    if (hasSubscriptions) {
      expect(await db.sql`select 1 from service.webhook_subscriptions where key_id = ${created.id}`).toHaveLength(0)
    }
    const log = await db.sql<
      { kind: string; actor_email: string; actor_id: string; subject_id: string; details: any; at: Date }[]
    >`
      select kind, actor_email, actor_id::text, subject_id, details, at from service.activity
       where company_id = ${acme.id} and subject_id = ${created.id} order by id`
    expect(log.map((e) => e.kind)).toEqual(["key.created", "key.revoked"])
    for (const e of log) {
      expect(e.actor_email).toBe(acme.adminEmail)
      expect(e.actor_id).toBe(acme.adminId)
      expect(Date.now() - e.at.getTime()).toBeLessThan(120_000)
    }
    expect(log[0]!.details).toMatchObject({ name: "temp", scopes: ["incidents"], webhooks: false, expiresAt: null })
    const again = await cli("keys", "revoke", created.id, "--as", acme.adminEmail)
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/^error: API key .* \("temp"\) was already revoked at /)
    const list = JSON.parse((await cli("keys", "list", "--company", acme.host, "--json")).stdout)
    expect(list.find((k: { id: string }) => k.id === created.id).state).toBe("revoked")
  })

  it("refuses the 21st active key with a clear message; revoked and expired keys do not count", async () => {
    const c = await createCompany(db.sql)
    const actor = { userId: c.adminId, email: c.adminEmail, name: "Ada", companyId: c.id }
    const ids: Array<string> = []
    for (let i = 0; i < 20; i++) {
      const k = await Effect.runPromise(
        createKey(actor, {
          companyId: c.id,
          name: `k${i}`,
          scopes: ["incidents"],
          webhooks: false,
          expires: "never"
        }).pipe(Effect.provide(provideDb(db)))
      )
      ids.push(k.id)
    }
    const r = await createKeyCli(c.host, "one too many", "all", c.adminEmail, "--json")
    expect(r.code).toBe(1)
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe(
      "error: this company already has 20 active API keys, the most it may hold (20); revoke one first\n"
    )
    await db.sql`update service.api_keys set expires_at = now() - interval '1 minute' where id = ${ids[0]!}`
    expect((await createKeyCli(c.host, "replaces expired", "all", c.adminEmail, "--json")).code).toBe(0)
    expect((await createKeyCli(c.host, "again too many", "all", c.adminEmail)).code).toBe(1)
    expect((await cli("keys", "revoke", ids[1]!, "--as", c.adminEmail)).code).toBe(0)
    expect((await createKeyCli(c.host, "replaces revoked", "all", c.adminEmail)).code).toBe(0)
  })

  it("20 at once from many processes still stop at 20", async () => {
    const c = await createCompany(db.sql)
    const runs = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        Effect.runPromise(
          createKey(
            { userId: c.adminId, email: c.adminEmail, name: "Ada", companyId: c.id },
            { companyId: c.id, name: `p${i}`, scopes: ["incidents"], webhooks: false, expires: "never" }
          ).pipe(Effect.provide(provideDb(db)), Effect.result)
        )
      )
    )
    expect(runs.filter((r) => r._tag === "Success")).toHaveLength(20)
    const [{ n }] = (await db.sql<
      { n: number }[]
    >`select count(*)::int as n from service.api_keys where company_id = ${c.id}`) as unknown as [{ n: number }]
    expect(n).toBe(20)
  })

  describe("clear errors and non-zero exits", () => {
    it.each([
      [["keys", "creat"], 2, /Unknown subcommand "creat"[\s\S]*Did you mean this\?[\s\S]*create/],
      [["nothing"], 2, /Unknown subcommand "nothing"/],
      [
        ["keys", "create", "--company", "x", "--name", "n", "--read", "all", "--as", "a@b.c", "--bogus"],
        2,
        /Unrecognized flag: --bogus/
      ],
      [
        ["keys", "create", "--company", "x", "--name", "n", "--read", "all", "--as", "a@b.c", "--expires", "2d"],
        2,
        /Invalid value for flag --expires: "2d"/
      ],
      [["keys", "create", "--company", "x", "--name", "n", "--read", "all"], 2, /Missing required flag: --as/],
      [["keys", "revoke", "--as", "a@b.c"], 2, /Missing required argument: id/],
      [["keys", "list"], 2, /Missing required flag: --company/]
    ])("%j", async (args, code, message) => {
      const r = await cli(...args)
      expect(r.code).toBe(code)
      expect(r.stdout).toBe("")
      expect(r.stderr).toMatch(message)
      expect(r.stderr).toMatch(/See: npm run admin -- .*--help/)
    })

    // Nine CLI processes, one after another (each starts Node and connects): a budget for a busy machine.
    it("for values the database decides", { timeout: 180_000 }, async () => {
      const cases: Array<[Array<string>, RegExp]> = [
        [
          ["keys", "create", "--company", "nowhere.test", "--name", "n", "--read", "all", "--as", acme.adminEmail],
          /^error: no company with id or host "nowhere.test"\n$/
        ],
        [
          ["keys", "create", "--company", acme.host, "--name", "n", "--read", "all", "--as", "nobody@example.test"],
          /^error: no user with e-mail nobody@example.test\n$/
        ],
        [
          ["keys", "create", "--company", acme.host, "--name", "n", "--read", "all", "--as", acme.memberEmail],
          /^error: .* is not an admin of Acme Safety: only admins can do this\n$/
        ],
        [
          [
            "keys",
            "create",
            "--company",
            acme.host,
            "--name",
            "n",
            "--read",
            "incidents,nope",
            "--as",
            acme.adminEmail
          ],
          /^error: unknown resource "nope" in --read; choose from incidents, .*, or all\n$/
        ],
        [
          ["keys", "create", "--company", acme.host, "--name", "  ", "--read", "all", "--as", acme.adminEmail],
          /^error: --name must not be empty\n$/
        ],
        [
          ["keys", "create", "--company", acme.host, "--name", "n", "--read", "all", "--as", "not-an-email"],
          /^error: --as must be an e-mail address/
        ],
        [["keys", "revoke", "not-a-key", "--as", acme.adminEmail], /^error: "not-a-key" is not a key id/],
        [
          ["keys", "revoke", "00000000-0000-4000-8000-000000000000", "--as", acme.adminEmail],
          /^error: no API key with id 00000000-0000-4000-8000-000000000000\n$/
        ],
        [["keys", "list", "--company", acme.host, "--as", acme.memberEmail], /is not an admin of Acme Safety/]
      ]
      for (const [args, message] of cases) {
        const r = await cli(...args, "--json")
        expect(r.code, args.join(" ")).toBe(1)
        expect(r.stdout).toBe("")
        expect(r.stderr).toMatch(message)
      }
    })

    it("an admin of another company cannot revoke this company's keys", async () => {
      const them = await createCompany(db.sql)
      const k = await makeKey(db, acme)
      const r = await cli("keys", "revoke", k.id, "--as", them.adminEmail)
      expect(r.code).toBe(1)
      // Whose the key is stays unsaid: to them it is no key at all.
      expect(r.stderr).toBe(`error: no API key with id ${k.id}\n`)
      const named = await cli("keys", "revoke", k.id, "--company", them.host, "--as", them.adminEmail)
      expect(named.stderr).toMatch(/^error: no API key with id .* in /)
      expect(named.stderr).not.toContain("Acme")
      const stranger = await cli("keys", "revoke", k.id, "--as", "nobody@nowhere.example")
      expect(stranger.stderr).toBe("error: no user with e-mail nobody@nowhere.example\n")
      expect((await request(server.url, "/api/v1", { key: k.key })).status).toBe(200)
    })
  })

  it("keys portal-link: a one-time link for a key's integrator, an hour unless said, at most 24 hours", async () => {
    const made = await cli(
      "keys",
      "create",
      "--company",
      acme.host,
      "--name",
      "Contractor",
      "--read",
      "all",
      "--webhooks",
      "--as",
      acme.adminEmail,
      "--json"
    )
    const key = JSON.parse(made.stdout) as { id: string }
    const r = await cli("keys", "portal-link", key.id, "--as", acme.adminEmail, "--base-url", "https://srs.example/")
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(
      /^Portal link for API key "Contractor" \([0-9a-f-]{36}\), until \S+ \S+:\n\n {2}https:\/\/srs\.example\/portal\/[A-Za-z0-9_-]{43}\n/
    )
    expect(r.stdout).toContain("It works once")
    const [row] = await db.sql<{ seconds: number; created_by: string }[]>`
      select extract(epoch from expires_at - created_at)::int as seconds, created_by
      from service.portal_links where key_id = ${key.id}`
    expect(row).toEqual({ seconds: 3600, created_by: acme.adminEmail })
    for (const [args, message] of [
      [["--expires", "25h"], /^error: expiresIn is at most 24 hours/],
      [["--expires", "soon"], /^error: expiresIn "soon" is not a duration/],
      [["--brand-colour", "blue"], /^error: colour "blue" is not a colour/]
    ] as const) {
      const bad = await cli("keys", "portal-link", key.id, "--as", acme.adminEmail, ...args)
      expect(bad.code, args.join(" ")).toBe(1)
      expect(bad.stderr).toMatch(message)
    }
    const them = await createCompany(db.sql)
    const stranger = await cli("keys", "portal-link", key.id, "--as", them.adminEmail)
    expect(stranger.stderr).toBe(`error: no API key with id ${key.id}\n`)
    const help = await cli("keys", "portal-link", "--help")
    expect(help.code).toBe(0)
    for (const flag of ["--expires", "--base-url", "--brand-name", "--brand-colour", "--as", "--json"])
      expect(help.stdout).toContain(flag)
  })

  it("--help describes every command and exits 0", async () => {
    const top = await cli("--help")
    expect(top.code).toBe(0)
    expect(top.stdout).toMatch(/keys[\s\S]*tokens/)
    const create = await cli("keys", "create", "--help")
    expect(create.code).toBe(0)
    for (const flag of ["--company", "--name", "--read", "--webhooks", "--expires", "--as", "--json"])
      expect(create.stdout).toContain(flag)
  })

  it("--version prints package.json's version", async () => {
    const { version } = JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as {
      version: string
    }
    const r = await cli("--version")
    expect(r.code).toBe(0)
    expect(r.stdout.trim()).toBe(`admin v${version}`)
  })
})
