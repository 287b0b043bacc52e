// The receiver examples under examples/ take real deliveries from the real engine over HTTPS,
// verify them, answer at once and skip repeats; a tampered body is refused with 400.
import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { request } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sign, standardHeaders } from "../../src/webhooks/net/signature.ts"
import { createEndpoint } from "../../src/webhooks/endpoints/endpoints.ts"
import { insertIncident } from "../support/app.ts"
import { testCerts } from "../support/https-receiver.ts"
import { freePort } from "../support/net.ts"
import { ADMIN, startEngine, startWorld, waitFor, type RunningEngine, type World } from "../support/world.ts"
import { runSql } from "../support/sql.ts"

const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url))
const hasPython = spawnSync("python3", ["--version"]).status === 0
if (!hasPython) console.warn("python3 is not installed: the Python receiver example is not run")

const post = (port: number, body: string, headers: Record<string, string>) =>
  new Promise<number>((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        path: "/hooks",
        method: "POST",
        ca: testCerts().trusted.caCert,
        headers: { "content-type": "application/json", ...headers }
      },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      }
    )
    req.on("error", reject)
    req.end(body)
  })

describe.each([
  { name: "Node", command: process.execPath, file: "node-receiver/server.mjs", run: true },
  { name: "Python", command: "python3", file: "python-receiver/receiver.py", run: hasPython }
])("the $name receiver example", ({ command, file, run }) => {
  let w: World
  let engine: RunningEngine
  let child: ChildProcess | undefined
  let output = ""
  const dir = mkdtempSync(join(tmpdir(), "srs-example-"))

  beforeAll(async () => {
    if (!run) return
    w = await startWorld()
    engine = await startEngine(w.deps)
  })
  afterAll(async () => {
    child?.kill("SIGKILL")
    await engine?.stop()
    await w?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it.runIf(run)("verifies a real delivery, refuses a tampered one, skips a repeat", { timeout: 60_000 }, async () => {
    const port = await freePort()
    const made = await runSql(
      w.deps.sql,
      createEndpoint(w.deps, ADMIN, {
        companyId: w.company.id,
        name: "Example",
        url: `https://127.0.0.1:${port}/hooks`,
        events: ["incident.created"]
      })
    )
    const certs = testCerts().trusted
    writeFileSync(join(dir, "cert.pem"), certs.cert)
    writeFileSync(join(dir, "key.pem"), certs.key)
    child = spawn(command, [join(EXAMPLES, file)], {
      env: {
        ...process.env,
        WEBHOOK_SECRET: made.secret,
        PORT: String(port),
        TLS_CERT: join(dir, "cert.pem"),
        TLS_KEY: join(dir, "key.pem")
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    child.stdout!.on("data", (d) => (output += d))
    child.stderr!.on("data", (d) => (output += d))
    const until = (text: string) =>
      waitFor(
        () => output.includes(text),
        () => `"${text}" from the example; it printed:\n${output}`,
        30_000,
        50
      )
    await until("listening on https://")

    const incident = await insertIncident(w.db.sql, w.company.id)
    await w.cap.settle()
    await until(`record ${incident}`)
    expect(output).toMatch(new RegExp(`verified incident\\.created \\S+ record ${incident}`))
    // The engine records the 2xx it got.
    const delivery = await waitFor(
      async () =>
        (
          await w.db.sql<
            { id: string }[]
          >`select id::text from service.webhook_deliveries where endpoint_id = ${made.id} and state = 'succeeded'`
        )[0],
      "the delivery recorded as succeeded"
    )

    // The real delivery carried both schemes; the example checked the Standard Webhooks one.
    // Service-Signature alone is accepted too:
    const body0 = JSON.stringify({
      id: "00000000-0000-4000-8000-000000000000",
      event: "incident.created",
      createdAt: new Date().toISOString(),
      data: { id: incident }
    })
    expect(
      await post(port, body0, { "service-signature": sign(made.secret, Math.floor(Date.now() / 1000), body0) })
    ).toBe(204)
    // A Standard Webhooks signature over other bytes is refused.
    const std = standardHeaders(made.secret, "x", Math.floor(Date.now() / 1000), body0)
    expect(await post(port, body0.replace("incident", "permit"), std)).toBe(400)
    // Signed with the right secret, then tampered with: refused.
    const body = JSON.stringify({
      id: delivery.id,
      event: "incident.created",
      createdAt: new Date().toISOString(),
      data: { id: incident }
    })
    const t = Math.floor(Date.now() / 1000)
    expect(
      await post(port, body.replace("incident.created", "permit.closed"), {
        "service-signature": sign(made.secret, t, body)
      })
    ).toBe(400)
    // Old timestamps are refused even with a good signature.
    expect(await post(port, body, { "service-signature": sign(made.secret, t - 600, body) })).toBe(400)
    // The same delivery again: accepted, and skipped as a repeat.
    expect(await post(port, body, { "service-signature": sign(made.secret, t, body) })).toBe(204)
    await until(`repeat ${delivery.id} skipped`)
  })
})
