// FlushedAcks (src/pipeline/capture/flushed.ts): the slot is told a batch's end only once the
// service's database has flushed it, on the server that wrote it. A server that restarted
// writes new WAL over the positions its lost batches had, so a position read after a restart
// proves nothing about a batch committed before it: nothing is confirmed, and the run is told
// to end (it starts again from the checkpoint the database kept).
import { describe, expect, it } from "vitest"
import { FlushedAcks } from "../../../src/pipeline/capture/flushed.ts"
import { connect } from "../../../src/platform/db/Database.ts"
import type { Lsn } from "../../../src/platform/db/lsn.ts"
import { useRestartableServer } from "../../support/fixtures.ts"
import { sleep, waitFor } from "../../support/wait.ts"

describe("capture's confirmations across a restart of the service's database", () => {
  const server = useRestartableServer("srs-flushed-")

  it("confirms what the server it started on flushed, and nothing once that server has restarted", {
    timeout: 120_000
  }, async () => {
    const sql = connect(server.url, 2)
    const sent: Lsn[] = []
    const lost: Error[] = []
    try {
      const acks = new FlushedAcks(
        sql,
        async (lsn) => void sent.push(lsn),
        100n,
        (e) => void lost.push(e)
      )
      await acks.ready
      // On the same server: confirmed once flushed (an idle server has flushed everything).
      await waitFor(() => sent.includes(100n), "the first checkpoint confirmed")
      await server.stop()
      await server.start()
      // A checkpoint "committed" before the restart, seen only after it (the run's pool reconnects).
      acks.stored(200n)
      await waitFor(() => lost.length > 0, "the run told to end")
      await sleep(300)
      expect(sent).toEqual([100n])
      expect(lost[0]!.message).toMatch(/^the service's database restarted/)
    } finally {
      await sql.end({ timeout: 2 })
    }
  })
})
