// One secrets key per database (docs/deployment.md#several-replicas), as an operator meets it: two
// real service processes (`node src/main.ts`) on one database, the second with another SECRETS_KEY.
// The second refuses to start, exit 1, saying on stderr what to do (no stack trace); the first
// keeps serving. The admin CLI likewise.
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { keyFingerprint } from "../../src/platform/secrets/secrets-key.ts"
import { runCli } from "../support/cli.ts"
import { makeCompany } from "../support/app.ts"
import { freePort } from "../support/global-setup.ts"
import { startService, waitForUrl } from "../support/service-process.ts"
import { useDatabase } from "../support/fixtures.ts"

describe("one SECRETS_KEY per database", () => {
  const db = useDatabase()
  const dirs: string[] = []
  const children: ChildProcess[] = []
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "srs-secrets-key-"))
    dirs.push(d)
    return d
  }
  const key = randomBytes(32).toString("base64")
  const slot = `srs_key_${randomBytes(4).toString("hex")}`

  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL")
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it("a second service process with another SECRETS_KEY exits 1 naming SECRETS_KEY; the first keeps serving", {
    timeout: 120_000
  }, async () => {
    const common = { DATABASE_URL: db.url, REPLICATION_SLOT: slot, CAPTURE_HEARTBEAT: "1 second" }
    const firstPort = await freePort()
    const first = startService({ ...common, PORT: String(firstPort), SECRETS_KEY: key, DATA_DIR: tempDir() })
    children.push(first.child)
    const base = `http://127.0.0.1:${firstPort}`
    await waitForUrl(`${base}/readyz`, 60_000)
    const [row] = await db.sql<
      { fingerprint: string; source: string }[]
    >`select fingerprint, source from service.secrets_key`
    expect(row).toEqual({ fingerprint: keyFingerprint(Buffer.from(key, "base64")), source: "SECRETS_KEY" })

    const secondPort = await freePort()
    const second = startService({
      ...common,
      PORT: String(secondPort),
      SECRETS_KEY: randomBytes(32).toString("base64"),
      DATA_DIR: tempDir()
    })
    children.push(second.child)
    expect(await second.exited()).toBe(1)
    const stderr = second.stderr()
    expect(stderr).toMatch(
      /^error: SECRETS_KEY: this process's secrets key is not the one this database's webhook signing secrets are encrypted under/
    )
    expect(stderr).toContain("the same SECRETS_KEY")
    expect(stderr).not.toMatch(/^\s+at /m) // the message, not a stack trace
    expect(second.stdout()).toContain('"message":"refused to start"')
    // It refused before serving anything, or taking part in capture.
    expect(second.stdout()).not.toContain("Listening on")
    await expect(fetch(`http://127.0.0.1:${secondPort}/healthz`)).rejects.toThrow()

    // The first is untouched.
    expect(first.child.exitCode).toBeNull()
    const ready = await waitForUrl(`${await first.opsUrl()}/readyz`, 10_000)
    expect(ready).toMatchObject({ status: "ready", database: true })
    expect((await db.sql`select fingerprint from service.secrets_key`).map((r) => r.fingerprint)).toEqual([
      row!.fingerprint
    ])

    first.child.kill("SIGTERM")
    expect(await first.exited()).toBe(0)
  })

  it("the admin CLI's webhook commands with another SECRETS_KEY exit 1 naming it; with the same key they run", {
    timeout: 60_000
  }, async () => {
    const company = await makeCompany(db.sql)
    const env = { DATABASE_URL: db.url, DATA_DIR: tempDir() }
    const same = await runCli(["endpoints", "list", "--company", company.host, "--json"], { ...env, SECRETS_KEY: key })
    expect(same.stderr).toBe("")
    expect([same.code, JSON.parse(same.stdout)]).toEqual([0, []])

    const other = await runCli(["endpoints", "list", "--company", company.host, "--json"], {
      ...env,
      SECRETS_KEY: randomBytes(32).toString("base64")
    })
    expect(other.code).toBe(1)
    expect(other.stdout).toBe("")
    expect(other.stderr).toMatch(/^error: SECRETS_KEY: /)
    expect(other.stderr).toContain("the same SECRETS_KEY")
    expect(other.stderr).not.toMatch(/^\s+at /m)
  })
})
