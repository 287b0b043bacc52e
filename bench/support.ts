// Shared bench plumbing: a throwaway embedded PostgreSQL and small statistics helpers.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { freePort } from "../test/support/net.ts"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { connect } from "../src/platform/db/Database.ts"
import { startEmbedded } from "../src/platform/db/embedded.ts"
import { prepareDemoDatabase } from "../src/platform/db/demo-schema.ts"

/** A fresh embedded server (or BENCH_DATABASE_URL), migrated; `settings`: extra server settings (embedded only). */
export const benchDatabase = async (settings: Record<string, string> = {}) => {
  if (process.env.BENCH_DATABASE_URL) {
    const sql = connect(process.env.BENCH_DATABASE_URL, 10)
    await prepareDemoDatabase(sql)
    return { url: process.env.BENCH_DATABASE_URL, sql, close: async () => void (await sql.end({ timeout: 2 })) }
  }
  const dir = mkdtempSync(join(tmpdir(), "srs-bench-"))
  chmodSync(dir, 0o755)
  const server = await startEmbedded({
    dataDir: dir,
    port: await freePort(),
    settings: { max_wal_size: "4GB", shared_buffers: "512MB", ...settings }
  })
  const sql = connect(server.url, 10)
  await prepareDemoDatabase(sql)
  return {
    url: server.url,
    sql,
    close: async () => {
      await sql.end({ timeout: 2 })
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

export const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

export const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

export const table = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  for (const r of rows)
    console.log(r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  "))
}

const ROOT = fileURLToPath(new URL("..", import.meta.url))

/**
 * The service's command as `npm start` runs it: package.json's start script (steps before it
 * joined by "&&", such as the build of dist/service.mjs; then environment assignments such as
 * GLIBC_TUNABLES, node, its options and the file), run with this node; SOAK_START replaces it,
 * e.g. to compare settings.
 */
export const startCommand = (): { env: Record<string, string>; args: Array<string>; before: Array<Array<string>> } => {
  const script =
    process.env.SOAK_START ??
    (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start
  const steps = script.split("&&").map((step) => step.trim().split(/\s+/))
  const before = steps.slice(0, -1).map(([node, ...rest]) => {
    if (node !== "node" || rest.length === 0)
      throw new Error(`a step before the service must be "node <file> [args]", not "${script}"`)
    return rest
  })
  const words = steps.at(-1)!
  const env: Record<string, string> = {}
  while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) {
    const [name, ...value] = words.shift()!.split("=")
    env[name!] = value.join("=")
  }
  // `exec` hands the shell's process (and the signals npm forwards to it) to node.
  if (words[0] === "exec") words.shift()
  const [node, ...rest] = words
  if (node !== "node" || rest.length === 0)
    throw new Error(`the start script must be "[NAME=value ...] [exec] node [options] <file>", not "${script}"`)
  return { env, args: rest, before }
}

const TICK_MS = 10 // USER_HZ 100

/** The postmaster's children (Linux: /proc): each one's pid, command line and CPU so far in ms. */
export const postmasterChildren = (postmaster: string): Array<{ pid: string; cmd: string; cpuMs: number }> => {
  const out: Array<{ pid: string; cmd: string; cpuMs: number }> = []
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      if (f[1] !== postmaster) continue
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8")
      out.push({ pid, cmd, cpuMs: (Number(f[11]) + Number(f[12])) * TICK_MS })
    } catch {
      // gone meanwhile
    }
  }
  return out
}
