// Graceful shutdown of the real service process (node src/main.ts): on SIGTERM it stops
// accepting requests, lets a delivery in flight finish and records it, stores capture's
// checkpoint, and exits 0.
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createEndpoint } from "../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident, makeCompany } from "../support/app.ts"
import { startHttpsReceiver, testCerts, type Receiver } from "../support/https-receiver.ts"
import { freePort } from "../support/net.ts"
import { ADMIN, LOOPBACK, waitFor, type TestDeps } from "../support/world.ts"
import { useDatabase } from "../support/fixtures.ts"
import { runSql } from "../support/sql.ts"

const MAIN = fileURLToPath(new URL("../../src/main.ts", import.meta.url))

const db = useDatabase()
let receiver: Receiver
let dir: string

beforeAll(async () => {
  receiver = await startHttpsReceiver()
  dir = mkdtempSync(join(tmpdir(), "srs-shutdown-"))
})
afterAll(async () => {
  await receiver?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

describe("graceful shutdown", () => {
  it("on SIGTERM: stops accepting requests, finishes the delivery in flight, stores the checkpoint, exits 0", {
    timeout: 60_000
  }, async () => {
    const company = await makeCompany(db.sql)
    const secretsKey = randomBytes(32)
    const caFile = join(dir, "ca.pem")
    writeFileSync(caFile, testCerts().trusted.caCert)
    const port = await freePort()
    const opsPort = await freePort()
    const slot = `slot_${db.name}`
    const child = spawn(process.execPath, [MAIN], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        PORT: String(port),
        OPS_PORT: String(opsPort),
        REPLICATION_SLOT: slot,
        SEED_DEMO: "false",
        LOG_LEVEL: "Info",
        SECRETS_KEY: secretsKey.toString("base64"),
        WEBHOOK_ALLOWED_NETWORKS: "127.0.0.0/8",
        NODE_EXTRA_CA_CERTS: caFile
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    child.stdout!.on("data", (d) => (output += d))
    child.stderr!.on("data", (d) => (output += d))
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)))
    try {
      const base = `http://127.0.0.1:${port}`
      // A time limit per try: a connection made while the server starts may go unanswered.
      // Ready, and capture streaming: an incident written before its first views would be in them, not an event.
      const streaming = async () => {
        const r = await fetch(`http://127.0.0.1:${opsPort}/readyz`, { signal: AbortSignal.timeout(1_000) }).catch(
          () => null
        )
        return r?.ok === true && ((await r.json()) as { capture: { streaming: boolean } }).capture.streaming
      }
      await waitFor(streaming, "the service to be ready and capture to stream", 60_000)
      const deps: TestDeps = { sql: db.sql, secretsKey, allowed: LOOPBACK }
      await runSql(
        deps.sql,
        createEndpoint(deps, ADMIN, {
          companyId: company.id,
          name: "Slow",
          url: receiver.url("/slow"),
          events: ["incident.created"]
        })
      )
      // The receiver takes 3 s to answer: the attempt is in flight when the stop comes.
      receiver.reply("/slow", { status: 200, delayMs: 3_000 })
      const incident = await insertIncident(db.sql, company.id)
      await waitFor(
        () => receiver.requests.some((r) => r.path === "/slow"),
        "the delivery to reach the receiver",
        20_000
      )
      const stopAt = Date.now()
      child.kill("SIGTERM")
      // HTTP goes first: new connections are refused while the delivery is still finishing
      // (seen refused before the process exits; a fixed deadline read a loaded machine's clock).
      const httpStopped = waitFor(
        async () =>
          await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(500) }).then(
            () => false,
            () => true
          ),
        "HTTP to stop accepting",
        15_000,
        50
      ).then(() => Date.now())
      expect(await exited).toBe(0)
      const exitedAt = Date.now()
      expect(exitedAt - stopAt).toBeGreaterThan(2_000)
      expect(await httpStopped).toBeLessThan(exitedAt)

      const [d] = await db.sql<
        { state: string; attempts: number; last_status: number | null; leased_by: string | null }[]
      >`
        select state, attempts, last_status, leased_by::text from service.webhook_deliveries`
      expect(d).toEqual({ state: "succeeded", attempts: 1, last_status: 200, leased_by: null })
      const [stored] = await db.sql<{ covered: boolean }[]>`
        select c.checkpoint_lsn >= e.commit_lsn as covered
        from service.capture_state c, service.events e where c.slot_name = ${slot} and e.record_id = ${incident}`
      expect(stored!.covered).toBe(true)
      const [acked] = await db.sql<{ acked: boolean }[]>`
        select s.confirmed_flush_lsn >= c.checkpoint_lsn as acked
        from pg_replication_slots s, service.capture_state c where s.slot_name = ${slot} and c.slot_name = ${slot}`
      expect(acked!.acked).toBe(true)
      expect(output).toMatch(/"message":"capture stopped","checkpoint":"[0-9A-F]+\/[0-9A-F]+"/)
      // One start-up line with the address.
      expect(output.match(/"message":"Listening on http:\/\//g)).toHaveLength(1)
      expect(output).not.toContain('"message":"listening"')
      expect(output).not.toContain('"level":"error"')
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL")
    }
  })
})
