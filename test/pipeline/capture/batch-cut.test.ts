// Where a batch that may hold records is cut (src/pipeline/capture/batch.ts, cutBeforeHold): at
// the first transaction that changes an inspection's rows after one that changed equipment or a
// job site, so that a hold keeps the view those earlier transactions showed; decided before
// anything is shaped, so the quarantine is left as it was for the part written first.
import { describe, expect, it } from "vitest"
import { cutBeforeHold, prepareBatch } from "../../../src/pipeline/capture/batch.ts"
import type { QuarantineMarker } from "../../../src/pipeline/capture/quarantine/markers.ts"
import { CaptureQuarantine } from "../../../src/pipeline/capture/quarantine/state.ts"
import type { Txn } from "../../../src/pipeline/capture/txn.ts"

/** A transaction that changed one row of each table named. */
const txn = (...tables: string[]): Txn =>
  ({
    xid: 1,
    endLsn: 1n,
    commitTime: new Date(0),
    changes: tables.map((table) => ({ table, key: "k" }))
  }) as unknown as Txn

const marked = (t: Txn, ...markers: QuarantineMarker[]): Txn => ({ ...t, markers })

describe("cutting a batch that may hold records", () => {
  it.each([
    ["a move, then the inspection's edit", [txn("equipment"), txn("inspections")], 1],
    ["a site renamed, then an item of an inspection", [txn("job_sites"), txn("x"), txn("inspection_items")], 2],
    [
      "the first such transaction of several",
      [txn("equipment"), txn("inspections"), txn("equipment"), txn("inspections")],
      1
    ],
    ["the move and the edit in one transaction: nothing before to keep", [txn("equipment", "inspections")], null],
    ["the edit before the move", [txn("inspections"), txn("equipment")], null],
    ["no equipment or site change", [txn("incidents"), txn("inspections")], null],
    ["a move, then no inspection change", [txn("equipment"), txn("incidents")], null]
  ] as const)("%s", (_, txns, cut) => {
    expect(cutBeforeHold(txns)).toBe(cut)
  })

  it("the first part of a cut has no pair left to cut", () => {
    const txns = [txn("incidents"), txn("job_sites"), txn("audits"), txn("inspection_items"), txn("equipment")]
    const at = cutBeforeHold(txns)
    expect(at).toBe(3)
    expect(cutBeforeHold(txns.slice(0, at!))).toBe(null)
  })

  it("a batch that meets the quarantine is cut before it is shaped: the quarantine is as it was", async () => {
    // The contract break comes in the batch's second transaction, after the move: shaping the
    // whole batch first would mark app.inspections broken for the part written before it.
    const q = new CaptureQuarantine()
    const broken: QuarantineMarker = { kind: "contract", table: "inspections", problems: ["outcome is missing"] }
    const txns = [txn("equipment"), marked(txn("inspections"), broken), txn("inspections")]
    // Nothing is read either: the database handle is never touched.
    const prepared = await prepareBatch(undefined as never, txns, null, q)
    expect(prepared).toEqual({ cutAt: 1 })
    expect(q.broken.size).toBe(0)
    expect(q.size).toBe(0)
    expect(q.empty).toBe(true)
  })
})
