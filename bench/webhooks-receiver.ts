// The benchmark's HTTPS receiver, in its own process so that its TLS work does not share an
// event loop with the engine it measures. It counts requests per path and, for /lat, keeps
// commit-to-receipt times (body createdAt is the event's commit time). Driven over IPC.
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:https"
import { testCerts } from "../test/support/https-receiver.ts"

type Command = { readonly id: number; readonly cmd: "count" | "latency" | "close"; readonly path?: string; readonly from?: number }

const counts = new Map<string, number>()
const latency: Array<{ i: number; ms: number }> = []
const { trusted } = testCerts()

const server = createServer({ cert: trusted.cert, key: trusted.key }, (req: IncomingMessage, res: ServerResponse) => {
  const chunks: Array<Buffer> = []
  req.on("data", (c: Buffer) => chunks.push(c))
  req.on("end", () => {
    const arrived = Date.now()
    const path = req.url ?? "/"
    counts.set(path, (counts.get(path) ?? 0) + 1)
    if (path === "/lat") {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { createdAt: string; data: { reference?: string } }
      latency.push({ i: Number(String(body.data.reference ?? "").slice(4)), ms: arrived - Date.parse(body.createdAt) })
    }
    res.writeHead(200, { "content-type": "text/plain" })
    res.end("ok")
  })
})

server.listen(0, "127.0.0.1", () => {
  process.send!({ ready: true, port: (server.address() as { port: number }).port, ca: trusted.caCert })
})

process.on("message", (m: Command) => {
  if (m.cmd === "count") process.send!({ id: m.id, value: counts.get(m.path ?? "") ?? 0 })
  else if (m.cmd === "latency") process.send!({ id: m.id, value: latency.filter((l) => l.i >= (m.from ?? 0)).map((l) => l.ms) })
  else if (m.cmd === "close") {
    server.closeAllConnections()
    server.close(() => process.exit(0))
  }
})
