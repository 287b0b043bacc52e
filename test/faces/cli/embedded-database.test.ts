// Without DATABASE_URL the CLI finds the database like the service: the embedded server
// under DATA_DIR on EMBEDDED_PG_PORT, started if needed (and then stopped at exit), or used
// as it is when it already runs (and then left running). Its app's tables are in the server's
// `postgres` database, the service's state in its own beside it.
import { existsSync, mkdtempSync, rmSync, chmodSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import postgres from "postgres"
import { afterAll, describe, expect, it } from "vitest"
import { databaseUrl, EMBEDDED_SERVICE_DATABASE } from "../../../src/platform/db/Database.ts"
import { startEmbedded, type EmbeddedServer } from "../../../src/platform/db/embedded.ts"
import { freePort } from "../../support/net.ts"
import { runCli } from "../../support/cli.ts"

describe("admin CLI on the embedded database", () => {
  const dir = mkdtempSync(join(tmpdir(), "srs-admin-cli-"))
  chmodSync(dir, 0o755)
  let running: EmbeddedServer | undefined
  afterAll(async () => {
    await running?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it("starts it, migrates, answers, and stops it again", async () => {
    const port = await freePort()
    const env = { DATABASE_URL: undefined, DATA_DIR: dir, EMBEDDED_PG_PORT: String(port) }
    const r = await runCli(["keys", "list", "--company", "nowhere.test", "--json"], env)
    expect(r.stdout).toBe("")
    expect(r.stderr).toBe('error: no company with id or host "nowhere.test"\n')
    expect(r.code).toBe(1)
    expect(existsSync(join(dir, "pg", "PG_VERSION"))).toBe(true)
    expect(existsSync(join(dir, "pg", "postmaster.pid"))).toBe(false)
  }, 120_000)

  it("uses a running one and leaves it running", async () => {
    const port = await freePort()
    running = await startEmbedded({ dataDir: dir, port })
    const sql = postgres(running.url, { max: 1, onnotice: () => {} })
    try {
      const [c] = await sql<
        { id: string }[]
      >`insert into app.companies (name, host) values ('Embedded Co', 'embedded.test') returning id::text`
      await sql`insert into app.users (company_id, name, email, role) values (${c!.id}, 'Ed', 'ed@embedded.test', 'admin')`
      const r = await runCli(
        [
          "keys",
          "create",
          "--company",
          "embedded.test",
          "--name",
          "n",
          "--read",
          "incidents",
          "--as",
          "ed@embedded.test",
          "--json"
        ],
        { DATABASE_URL: undefined, DATA_DIR: dir, EMBEDDED_PG_PORT: String(await freePort()) }
      )
      expect(r.stderr).toBe("")
      expect(r.code).toBe(0)
      expect(JSON.parse(r.stdout).key).toMatch(/^mk_/)
      // still running, and it holds the key: in the service's own database beside the app's
      // (the admin and the company were read from the app's)
      const own = postgres(databaseUrl(running.url, EMBEDDED_SERVICE_DATABASE), { max: 1, onnotice: () => {} })
      const [row] = await own<{ n: number }[]>`select count(*)::int as n from service.api_keys`
      await own.end()
      expect(row!.n).toBe(1)
      expect(await sql`select 1 from pg_namespace where nspname = 'service'`).toHaveLength(0)
    } finally {
      await sql.end()
    }
  }, 120_000)
})
