// A free TCP port on loopback, for servers the tests and benches start.
import { readFileSync } from "node:fs"
import { createServer } from "node:net"

/** Ports handed out lately by this process: the kernel may give a just-closed port again. */
const handedOut: number[] = []

const anyFreePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })

/**
 * A port nothing listens on now, and not one this process handed out lately (a service given
 * the same port for its API and its operations port failed to start once).
 */
export const freePort = async (): Promise<number> => {
  for (;;) {
    const port = await anyFreePort()
    if (handedOut.includes(port)) continue
    handedOut.push(port)
    if (handedOut.length > 256) handedOut.shift()
    return port
  }
}

/** The kernel's range for ports handed out by `listen(0)` (Linux's default when it cannot be read). */
const ephemeralRange = (): readonly [number, number] => {
  try {
    const [lo, hi] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number)
    if (Number.isInteger(lo) && Number.isInteger(hi)) return [lo!, hi!]
  } catch {}
  return [32768, 60999]
}

const canListen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer()
    s.once("error", () => resolve(false))
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)))
  })

/**
 * A free port below the kernel's ephemeral range, for a server that stops and starts again on
 * the same port (the model's PostgreSQL, crashed and restarted): while it is down, no
 * `listen(0)` of another test or run can be handed its port (one was, and the restarted server
 * could not listen: every later history failed on the connection).
 */
export const restartablePort = async (): Promise<number> => {
  const [lo] = ephemeralRange()
  const base = 20_000
  const top = Math.max(base + 1000, lo) - 1
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = base + Math.floor(Math.random() * (top - base))
    if (handedOut.includes(port)) continue
    if (!(await canListen(port))) continue
    handedOut.push(port)
    if (handedOut.length > 256) handedOut.shift()
    return port
  }
  return freePort()
}
