// One PostgreSQL for the whole run: embedded in a temporary directory on a free port, or the
// server named by TEST_DATABASE_URL. Each test file then makes its own database on it.
import { mkdtempSync, rmSync, chmodSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestProject } from "vitest/node"
import { startEmbedded, type EmbeddedServer } from "../../src/platform/db/embedded.ts"
import { freePort } from "./net.ts"

export { freePort }

declare module "vitest" {
  export interface ProvidedContext {
    pgAdminUrl: string
  }
}

let server: EmbeddedServer | undefined
let dir: string | undefined

export async function setup(project: TestProject) {
  const external = process.env.TEST_DATABASE_URL
  if (external) {
    project.provide("pgAdminUrl", external)
    return
  }
  dir = mkdtempSync(join(tmpdir(), "srs-test-"))
  chmodSync(dir, 0o755)
  server = await startEmbedded({
    dataDir: dir,
    port: await freePort(),
    settings: {
      max_replication_slots: "64",
      max_wal_senders: "64",
      max_connections: "300",
      fsync: "off",
      full_page_writes: "off"
    }
  })
  project.provide("pgAdminUrl", server.url)
}

export async function teardown() {
  await server?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
}
