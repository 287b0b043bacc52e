// A tool (admin CLI, seeder) on the embedded default does not start PostgreSQL under a running
// service whose database went down: it would stop it again on exit, under the service.
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { connect } from "../../../src/platform/db/Database.ts"
import { liveServicePid, markService, startEmbedded } from "../../../src/platform/db/embedded.ts"
import { freePort } from "../../support/net.ts"

const dirs: Array<string> = []
const children: Array<ChildProcess> = []
afterEach(() => {
  for (const c of children.splice(0)) c.kill()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})
/** A process that runs (its parent killed, a stopped one may stay a zombie until reaped: not running). */
const running = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z"
  } catch {
    return false
  }
}
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

  it("a service killed leaves its server running: the next service stops it and starts its own, which it stops on exit", {
    timeout: 90_000
  }, async () => {
    const dir = dataDir()
    const port = await freePort()
    // A service: the server started, the directory marked; then killed, no chance to stop it.
    const script = join(dir, "service.mjs")
    const embedded = new URL("../../../src/platform/db/embedded.ts", import.meta.url).href
    writeFileSync(
      script,
      `import { markService, startEmbedded } from ${JSON.stringify(embedded)}
       await startEmbedded({ dataDir: ${JSON.stringify(dir)}, port: ${port} })
       markService(${JSON.stringify(dir)})
       console.log("ready")
       setInterval(() => {}, 1000)`
    )
    const service = spawn(process.execPath, [script], { stdio: ["ignore", "pipe", "inherit"] })
    children.push(service)
    await new Promise<void>((ok, fail) => {
      service.stdout!.on("data", (b: Buffer) => b.toString().includes("ready") && ok())
      service.once("exit", (code) => fail(new Error(`the service exited (${code}) before it was ready`)))
    })
    service.kill("SIGKILL")
    await new Promise((r) => service.once("exit", r))
    const postmaster = Number(readFileSync(join(dir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
    expect(running(postmaster)).toBe(true) // left running

    const server = await startEmbedded({ dataDir: dir, port, adoptOrphan: true })
    try {
      expect(server.owned).toBe(true)
      expect(running(postmaster)).toBe(false) // the orphan stopped
      expect(Number(readFileSync(join(dir, "pg", "postmaster.pid"), "utf8").split("\n")[0])).not.toBe(postmaster)
      const sql = connect(server.url, 1)
      expect((await sql`select 1 as one`)[0]!.one).toBe(1)
      await sql.end()
    } finally {
      await server.stop()
    }
    expect(existsSync(join(dir, "pg", "postmaster.pid"))).toBe(false)
  })
})
