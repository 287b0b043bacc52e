// A free TCP port on loopback, for servers the tests and benches start.
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
