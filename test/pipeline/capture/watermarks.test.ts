// A re-read's watermarks as capture's batcher meets them (resync.ts): the high watermark
// carries the rows read, so a replay of the stream applies them whichever run wrote them; the
// keys the stream changed between the watermarks are left to the stream.
import { describe, expect, it } from "vitest"
import { Resync } from "../../../src/pipeline/capture/resync.ts"

const none = async () => [] as string[]
const lo = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id, phase: "lo", slot: "s1", table: "incidents", from: "", to: null, ...extra })
const hi = (id: string, rows: Array<{ k: string; d: Record<string, unknown> }>, slot = "s1") =>
  JSON.stringify({ id, phase: "hi", slot, rows })

/** The batcher's part for one high watermark: its message, then the chunk it applies. */
const high = async (r: Resync, content: string, mirrored = none) => {
  const w = r.message(content)
  if (w === null) return null
  return r.high(w.id, w.rows, mirrored)
}

describe("re-read watermarks", () => {
  it("a replay applies the rows an earlier run read, but for keys the stream changed between the watermarks", async () => {
    const r = new Resync("s1")
    expect(r.message(lo("earlier-run-1", { keys: ["a", "b", "c"] }))).toBeNull()
    expect(r.open).toBe(1)
    r.note("incidents", "b")
    r.note("corrective_actions", "a") // another table's key: not the chunk's
    const chunk = await high(
      r,
      hi("earlier-run-1", [
        { k: "a", d: { id: "a", title: "A" } },
        { k: "b", d: { id: "b" } }
      ])
    )
    expect(chunk).toEqual({
      // a: read; b: changed by the stream meanwhile (its change is as new); c: not in the app, so gone.
      changes: [
        { table: "incidents", key: "a", data: { id: "a", title: "A" } },
        { table: "incidents", key: "c", data: null }
      ],
      marker: { kind: "reread", table: "incidents", keys: ["a", "c"] },
      again: [["incidents", "b"]]
    })
    expect(r.open).toBe(0)
  })

  it("a table's chunk moves its re-read on, and its range's mirrored keys the app no longer has are gone", async () => {
    const r = new Resync("s1")
    r.message(lo("run-1", { from: "a", to: "m" }))
    r.note("incidents", "z") // outside the range
    const chunk = await high(r, hi("run-1", [{ k: "b", d: { id: "b" } }]), async () => ["b", "c"])
    expect(chunk).toEqual({
      changes: [
        { table: "incidents", key: "b", data: { id: "b" } },
        { table: "incidents", key: "c", data: null }
      ],
      marker: { kind: "resynced", table: "incidents", after: "m", rows: 1 },
      again: []
    })
  })

  it("ignores another service's watermarks, a high one without rows, and one met without its low one", async () => {
    const r = new Resync("s1")
    expect(r.message(JSON.stringify({ id: "x", phase: "lo", slot: "s2", table: "incidents", keys: ["a"] }))).toBeNull()
    expect(r.open).toBe(0)
    expect(await high(r, hi("x", [{ k: "a", d: { id: "a" } }], "s2"))).toBeNull()
    r.message(lo("y", { keys: ["a"] }))
    expect(await high(r, JSON.stringify({ id: "y", phase: "hi", slot: "s1" }))).toBeNull()
    // The stream taken up between the watermarks: no window, so the chunk is read again.
    expect(await high(r, hi("z", [{ k: "a", d: { id: "a" } }]))).toBeNull()
    expect(r.message("not json")).toBeNull()
    // Rows that are not rows (a message anyone who writes the app's database can write): none.
    for (const rows of [[null], [{ k: 1, d: {} }], [{ k: "a", d: null }], [{ k: "a", d: [] }], "rows", {}]) {
      r.message(lo("w", { keys: ["a"] }))
      expect(await high(r, JSON.stringify({ id: "w", phase: "hi", slot: "s1", rows }))).toBeNull()
    }
  })

  it("a TRUNCATE between the watermarks asks its keys again", async () => {
    const r = new Resync("s1")
    r.message(lo("run-1", { keys: ["a"] }))
    r.truncated("incidents")
    expect(await high(r, hi("run-1", [{ k: "a", d: { id: "a" } }]))).toEqual({
      changes: [],
      marker: null,
      again: [["incidents", "a"]]
    })
  })
})
