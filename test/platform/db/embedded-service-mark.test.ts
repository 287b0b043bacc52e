// A tool (admin CLI, seeder) on the embedded default does not start PostgreSQL under a running
// service whose database went down: it would stop it again on exit, under the service.
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { liveServicePid, markService, startEmbedded } from "../../../src/platform/db/embedded.ts"

const dirs: Array<string> = []
const children: Array<ChildProcess> = []
afterEach(() => {
  for (const c of children.splice(0)) c.kill()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
const dataDir = () => {
  const d = mkdtempSync(join(tmpdir(), "srs-mark-"))
  dirs.push(d)
  return d
}

describe("the service's mark on its data directory", () => {
  it("is written by the service and taken away by it, and names only a live process", () => {
    const dir = dataDir()
    expect(liveServicePid(dir)).toBeUndefined()
    const unmark = markService(dir)
    expect(readFileSync(join(dir, "service.pid"), "utf8").trim()).toBe(String(process.pid))
    // This process's own mark is not "another service".
    expect(liveServicePid(dir)).toBeUndefined()
    unmark()
    expect(existsSync(join(dir, "service.pid"))).toBe(false)
    // A stale mark (no such process) counts for nothing.
    writeFileSync(join(dir, "service.pid"), "2147483646\n")
    expect(liveServicePid(dir)).toBeUndefined()
  })

  it("stops a tool from starting the database under a running service, with what to do", async () => {
    const dir = dataDir()
    const service = spawn("sleep", ["30"])
    children.push(service)
    writeFileSync(join(dir, "service.pid"), `${service.pid}\n`)
    expect(liveServicePid(dir)).toBe(service.pid)
    await expect(startEmbedded({ dataDir: dir, port: 1, notUnderService: true })).rejects.toThrow(
      new RegExp(
        `^The service \\(pid ${service.pid}\\) runs on .*, but its embedded PostgreSQL is not running: .*Restart the service`
      )
    )
    expect(existsSync(join(dir, "pg"))).toBe(false)
  })
})
