// The Node server under the HTTP layer. The Effect layer starts listening before it installs
// the router's request handler, and Node leaves a request with no handler hanging: in that
// short window, and again once shutdown has removed the handler, answer 503 instead.
import { createServer, type Server } from "node:http"

const UNAVAILABLE = JSON.stringify({ error: "the service is starting or stopping; try again shortly" })

export const createServiceServer = (): Server => {
  const server = createServer()
  server.on("request", (_req, res) => {
    // Another listener (the router) answers once it is installed.
    if (server.listenerCount("request") > 1) return
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1", connection: "close" }).end(UNAVAILABLE)
  })
  // A request Node cannot parse (a raw non-ASCII byte in the URL, an unknown method, headers
  // over 16 KiB) never reaches the router; Node's own answer has no body. Answer it as JSON.
  server.on("clientError", (err: Error & { code?: string; reason?: string }, socket) => {
    if (err.code === "ECONNRESET" || !socket.writable) return void socket.destroy()
    const [status, text, message] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? [431, "Request Header Fields Too Large", "the request's headers are too large: at most 16 KiB"]
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
