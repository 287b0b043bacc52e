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
