// A safety net for the tests that send: while the file runs, a TLS connection anywhere but
// loopback is refused (and noted), and every connection made is noted, so a test can tell
// that a refused address was never connected to.
import { createRequire } from "node:module"
import { afterAll, beforeAll, beforeEach } from "vitest"
import { closeSenderConnections } from "../../src/webhooks/net/sender.ts"

export type Connect = { host: string; port: number; servername: string | undefined }

const tls = createRequire(import.meta.url)("node:tls") as typeof import("node:tls")

/** Patches tls.connect for the file (restored after it); the lists are emptied before each test. */
export const useLoopbackOnlyTls = (): { readonly connects: Array<Connect>; readonly blocked: Array<Connect> } => {
  const realConnect = tls.connect
  const connects: Array<Connect> = []
  const blocked: Array<Connect> = []
  beforeAll(() => {
    tls.connect = ((options: { host?: string; port?: number; servername?: string }, ...rest: Array<unknown>) => {
      const c = { host: String(options.host), port: Number(options.port), servername: options.servername }
      if (!/^127\.\d+\.\d+\.\d+$/.test(c.host)) {
        blocked.push(c)
        throw new Error(`test safety net: refused to connect to ${c.host}`)
      }
      connects.push(c)
      return (realConnect as (...a: Array<unknown>) => unknown)(options, ...rest)
    }) as typeof tls.connect
  })
  afterAll(async () => {
    tls.connect = realConnect
    await closeSenderConnections()
  })
  beforeEach(() => {
    connects.length = 0
    blocked.length = 0
  })
  return { connects, blocked }
}
