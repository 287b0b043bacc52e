// The server answers 503 (not silence) while no router handler is installed.
import { afterEach, describe, expect, it } from "vitest"
import type { AddressInfo } from "node:net"
import { createServiceServer } from "../../src/http/node-server.ts"

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
})
