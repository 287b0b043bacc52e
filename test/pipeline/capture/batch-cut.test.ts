// Where a batch that holds an inspection is cut (src/pipeline/capture/batch.ts, heldAfterWide):
// at the first transaction that changes an inspection's rows after one that changed equipment
// or a job site, so that a hold keeps the view those earlier transactions showed.
import { describe, expect, it } from "vitest"
import { heldAfterWide } from "../../../src/pipeline/capture/batch.ts"
import { emptyDelta, type QuarantineDelta } from "../../../src/pipeline/capture/quarantine/state.ts"
import type { Txn } from "../../../src/pipeline/capture/txn.ts"

/** A transaction that changed one row of each table named. */
const txn = (...tables: string[]): Txn =>
  ({
    xid: 1,
    endLsn: 1n,
    commitTime: new Date(0),
    changes: tables.map((table) => ({ table, key: "k" }))
  }) as unknown as Txn

const holding = (resource: string): QuarantineDelta =>
  ({ ...emptyDelta(1), held: [{ ref: { resource, id: "i" } }] }) as unknown as QuarantineDelta

describe("cutting a batch that holds an inspection", () => {
  it.each([
    ["a move, then the inspection's edit", [txn("equipment"), txn("inspections")], "inspections", 1],
    [
      "a site renamed, then an item of an inspection",
      [txn("job_sites"), txn("x"), txn("inspection_items")],
      "inspections",
      2
    ],
    [
      "the first such transaction of several",
      [txn("equipment"), txn("inspections"), txn("equipment"), txn("inspections")],
      "inspections",
      1
    ],
    [
      "the move and the edit in one transaction: nothing before to keep",
      [txn("equipment", "inspections")],
      "inspections",
      null
    ],
    ["the edit before the move", [txn("inspections"), txn("equipment")], "inspections", null],
    ["no equipment or site change", [txn("incidents"), txn("inspections")], "inspections", null],
    ["no inspection held (an incident is)", [txn("equipment"), txn("inspections")], "incidents", null]
  ] as const)("%s", (_, txns, held, cut) => {
    expect(heldAfterWide(txns, holding(held))).toBe(cut)
  })

  it("nothing held: no cut", () => {
    expect(heldAfterWide([txn("equipment"), txn("inspections")], emptyDelta(1))).toBe(null)
  })
})
