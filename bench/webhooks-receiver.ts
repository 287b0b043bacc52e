// The benchmark's HTTPS receiver. It counts requests per path and, for paths from /lat, keeps
// commit-to-receipt times (body createdAt is the event's commit time). By default it runs in
// its own process, driven over IPC, so that its TLS work does not share an event loop with
// what it measures; `startLocalReceiver` runs it inside the caller's process instead.
// `startHungReceivers` adds receivers on other loopback addresses that take requests and
// never answer, until told to recover (the isolation row).
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import { testCerts } from "../test/support/https-receiver.ts"

type Command = {
  readonly id: number
  readonly cmd: "count" | "latency" | "close" | "hung" | "recover" | "answered"
  readonly path?: string
  readonly from?: number
  readonly hosts?: ReadonlyArray<string>
}

export type LocalReceiver = {
  readonly server: Server
  readonly ca: string
  count(path: string): number
  /** Commit-to-receipt times of requests to `path` (default /lat) whose reference number is `from` or more. */
  latency(from: number, path?: string): Array<number>
}

/** Listens on a free loopback port; resolves once it listens. */
export const startLocalReceiver = (): Promise<LocalReceiver & { readonly port: number }> => {
  const counts = new Map<string, number>()
  const latency: Array<{ path: string; i: number; ms: number }> = []
  const { trusted } = testCerts()
  const server = createServer({ cert: trusted.cert, key: trusted.key }, (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const arrived = Date.now()
      const path = req.url ?? "/"
      counts.set(path, (counts.get(path) ?? 0) + 1)
      if (path.startsWith("/lat")) {
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
          createdAt: string
          data: { reference?: string }
        }
        latency.push({
          path,
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
        latency: (from, path = "/lat") => latency.filter((l) => l.path === path && l.i >= from).map((l) => l.ms)
      })
    )
  )
}

/**
 * Receivers on the given loopback addresses (one port each) that read every request and leave
 * it unanswered until `recover`; from then on they answer 200. `answered(path)` counts the
 * distinct delivery ids answered 200 at a path.
 */
export const startHungReceivers = async (hosts: ReadonlyArray<string>) => {
  const { trusted } = testCerts()
  let hanging = true
  const held: Array<ServerResponse> = []
  const ok = new Map<string, Set<string>>()
  const answer = (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? "/"
    const id = String(req.headers["service-delivery"] ?? "")
    res.on("finish", () => {
      let ids = ok.get(path)
      if (!ids) ok.set(path, (ids = new Set()))
      ids.add(id)
    })
    res.writeHead(200, { "content-type": "text/plain" })
    res.end("ok")
  }
  const servers = await Promise.all(
    hosts.map(
      (host) =>
        new Promise<{ server: Server; port: number }>((resolve) => {
          const server = createServer({ cert: trusted.cert, key: trusted.key }, (req, res) => {
            req.resume()
            req.on("end", () => {
              if (!hanging) return answer(req, res)
              ;(res as ServerResponse & { req0?: IncomingMessage }).req0 = req
              held.push(res)
            })
          })
          server.listen(0, host, () => resolve({ server, port: (server.address() as { port: number }).port }))
        })
    )
  )
  return {
    ports: servers.map((s) => s.port),
    recover: () => {
      hanging = false
      // Those still waiting (their sender may have given up on them already) get their answer now.
      for (const res of held.splice(0)) {
        if (!res.destroyed) answer((res as ServerResponse & { req0: IncomingMessage }).req0, res)
      }
    },
    answered: (path: string) => ok.get(path)?.size ?? 0,
    close: () => {
      for (const s of servers) {
        s.server.closeAllConnections()
        s.server.close()
      }
    }
  }
}

// Forked by bench/webhooks.ts: serve, and answer its questions over IPC.
if (
  process.send !== undefined &&
  process.argv[1] !== undefined &&
  import.meta.url.endsWith(process.argv[1].split("/").pop()!)
) {
  const receiver = await startLocalReceiver()
  let hung: Awaited<ReturnType<typeof startHungReceivers>> | null = null
  process.send({ ready: true, port: receiver.port, ca: receiver.ca })
  process.on("message", (m: Command) => {
    if (m.cmd === "count") process.send!({ id: m.id, value: receiver.count(m.path ?? "") })
    else if (m.cmd === "latency") process.send!({ id: m.id, value: receiver.latency(m.from ?? 0, m.path) })
    else if (m.cmd === "hung") {
      void startHungReceivers(m.hosts ?? []).then((h) => {
        hung = h
        process.send!({ id: m.id, value: h.ports })
      })
    } else if (m.cmd === "recover") {
      hung?.recover()
      process.send!({ id: m.id, value: true })
    } else if (m.cmd === "answered") process.send!({ id: m.id, value: hung?.answered(m.path ?? "") ?? 0 })
    else if (m.cmd === "close") {
      hung?.close()
      receiver.server.closeAllConnections()
      receiver.server.close(() => process.exit(0))
    }
  })
}
