// The receivers' kit: `admin listen` follows the events feed of a running service with an API
// key and forwards each new event to a local URL, signed as a real delivery is, with the
// secret it was given. Real capture, real server, a real local receiver.
import { spawn, type ChildProcess } from "node:child_process"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { newSecret, verify } from "../../../src/webhooks/net/signature.ts"
import { insertIncident } from "../../support/app.ts"
import { createCompany, type TestCompany } from "../../support/views.ts"
import { makeKey } from "../../support/http.ts"
import { runCli } from "../../support/cli.ts"
import { waitFor } from "../../support/wait.ts"
import { useServiceWorld } from "../../support/world.ts"

interface Received {
  readonly headers: Record<string, string | string[] | undefined>
  readonly body: string
}

describe("admin listen", () => {
  let company: TestCompany
  const { db, cap, server } = useServiceWorld({
    seed: async (sql) => {
      company = await createCompany(sql)
    },
    receiver: false
  })
  let local: Server
  let localUrl: string
  let child: ChildProcess | undefined
  const received: Received[] = []

  beforeAll(async () => {
    local = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") })
        res.writeHead(204).end()
      })
    })
    await new Promise<void>((r) => local.listen(0, "127.0.0.1", r))
    localUrl = `http://127.0.0.1:${(local.address() as AddressInfo).port}/hooks`
  })
  afterAll(async () => {
    child?.kill("SIGKILL")
    await new Promise((r) => local?.close(r))
  })

  it("forwards each new event, signed with the given secret, and nothing from before it started", {
    timeout: 60_000
  }, async () => {
    const { key } = await makeKey(db, company, { scopes: ["incidents"] })
    await insertIncident(db.sql, company.id, { title: "Before listen" })
    await cap.settle()
    const secret = newSecret()
    child = spawn(
      process.execPath,
      ["src/faces/cli/admin.ts", "listen", "--forward-to", localUrl, "--url", server.url, "--secret", secret, "--json"],
      {
        cwd: new URL("../../../", import.meta.url).pathname,
        env: { ...process.env, SERVICE_API_KEY: key },
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    let out = ""
    let err = ""
    child.stdout!.on("data", (d) => (out += d))
    child.stderr!.on("data", (d) => (err += d))
    const until = (check: () => boolean, what: string) =>
      waitFor(check, () => `${what}; stderr: ${err}; stdout: ${out}`, 30_000, 50)
    await until(() => err.includes("Ready."), "listen to be ready")
    expect(err).toContain(secret)

    const incident = await insertIncident(db.sql, company.id, { title: "After listen" })
    await cap.settle()
    await until(() => received.length > 0 && out.includes('"status":"204"'), "the forwarded event")
    expect(received).toHaveLength(1)
    const [r] = received
    const body = JSON.parse(r!.body) as { id: string; event: string; data: { id: string; title: string } }
    expect(body).toMatchObject({ event: "incident.created", data: { id: incident, title: "After listen" } })
    expect(r!.headers["service-event"]).toBe("incident.created")
    expect(r!.headers["service-delivery"]).toBe(body.id)
    expect(verify(String(r!.headers["service-signature"]), r!.body, secret).ok).toBe(true)
    expect(verify(String(r!.headers["service-signature"]), r!.body, newSecret()).ok).toBe(false)
    // Standard Webhooks receivers verify it too.
    const headers = {
      "webhook-id": String(r!.headers["webhook-id"]),
      "webhook-timestamp": String(r!.headers["webhook-timestamp"]),
      "webhook-signature": String(r!.headers["webhook-signature"])
    }
    expect(new Webhook(secret).verify(r!.body, headers)).toMatchObject({ event: "incident.created" })
    expect(JSON.parse(out.trim().split("\n").at(-1)!)).toMatchObject({
      id: body.id,
      event: "incident.created",
      status: "204"
    })
  })

  it("refuses a bad key, an unknown event and a URL that is not http(s), with exit 1", async () => {
    const bad = await runCli(["listen", "--forward-to", localUrl, "--url", server.url, "--api-key", "mk_nope"], {})
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain("401")
    const event = await runCli(
      ["listen", "--forward-to", localUrl, "--api-key", "mk_x", "--events", "incident.deleted"],
      {}
    )
    expect(event.code).toBe(1)
    expect(event.stderr).toContain("unknown event incident.deleted")
    const url = await runCli(["listen", "--forward-to", "ftp://x", "--api-key", "mk_x"], {})
    expect(url.code).toBe(1)
    expect(url.stderr).toContain("--forward-to must be an http:// or https:// URL")
  })
})
