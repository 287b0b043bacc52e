// Shared bench plumbing: a throwaway embedded PostgreSQL and small statistics helpers.
import { chmodSync, mkdtempSync, rmSync } from "node:fs"
import { freePort } from "../test/support/net.ts"
import { tmpdir } from "node:os"
import { join } from "node:path"
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
