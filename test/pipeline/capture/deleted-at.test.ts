// Which gone records leave a tombstone without a view to delete (src/pipeline/capture/step/load.ts,
// deletedAt): those a batch made in an earlier transaction than the one that deleted them, since
// a follower may have read the making from a batch that was lost and written again in other cuts.
import { describe, expect, it } from "vitest"
import { deletedAt } from "../../../src/pipeline/capture/step/load.ts"

const CO = "0c000000-0000-4000-8000-000000000001"
const ID = "0a000000-0000-4000-8000-000000000001"
const made = { table: "permits", key: ID, data: { id: ID, company_id: CO, title: "Hot work" } }
const edited = { table: "permits", key: ID, data: { id: ID, company_id: CO, title: "Hot work 2" } }
const deleted = { table: "permits", key: ID, data: null }
const txn = (ms: number, ...changes: Array<typeof made | typeof deleted>) => ({ commitTime: new Date(ms), changes })

describe("the gone records of a batch", () => {
  it.each([
    ["made, then deleted by a later transaction", [txn(1, made), txn(2, deleted)], false, CO],
    ["made, edited and deleted by the later one", [txn(1, made), txn(2, edited, deleted)], false, CO],
    ["made and deleted by one transaction", [txn(1), txn(2, made, deleted)], false, undefined],
    ["there before the batch: its view is deleted, as always", [txn(1, edited), txn(2, deleted)], true, undefined],
    ["deleted, never made in the batch", [txn(2, deleted)], false, undefined]
  ] as const)("%s", (_, txns, hadRow, company) => {
    const [r] = deletedAt(txns, [{ resource: "permits", id: ID }], () => hadRow)
    expect(r).toEqual({
      resource: "permits",
      id: ID,
      at: new Date(2),
      ...(company === undefined ? {} : { company })
    })
  })

  it("a record the batch did not touch keeps no time", () => {
    expect(deletedAt([txn(1, made)], [{ resource: "permits", id: "other" }], () => false)).toEqual([
      { resource: "permits", id: "other" }
    ])
  })
})
