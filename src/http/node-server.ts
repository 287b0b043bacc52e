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
  return server
}

/**
 * Paths match in their exact case: `/API/v1/incidents` is an unknown path (404), not an alias
 * of `/api/v1/incidents` (the router's default would take it), so a client's mistake shows at
 * once instead of working by accident. A trailing slash is refused under /api (the API's
 * fallback) and forgiven on the admin pages, where people type addresses.
 */
export const ROUTER_CONFIG = { caseSensitive: true, ignoreDuplicateSlashes: false } as const
