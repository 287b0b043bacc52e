// A re-read's watermarks as capture's batcher meets them (resync.ts): the high watermark
// carries the rows read, so a replay of the stream applies them whichever run wrote them; the
// keys the stream changed between the watermarks are left to the stream.
import { describe, expect, it } from "vitest"
import { Resync } from "../../../src/pipeline/capture/resync.ts"
import { parseLsn } from "../../../src/platform/db/lsn.ts"

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

  it("a replay that starts between the watermarks takes up the windows stored with its checkpoint", async () => {
    const rows = [
      { k: "a", d: { id: "a", title: "A" } },
      { k: "b", d: { id: "b" } },
      { k: "c", d: { id: "c" } }
    ]
    // The run that stored the batch holding the low watermark and b's change, then was lost
    // with the batch holding the high one.
    const before = new Resync("s1")
    expect(before.snapshot(parseLsn("0/100"))).toBeNull() // none open: nothing stored
    before.message(lo("earlier-run-1", { keys: ["a", "b", "c"] }))
    before.note("incidents", "b")
    const stored = JSON.parse(before.snapshot(parseLsn("0/200"))!)
    // The next run streams from that checkpoint: c's change (after it) and the high watermark.
    const after = new Resync("s1")
    after.restore(stored, parseLsn("0/200"), parseLsn("0/900"))
    expect(after.open).toBe(1)
    after.note("incidents", "c")
    expect(await high(after, hi("earlier-run-1", rows))).toEqual({
      changes: [{ table: "incidents", key: "a", data: { id: "a", title: "A" } }],
      marker: { kind: "reread", table: "incidents", keys: ["a"] },
      again: [
        ["incidents", "b"],
        ["incidents", "c"]
      ]
    })
    // Without them (as before they were stored) the chunk would be read again, later.
    expect(await high(new Resync("s1"), hi("earlier-run-1", rows))).toBeNull()
  })

  it("an earlier run's window still open once the stream is past the WAL's end at this run's start is dropped", async () => {
    const before = new Resync("s1")
    before.message(lo("earlier-run-1", { keys: ["a"] }))
    const stored = JSON.parse(before.snapshot(parseLsn("0/200"))!)
    const after = new Resync("s1")
    after.restore(stored, parseLsn("0/200"), parseLsn("0/900"))
    after.passed(parseLsn("0/900")) // its high watermark may still come: at most here
    expect(after.open).toBe(1)
    after.passed(parseLsn("0/901")) // past it: that run ended before writing one
    expect(after.open).toBe(0)
    expect(after.snapshot(parseLsn("0/901"))).toBeNull()
    expect(await high(after, hi("earlier-run-1", [{ k: "a", d: { id: "a" } }]))).toBeNull()
  })

  it("windows stored with another checkpoint, or not as they are written, are not taken up", async () => {
    const before = new Resync("s1")
    before.message(lo("earlier-run-1", { keys: ["a"] }))
    const stored = JSON.parse(before.snapshot(parseLsn("0/200"))!)
    const window = stored.windows[0]
    for (const [value, at] of [
      [stored, "0/300"], // a keepalive or an older release moved the checkpoint without them
      [null, "0/200"],
      ["windows", "0/200"],
      [{ at: "0/200" }, "0/200"],
      [{ ...stored, windows: [{ ...window, table: "nope" }] }, "0/200"],
      [{ ...stored, windows: [{ ...window, changed: [1] }] }, "0/200"],
      [{ ...stored, windows: [{ ...window, keys: "a" }] }, "0/200"],
      [{ ...stored, windows: [null] }, "0/200"]
    ] as const) {
      const r = new Resync("s1")
      r.restore(value, parseLsn(at), parseLsn("0/900"))
      expect(r.open).toBe(0)
    }
  })

  it("a batch written while a high watermark reads the mirror stores its window open", async () => {
    const r = new Resync("s1")
    r.message(lo("run-1", { from: "a", to: "m" }))
    r.note("incidents", "b")
    let meanwhile: string | null = null
    await high(r, hi("run-1", [{ k: "c", d: { id: "c" } }]), async () => {
      meanwhile = r.snapshot(parseLsn("0/300"))
      return []
    })
    // That batch holds transactions before the high watermark: a replay from it meets the high one.
    expect(JSON.parse(meanwhile!).windows).toEqual([
      { id: "run-1", table: "incidents", from: "a", to: "m", keys: null, changed: ["b"], void: false }
    ])
    expect(r.snapshot(parseLsn("0/400"))).toBeNull()
  })
})
