// A capture process for crash tests: runs the real loop against CAPTURE_URL until killed.
import { connect } from "../../src/platform/db/Database.ts"
import { CaptureStats, runCapture } from "../../src/pipeline/capture/run.ts"

const url = process.env.CAPTURE_URL!
const slot = process.env.CAPTURE_SLOT!
const sql = connect(url, 4)
const stats = new CaptureStats()
const ac = new AbortController()
process.on("SIGTERM", () => ac.abort())
for (;;) {
  try {
    await runCapture(sql, {
      url,
      slot,
      publication: "safety_records_service",
      batchChanges: Number(process.env.CAPTURE_BATCH ?? 500),
      largeTransaction: Number(process.env.CAPTURE_LARGE ?? 10_000),
      heartbeatMs: 60_000,
      log: (level, message) => process.stdout.write(JSON.stringify({ level, message }) + "\n")
    }, ac.signal, stats)
    break
  } catch (e) {
    process.stdout.write(JSON.stringify({ level: "retry", message: String(e) }) + "\n")
    await new Promise((r) => setTimeout(r, 200))
  }
}
await sql.end()
