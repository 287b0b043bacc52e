import { afterAll, describe, expect, it } from "vitest"
import { startStandby, standbyPossible, type Standby } from "../../support/standby.ts"
import { useDatabase } from "../../support/fixtures.ts"

describe.skipIf(!standbyPossible())("a real standby", () => {
  const db = useDatabase()
  let standby: Standby | undefined
  afterAll(async () => {
    await standby?.remove()
  })
  it("replays", async () => {
    standby = await startStandby()
    const s = standby.admin()
    console.log(await s`select pg_is_in_recovery(), pg_last_wal_replay_lsn()`)
    await s.end()
    expect(db.name).toBeTruthy()
  }, 120_000)
})
