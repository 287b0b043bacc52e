// The benchmark's HTTPS receiver. It counts requests per path and, for /lat, keeps
// commit-to-receipt times (body createdAt is the event's commit time). By default it runs in
// its own process, driven over IPC, so that its TLS work does not share an event loop with
// what it measures; `startLocalReceiver` runs it inside the caller's process instead.
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import { testCerts } from "../test/support/https-receiver.ts"

type Command = {
  readonly id: number
  readonly cmd: "count" | "latency" | "close"
  readonly path?: string
  readonly from?: number
}

export type LocalReceiver = {
  readonly server: Server
  readonly ca: string
  count(path: string): number
  latency(from: number): Array<number>
}

/** Listens on a free loopback port; resolves once it listens. */
export const startLocalReceiver = (): Promise<LocalReceiver & { readonly port: number }> => {
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
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          createdAt: string
          data: { reference?: string }
        }
        latency.push({
          i: Number(String(body.data.reference ?? "").slice(4)),
          ms: arrived - Date.parse(body.createdAt)
        })
      }
      res.writeHead(200, { "content-type": "text/plain" })
      res.end("ok")
    })
  })
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () =>
      resolve({
        server,
        ca: trusted.caCert,
        port: (server.address() as { port: number }).port,
        count: (path) => counts.get(path) ?? 0,
        latency: (from) => latency.filter((l) => l.i >= from).map((l) => l.ms)
      })
    )
  )
}

// Forked by bench/webhooks.ts: serve, and answer its questions over IPC.
if (
  process.send !== undefined &&
  process.argv[1] !== undefined &&
  import.meta.url.endsWith(process.argv[1].split("/").pop()!)
) {
  const receiver = await startLocalReceiver()
  process.send({ ready: true, port: receiver.port, ca: receiver.ca })
  process.on("message", (m: Command) => {
    if (m.cmd === "count") process.send!({ id: m.id, value: receiver.count(m.path ?? "") })
    else if (m.cmd === "latency") process.send!({ id: m.id, value: receiver.latency(m.from ?? 0) })
    else if (m.cmd === "close") {
      receiver.server.closeAllConnections()
      receiver.server.close(() => process.exit(0))
    }
  })
}
