// The service's own malloc settings (npm start's GLIBC_TUNABLES) stay its own: the embedded
// PostgreSQL's processes start without them (src/platform/db/embedded.ts).
import { existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { connect } from "../../../src/platform/db/Database.ts"
import { startEmbedded } from "../../../src/platform/db/embedded.ts"
import { freePort } from "../../support/net.ts"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c()
})

describe.skipIf(!existsSync("/usr/bin/env"))("the embedded PostgreSQL's environment", () => {
  it("has no GLIBC_TUNABLES, though the service's has; the service's is left as it was", async () => {
    const dir = mkdtempSync(join(tmpdir(), "srs-env-"))
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }))
    const tunables = "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=131072"
    const saved = process.env.GLIBC_TUNABLES
    process.env.GLIBC_TUNABLES = tunables
    cleanups.push(async () => {
      if (saved === undefined) delete process.env.GLIBC_TUNABLES
      else process.env.GLIBC_TUNABLES = saved
    })
    const server = await startEmbedded({ dataDir: dir, port: await freePort() })
    cleanups.push(() => server.stop())
    expect(process.env.GLIBC_TUNABLES).toBe(tunables)
    const sql = connect(server.url, 1)
    cleanups.push(() => sql.end({ timeout: 2 }))
    // What a backend's own children get: the environment the server started with (a backend
    // writes its title over /proc's copy, so it is asked rather than read there).
    const lines = await sql.begin(async (tx) => {
      await tx`create temporary table environment (line text)`
      await tx.unsafe("copy environment from program 'env'")
      return (await tx<{ line: string }[]>`select line from environment`).map((r) => r.line)
    })
    expect(lines.some((v) => v.startsWith("PATH="))).toBe(true)
    expect(lines.filter((v) => v.startsWith("GLIBC_TUNABLES="))).toEqual([])
  }, 60_000)
})
