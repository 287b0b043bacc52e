// A TCP proxy on loopback in front of the test PostgreSQL, to make connections fail the way
// networks do: freeze() leaves every connection open but silent both ways (a dead path:
// nothing arrives, nothing fails, and the server closing its side is not passed on), and
// refuseNew cuts every new connection at once. New connections otherwise pass as usual.
import { connect, createServer, type Socket } from "node:net"

export interface TcpProxy {
  /** The given PostgreSQL URL, through the proxy. */
  readonly url: (databaseUrl: string) => string
  /** Every connection open now goes silent, both ways, and stays open. */
  readonly freeze: () => void
  /** While true, new connections are closed as they arrive. */
  refuseNew: boolean
  readonly close: () => Promise<void>
}

export const startTcpProxy = async (target: { readonly host: string; readonly port: number }): Promise<TcpProxy> => {
  const pairs = new Set<{ readonly client: Socket; readonly upstream: Socket; frozen: boolean }>()
  const proxy: TcpProxy = {
    url: (databaseUrl) => {
      const u = new URL(databaseUrl)
      u.hostname = "127.0.0.1"
      u.port = String(port)
      return u.toString()
    },
    freeze: () => {
      for (const p of pairs) {
        p.frozen = true
        p.client.unpipe(p.upstream)
        p.upstream.unpipe(p.client)
        p.client.pause()
        p.upstream.pause()
      }
    },
    refuseNew: false,
    close: async () => {
      for (const p of pairs) {
        p.client.destroy()
        p.upstream.destroy()
      }
      pairs.clear()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
  const server = createServer((client) => {
    if (proxy.refuseNew) {
      client.destroy()
      return
    }
    const upstream = connect(target.port, target.host)
    const pair = { client, upstream, frozen: false }
    pairs.add(pair)
    client.pipe(upstream)
    upstream.pipe(client)
    const end = () => {
      if (pair.frozen) return
      client.destroy()
      upstream.destroy()
      pairs.delete(pair)
    }
    for (const s of [client, upstream]) {
      s.on("close", end)
      s.on("error", end)
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as { port: number }).port
  return proxy
}
