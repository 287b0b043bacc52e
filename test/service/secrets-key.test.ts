// Issue 13.7, as an operator meets it: two real service processes (`node src/main.ts`) on one
// database, the second with another SECRETS_KEY. The second refuses to start, exit 1, saying
// on stderr what to do (no stack trace); the first keeps serving. The admin CLI likewise.
import { spawn, type ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { keyFingerprint } from "../../src/delivery/secrets.ts"
import { runCli } from "../admin/run-cli.ts"
import { makeCompany } from "../support/app.ts"
import { freshDatabase, type TestDatabase } from "../support/db.ts"
import { freePort } from "../support/global-setup.ts"

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

const run = (env: Record<string, string>) => {
  const child = spawn(process.execPath, [MAIN], { env: { ...process.env, LOG_LEVEL: "Info", ...env }, stdio: ["ignore", "pipe", "pipe"] })
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (d) => (stdout += d))
  child.stderr!.on("data", (d) => (stderr += d))
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
  const exited = (ms = 40_000) =>
    Promise.race([
      exit,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no exit within ${ms} ms; output:\n${(stdout + stderr).slice(-4000)}`)), ms))
    ])
  return { child, exited, stdout: () => stdout, stderr: () => stderr }
}

const waitFor = async (url: string, ms: number) => {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(3000) })
      if (r.ok) return r
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} did not answer within ${ms} ms`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("one SECRETS_KEY per database", () => {
  let db: TestDatabase
  const dirs: string[] = []
  const children: ChildProcess[] = []
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "srs-secrets-key-"))
    dirs.push(d)
    return d
  }
  const key = randomBytes(32).toString("base64")
  const slot = `srs_key_${randomBytes(4).toString("hex")}`

  beforeAll(async () => {
    db = await freshDatabase()
  })
  afterAll(async () => {
    for (const c of children) c.kill("SIGKILL")
    await db?.drop()
    for (const d of dirs) rmSync(d, { recursive: true, force: true })
  })

  it("a second service process with another SECRETS_KEY exits 1 naming SECRETS_KEY; the first keeps serving", { timeout: 120_000 }, async () => {
    const common = { DATABASE_URL: db.url, REPLICATION_SLOT: slot, CAPTURE_HEARTBEAT: "1 second" }
    const firstPort = await freePort()
    const first = run({ ...common, PORT: String(firstPort), SECRETS_KEY: key, DATA_DIR: tempDir() })
    children.push(first.child)
    const base = `http://127.0.0.1:${firstPort}`
    await waitFor(`${base}/readyz`, 60_000)
    const [row] = await db.sql<{ fingerprint: string; source: string }[]>`select fingerprint, source from service.secrets_key`
    expect(row).toEqual({ fingerprint: keyFingerprint(Buffer.from(key, "base64")), source: "SECRETS_KEY" })

    const secondPort = await freePort()
    const second = run({ ...common, PORT: String(secondPort), SECRETS_KEY: randomBytes(32).toString("base64"), DATA_DIR: tempDir() })
    children.push(second.child)
    expect(await second.exited()).toBe(1)
    const stderr = second.stderr()
    expect(stderr).toMatch(/^error: SECRETS_KEY: this process's secrets key is not the one this database's webhook signing secrets are encrypted under/)
    expect(stderr).toContain("the same SECRETS_KEY")
    expect(stderr).not.toMatch(/^\s+at /m) // the message, not a stack trace
    expect(second.stdout()).toContain('"message":"refused to start"')
    // It refused before serving anything, or taking part in capture.
    expect(second.stdout()).not.toContain("Listening on")
    await expect(fetch(`http://127.0.0.1:${secondPort}/healthz`)).rejects.toThrow()

    // The first is untouched.
    expect(first.child.exitCode).toBeNull()
    const ready = await waitFor(`${base}/readyz`, 10_000)
    expect(await ready.json()).toMatchObject({ status: "ready", database: true })
    expect((await db.sql`select fingerprint from service.secrets_key`).map((r) => r.fingerprint)).toEqual([row!.fingerprint])

    first.child.kill("SIGTERM")
    expect(await first.exited()).toBe(0)
  })

  it("the admin CLI's webhook commands with another SECRETS_KEY exit 1 naming it; with the same key they run", { timeout: 60_000 }, async () => {
    const company = await makeCompany(db.sql)
    const env = { DATABASE_URL: db.url, DATA_DIR: tempDir() }
    const same = await runCli(["endpoints", "list", "--company", company.host, "--json"], { ...env, SECRETS_KEY: key })
    expect(same.stderr).toBe("")
    expect([same.code, JSON.parse(same.stdout)]).toEqual([0, []])

    const other = await runCli(["endpoints", "list", "--company", company.host, "--json"], { ...env, SECRETS_KEY: randomBytes(32).toString("base64") })
    expect(other.code).toBe(1)
    expect(other.stdout).toBe("")
    expect(other.stderr).toMatch(/^error: SECRETS_KEY: /)
    expect(other.stderr).toContain("the same SECRETS_KEY")
    expect(other.stderr).not.toMatch(/^\s+at /m)
  })
})
