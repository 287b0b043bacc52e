// The server answers 503 (not silence) while no router handler is installed, and JSON to a
// request Node cannot parse.
import { afterEach, describe, expect, it } from "vitest"
import { connect, type AddressInfo } from "node:net"
import { createServiceServer } from "../../../src/platform/http/node-server.ts"

const servers: Array<ReturnType<typeof createServiceServer>> = []
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r))
})

const listen = async () => {
  const server = createServiceServer()
  servers.push(server)
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/healthz` }
}

describe("service server", () => {
  it("answers 503 with Retry-After before the router is installed", async () => {
    const { url } = await listen()
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
    expect(res.status).toBe(503)
    expect(res.headers.get("retry-after")).toBe("1")
    expect(await res.json()).toEqual({ error: expect.stringContaining("starting") })
  })

  it("leaves requests to the router once it is installed, and answers again after it is removed", async () => {
    const { server, url } = await listen()
    const handler = (_req: unknown, res: import("node:http").ServerResponse) => void res.end("ok")
    server.on("request", handler)
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
    expect(res.status).toBe(200)
    expect(await res.text()).toBe("ok")
    server.off("request", handler)
    expect((await fetch(url, { signal: AbortSignal.timeout(2000) })).status).toBe(503)
  })

  it("answers a request Node cannot parse with a JSON error, not an empty body", async () => {
    const { server } = await listen()
    server.on("request", (_req, res) => void res.end("ok"))
    const port = (server.address() as AddressInfo).port
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, "127.0.0.1", () => socket.end(request))
        let answer = ""
        socket.setEncoding("latin1")
        socket.on("data", (d: string) => (answer += d))
        socket.on("close", () => resolve(answer))
        socket.on("error", reject)
      })
    const parse = (answer: string) => {
      const [head, body] = answer.split("\r\n\r\n")
      return {
        status: Number(head!.split(" ")[1]),
        head: head!.toLowerCase(),
        json: JSON.parse(body!) as { error: string }
      }
    }
    const method = parse(await raw("FOO /api/v1/incidents HTTP/1.1\r\nHost: x\r\n\r\n"))
    expect(method.status).toBe(400)
    expect(method.head).toContain("content-type: application/json")
    expect(method.json.error).toMatch(/^malformed HTTP request: /)
    const nonAscii = parse(await raw("GET /api/v1/incidents?limit=\u0663 HTTP/1.1\r\nHost: x\r\n\r\n"))
    expect(nonAscii.status).toBe(400)
    expect(nonAscii.json.error).toMatch(/^malformed HTTP request: /)
    const big = parse(
      await raw(`GET /api/v1/incidents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${"k".repeat(20_000)}\r\n\r\n`)
    )
    expect(big.status).toBe(431)
    expect(big.json).toEqual({ error: "the request's headers are too large: at most 16 KiB" })
  })
})
