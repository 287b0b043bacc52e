// The Node server under the HTTP layer. The Effect layer starts listening before it installs
// the router's request handler, and Node leaves a request with no handler hanging: in that
// short window, and again once shutdown has removed the handler, answer 503 instead. A door
// may answer a request before the router sees it: refusals a flood makes by the thousand are
// answered there for a fraction of the router's cost (docs/design.md, "Work before a key is
// known is bounded").
import { type IncomingMessage, Server, type ServerOptions, type ServerResponse } from "node:http"
import { Context } from "effect"
import type { HttpLimits } from "../config.ts"

/** Answers a request before the router, when it should (then true); false leaves it to the router. */
export type Door = (request: IncomingMessage, response: ServerResponse) => boolean

/** Where the HTTP layers put their door once they are built (and take it away as they stop). */
export interface DoorSlot {
  current: Door | undefined
}

/** The server's door slot, when the server has one (the service's does; absent: no door is installed). */
export const ServerDoor = Context.Reference<DoorSlot | undefined>("service/http/ServerDoor", {
  defaultValue: () => undefined
})

/** A Node server whose requests pass its door first. */
class DoorServer extends Server {
  private readonly slot: DoorSlot
  constructor(options: ServerOptions, slot: DoorSlot) {
    super(options)
    this.slot = slot
  }
  override emit(event: string | symbol, ...args: Array<unknown>): boolean {
    if (event === "request") {
      if (this.slot.current?.(args[0] as IncomingMessage, args[1] as ServerResponse)) return true
    }
    return super.emit(event as string, ...args)
  }
}

const UNAVAILABLE = JSON.stringify({ error: "the service is starting or stopping; try again shortly" })

/** The limits when the environment sets none (HTTP_* in the README's configuration table). */
export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  maxHeaderBytes: 16 * 1024,
  maxConnections: 1000
}

const kib = (bytes: number): string => (bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`)

/**
 * Node's server with limits on what one client may hold: a client trickling its headers is cut
 * off after the headers timeout (Node checks open requests every `connectionsCheckingInterval`,
 * 30 s by default, so that is made a fraction of the timeout), and connections past the cap are
 * dropped as they arrive. The door slot's door, once installed, sees each request first.
 */
export const createServiceServer = (
  limits: HttpLimits = DEFAULT_HTTP_LIMITS,
  door: DoorSlot = { current: undefined }
): Server => {
  const server = new DoorServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      maxHeaderSize: limits.maxHeaderBytes,
      connectionsCheckingInterval: Math.min(1000, Math.max(100, Math.floor(limits.headersTimeoutMs / 4)))
    },
    door
  )
  server.maxConnections = limits.maxConnections
  server.on("request", (_req, res) => {
    // Another listener (the router) answers once it is installed.
    if (server.listenerCount("request") > 1) return
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1", connection: "close" }).end(UNAVAILABLE)
  })
  // A request Node cannot parse (a raw non-ASCII byte in the URL, an unknown method, headers
  // over the limit, headers that took too long) never reaches the router; Node's own answer has
  // no body. Answer it as JSON.
  server.on("clientError", (err: Error & { code?: string; reason?: string }, socket) => {
    if (err.code === "ECONNRESET" || !socket.writable) return void socket.destroy()
    const [status, text, message] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? [
            431,
            "Request Header Fields Too Large",
            `the request's headers are too large: at most ${kib(limits.maxHeaderBytes)}`
          ]
        : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? [408, "Request Timeout", "the request did not arrive in time"]
          : [400, "Bad Request", `malformed HTTP request: ${(err.reason ?? err.message).replace(/^Parse Error: /, "")}`]
    const body = JSON.stringify({ error: message })
    socket.end(
      `HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
    )
  })
  return server
}

/**
 * Paths match in their exact case: `/API/v1/incidents` is an unknown path (404), not an alias
 * of `/api/v1/incidents` (the router's default would take it), so a client's mistake shows at
 * once instead of working by accident. A trailing slash is refused under /api (the API's
 * fallback) and forgiven on the admin pages, where people type addresses.
 */
export const ROUTER_CONFIG = {
  caseSensitive: true,
  ignoreDuplicateSlashes: false,
  // The router's default (100) turns a longer id into "no route" and so a misleading 405; Node
  // bounds the whole request line anyway (16 KiB of headers).
  maxParamLength: 16 * 1024
} as const
