// Capture's queue of retries (quarantine/state.ts): an operator's `retry --all` or a table's
// re-read queues the held records to shape again, taken a chunk per request by entry id; the
// queue is stored with each batch that changes it and restored by the next run.
import { randomUUID } from "node:crypto"
import { describe, expect, it } from "vitest"
import { quarantineWrites } from "../../../src/pipeline/capture/quarantine/writes.ts"
import { CaptureQuarantine, emptyDelta } from "../../../src/pipeline/capture/quarantine/state.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe("capture's retry queue", () => {
  const db = useDatabase()

  /** `n` held incidents, their entry ids starting at `first` (so they can cross a digit boundary). */
  const holdIncidents = async (n: number, first: number, blockedBy: string | null = null) => {
    await db.sql`select setval(pg_get_serial_sequence('service.capture_quarantine', 'id'), ${first - 1})`
    const keys = Array.from({ length: n }, () => randomUUID())
    await db.sql`
      insert into service.capture_quarantine (lsn, tbl, key, error, blocked_by)
      select '0/1', 'incidents', k, 'held for the test', ${blockedBy} from unnest(${keys}::text[]) with ordinality as t(k, o)
      order by o`
    return keys
  }

  it("takes every entry once, in entry order, chunk after chunk, across ids of more digits", async () => {
    await db.sql`truncate service.capture_quarantine`
    const keys = await holdIncidents(1_200, 95) // ids 95 … 1294
    const q = await CaptureQuarantine.load(db.sql)
    q.retryAll("1294")
    const taken: string[] = []
    while (q.retriesQueued) {
      const chunk = await q.takeRetries(db.sql, [])
      expect(chunk.length).toBeLessThanOrEqual(500)
      taken.push(...chunk.map((r) => r.id))
    }
    expect(taken).toEqual(keys)
  })

  it("is stored with the batch that changed it, and a new run goes on from there", async () => {
    await db.sql`truncate service.capture_quarantine, service.capture_retries`
    const keys = await holdIncidents(700, 5, "incidents")
    const first = await CaptureQuarantine.load(db.sql)
    first.retryBlocked("incidents")
    const chunk = await first.takeRetries(db.sql, [])
    expect(chunk.map((r) => r.id)).toEqual(keys.slice(0, 500))
    // The batch's delta carries the queue as it left it; its statements store it.
    const delta = { ...emptyDelta(first.nextBatch()), retries: first.queueChange() }
    expect(delta.retries).toEqual([{ kind: "blocked", table: "incidents", after: String(5 + 499) }])
    await db.sql.begin((tx) => quarantineWrites(delta)!(tx))
    // Unchanged since: nothing more to store.
    expect(first.queueChange()).toBeNull()

    const next = await CaptureQuarantine.load(db.sql)
    expect(next.retriesQueued).toBe(true)
    expect((await next.takeRetries(db.sql, [])).map((r) => r.id)).toEqual(keys.slice(500))
    expect(next.retriesQueued).toBe(false)
    // Emptied: the stored queue goes.
    await db.sql.begin((tx) => quarantineWrites({ ...emptyDelta(next.nextBatch()), retries: next.queueChange() })!(tx))
    expect(await db.sql`select 1 from service.capture_retries`).toHaveLength(0)
  })
})
