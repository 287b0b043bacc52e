// Where a batch is cut (src/pipeline/capture/batch.ts, cutAfterWide): after the first transaction
// that changes equipment or a job site, so that the inspections it reaches are re-shaped at that
// commit (their place in the stream, and a later hold's kept view, come from it); decided before
// anything is shaped, so the quarantine is left as it was for the part written first.
import { describe, expect, it } from "vitest"
import { cutAfterWide, prepareBatch } from "../../../src/pipeline/capture/batch.ts"
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

describe("cutting a batch after an equipment or site change", () => {
  it.each([
    ["a move, then the inspection's edit", [txn("equipment"), txn("inspections")], 1],
    ["a site renamed, then anything", [txn("incidents"), txn("job_sites"), txn("x"), txn("inspection_items")], 2],
    [
      "the first such transaction of several",
      [txn("equipment"), txn("inspections"), txn("equipment"), txn("inspections")],
      1
    ],
    ["the move and the edit in one transaction, the last", [txn("incidents"), txn("equipment", "inspections")], null],
    ["the edit before the move, the move last", [txn("inspections"), txn("equipment")], null],
    ["no equipment or site change", [txn("incidents"), txn("inspections")], null],
    ["a move, then an incident", [txn("equipment"), txn("incidents")], 1],
    ["one transaction", [txn("job_sites")], null]
  ] as const)("%s", (_, txns, cut) => {
    expect(cutAfterWide(txns)).toBe(cut)
  })

  it("the first part of a cut ends with its change: it is not cut again", () => {
    const txns = [txn("incidents"), txn("job_sites"), txn("audits"), txn("inspection_items"), txn("equipment")]
    const at = cutAfterWide(txns)
    expect(at).toBe(2)
    expect(cutAfterWide(txns.slice(0, at!))).toBe(null)
    // The rest is cut again after its own.
    expect(cutAfterWide([...txns.slice(at!), txn("incidents")])).toBe(3)
  })

  it("a batch is cut before it is shaped: the quarantine is as it was", async () => {
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
