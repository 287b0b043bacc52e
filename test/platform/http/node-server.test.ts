// The server answers 503 (not silence) while no router handler is installed, and JSON to a
// request Node cannot parse.
import { Cause, ConfigProvider, Effect, Exit } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { connect, type AddressInfo, type Socket } from "node:net"
import { loadHttpLimits, type HttpLimits } from "../../../src/platform/config.ts"
import { StartRefused } from "../../../src/platform/db/refusal.ts"
import { createServiceServer, DEFAULT_HTTP_LIMITS } from "../../../src/platform/http/node-server.ts"

const servers: Array<ReturnType<typeof createServiceServer>> = []
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r))
})

const listen = async (limits: Partial<HttpLimits> = {}) => {
  const server = createServiceServer({ ...DEFAULT_HTTP_LIMITS, ...limits })
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

  it("cuts off a client that sends its headers one byte at a time, with a JSON 408", async () => {
    const { server } = await listen({ headersTimeoutMs: 1500, requestTimeoutMs: 3000 })
    server.on("request", (_req, res) => void res.end("ok"))
    const port = (server.address() as AddressInfo).port
    const socket = connect(port, "127.0.0.1")
    let answer = ""
    socket.setEncoding("latin1")
    socket.on("data", (d: string) => (answer += d))
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    socket.on("error", () => undefined)
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    // A header that never ends: one byte every 100 ms, for at most 30 s (300 bytes).
    socket.write("GET /api/v1/incidents HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    let sent = 0
    const trickle = setInterval(() => {
      if (socket.writable && sent < 300) {
        socket.write("a")
        sent++
      }
    }, 100)
    await closed
    clearInterval(trickle)
    // The server ended it, long before the client had sent what it meant to.
    expect(sent).toBeLessThan(300)
    expect(answer).toMatch(/^HTTP\/1\.1 408 /)
    expect(JSON.parse(answer.split("\r\n\r\n")[1]!)).toEqual({ error: "the request did not arrive in time" })
  })

  it("answers 431 at the configured header size, naming it", async () => {
    const { server } = await listen({ maxHeaderBytes: 2048 })
    server.on("request", (_req, res) => void res.end("ok"))
    const port = (server.address() as AddressInfo).port
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, "127.0.0.1", () =>
        socket.end(`GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"k".repeat(3000)}\r\n\r\n`)
      )
      let text = ""
      socket.setEncoding("latin1")
      socket.on("data", (d: string) => (text += d))
      socket.on("close", () => resolve(text))
      socket.on("error", reject)
    })
    expect(answer).toMatch(/^HTTP\/1\.1 431 /)
    expect(JSON.parse(answer.split("\r\n\r\n")[1]!)).toEqual({
      error: "the request's headers are too large: at most 2 KiB"
    })
  })

  it("drops connections past the cap and takes new ones once others close", async () => {
    const { server, url } = await listen({ maxConnections: 2 })
    server.on("request", (_req, res) => void res.end("ok"))
    const port = (server.address() as AddressInfo).port
    const open = (): Promise<Socket> =>
      new Promise((resolve, reject) => {
        const socket = connect(port, "127.0.0.1", () => resolve(socket))
        socket.on("error", reject)
      })
    const held = [await open(), await open()]
    // Both held connections are counted before the third arrives.
    await new Promise((r) => setTimeout(r, 100))
    const third = await open()
    const thirdClosed = await new Promise<boolean>((resolve) => {
      third.on("close", () => resolve(true))
      third.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    })
    expect(thirdClosed).toBe(true)
    for (const s of held) s.destroy()
    await new Promise((r) => setTimeout(r, 100))
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) })
    expect(await res.text()).toBe("ok")
  })
})

describe("HTTP limits from the environment", () => {
  const load = (env: Record<string, string>) =>
    Effect.runSyncExit(loadHttpLimits.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(env)))))

  it("defaults: headers in 10 s, the request in 30 s, 5 s keep-alive, 16 KiB of headers, 1000 connections", () => {
    const exit = load({})
    expect(Exit.isSuccess(exit) && exit.value).toEqual(DEFAULT_HTTP_LIMITS)
    expect(DEFAULT_HTTP_LIMITS).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      maxHeaderBytes: 16 * 1024,
      maxConnections: 1000
    })
  })

  it("reads each variable", () => {
    const exit = load({
      HTTP_HEADERS_TIMEOUT: "2 seconds",
      HTTP_REQUEST_TIMEOUT: "1 minute",
      HTTP_KEEP_ALIVE_TIMEOUT: "700 millis",
      HTTP_MAX_HEADER_SIZE: "8192",
      HTTP_MAX_CONNECTIONS: "50"
    })
    expect(Exit.isSuccess(exit) && exit.value).toEqual({
      headersTimeoutMs: 2000,
      requestTimeoutMs: 60_000,
      keepAliveTimeoutMs: 700,
      maxHeaderBytes: 8192,
      maxConnections: 50
    })
  })

  it.each([
    [{ HTTP_HEADERS_TIMEOUT: "40 seconds" }, "HTTP_HEADERS_TIMEOUT must not be longer than HTTP_REQUEST_TIMEOUT"],
    [{ HTTP_REQUEST_TIMEOUT: "10 millis" }, "at least 1 second"],
    [{ HTTP_MAX_HEADER_SIZE: "100" }, "HTTP_MAX_HEADER_SIZE must be between"],
    [{ HTTP_MAX_CONNECTIONS: "0" }, "HTTP_MAX_CONNECTIONS must be at least 1"]
  ])("refuses %o at start", (env, message) => {
    const exit = load(env)
    expect(Exit.isFailure(exit)).toBe(true)
    const error = Exit.isFailure(exit) ? Cause.squash(exit.cause) : null
    expect(error).toBeInstanceOf(StartRefused)
    expect((error as StartRefused).message).toContain(message)
  })
})
