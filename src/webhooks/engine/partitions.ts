// Fan-out's partitions: which of the outbox's PARTS partitions this process owns, and where
// each stands (read up to, written up to, the stored cursor). The heartbeat takes this
// process's share under a lease, gives up its extras (drained: freed once everything read
// from them is written) and learns of those another process took. Only this file changes a
// partition: fan-out tells it what it read (`took`, `passed`), record asks it where the
// cursors go (`plan`) and tells it what was stored (`settle`, or `undo` when the write failed).
import { Effect } from "effect"
import type { Item } from "./item.ts"
import { heartbeat, type OwnedPart } from "./partitions-queries.ts"
import { comparePos, maxPos, type Pos } from "./positions.ts"
import type { CursorMove } from "./record-queries.ts"
import { db, realWaitFor, survive, type EngineEnv, type Wake } from "./runtime.ts"

/** A fan-out partition this process owns. */
export type Part = {
  readonly part: number
  /** Its events are read up to here. */
  read: Pos
  /** The stored cursor: every delivery of its events up to here is written. */
  durable: Pos
  /** Rows may exist for its events up to here (written before a crash): fan-out checks for them. */
  recheck: Pos | null
  /** Rows of its events are written up to here. */
  recorded: Pos
  /** Events read whose deliveries are not all written yet, in outbox order. */
  readonly outstanding: Array<Entry>
  /** Being given up: no more reading; freed once everything read is written. */
  draining: boolean
  /** Its release is being written: it stays given up, whatever the heartbeat's share says meanwhile. */
  releasing: boolean
}

/** An event read by fan-out, until every one of its deliveries is written (record counts them down). */
export type Entry = { readonly part: Part; readonly pos: Pos; readonly before: Pos; remaining: number }

/** The cursor moves of one write, and the deliveries it counts as written (undone if it fails). */
export type CursorPlan = {
  readonly moves: ReadonlyArray<CursorMove & { readonly p: Part }>
  readonly written: ReadonlyArray<Item>
}

/** What a lost partition's deliveries still waiting for a send slot are given to: they are dropped. */
export type Dropper = (isLost: (it: Item) => boolean) => void

export type Partitions = ReturnType<typeof makePartitions>

const newPart = (p: OwnedPart): Part => ({
  part: p.part,
  read: p.cursor,
  durable: p.cursor,
  recheck: comparePos(p.recorded, p.cursor) > 0 ? p.recorded : null,
  recorded: p.recorded,
  outstanding: [],
  draining: false,
  releasing: false
})

/** Where the partition's cursor can be: before its first event with unwritten deliveries (null: none). */
const firstUnwritten = (p: Part): Entry | null => p.outstanding.find((e) => e.remaining > 0) ?? null
/** Drops the events whose deliveries are all written, once that is stored. */
const prune = (p: Part) => {
  while (p.outstanding.length > 0 && p.outstanding[0]!.remaining <= 0) p.outstanding.shift()
}

export const makePartitions = (
  env: EngineEnv,
  wakes: { readonly fanout: Wake; readonly record: Wake; readonly heartbeat: Wake },
  dropQueued: Dropper
) => {
  const owned = new Map<number, Part>()
  /** Live engine processes at the last heartbeat, this one included. */
  let live = 1
  /** Bumped when partitions are freed: a heartbeat begun before does not take them back. */
  let epoch = 0

  /** Another process owns the partition now: it reads its unwritten events again. */
  const lose = (p: Part) => {
    if (owned.get(p.part) !== p) return
    owned.delete(p.part)
    dropQueued((it) => it.src?.entry.part === p && !it.persisted)
  }

  /** Renews this process's partitions, takes its share, gives up its extras (drained by record). */
  const heartbeatOnce = Effect.gen(function* () {
    // Fenced: the leases lapse, and a process of a newer release takes the partitions.
    if (env.signals.stopping || env.signals.fenced) return
    const before = epoch
    const r = yield* db("heartbeat", () => heartbeat(env.sql, env.owner, env.o.partitionLeaseMs))
    live = r.live
    const mine = new Set(r.owned.map((p) => p.part))
    for (const p of [...owned.values()]) if (!mine.has(p.part)) lose(p)
    let taken = false
    for (const p of r.owned) {
      // Freed by a write meanwhile: the database no longer says so.
      if (!owned.has(p.part) && before === epoch) {
        owned.set(p.part, newPart(p))
        taken = true
      }
    }
    // Keep `share` partitions: give up the highest-numbered extras, or keep ones being given up.
    const parts = [...owned.values()].sort((a, b) => a.part - b.part)
    parts.forEach((p, i) => {
      const extra = i >= r.share
      if (extra && !p.draining) wakes.record.poke()
      p.draining = extra || p.releasing
    })
    if (taken) wakes.fanout.poke()
  })

  const heartbeatLoop = Effect.forever(
    Effect.gen(function* () {
      yield* survive("heartbeat")(heartbeatOnce)
      // A cursor read past events that were all another process's: written with the next write,
      // or here at the latest, so the slowest cursor follows the outbox.
      for (const p of owned.values()) {
        if (comparePos(p.read, p.durable) > 0 && firstUnwritten(p) === null) {
          wakes.record.poke()
          break
        }
      }
      yield* realWaitFor(wakes.heartbeat.queue, env.o.heartbeatMs)
    })
  )

  return {
    heartbeatLoop,
    size: () => owned.size,
    /** Live engine processes (a destination's rate is shared among them). */
    live: () => live,

    // Fan-out's side.
    /** The partitions to read from: owned and not being given up. */
    readable: (): Array<Part> => [...owned.values()].filter((p) => !p.draining),
    /** Still owned and not being given up: a read in flight takes events only from these. */
    current: (p: Part): boolean => owned.get(p.part) === p && !p.draining,
    /** An event read: its deliveries are written before the cursor passes it. */
    took: (p: Part, pos: Pos): Entry => {
      const entry: Entry = { part: p, pos, before: p.read, remaining: 0 }
      p.read = pos
      return entry
    },
    /** Waits for the entry's deliveries (it has some) before the cursor passes it. */
    track: (entry: Entry) => void entry.part.outstanding.push(entry),
    /** The read covered every event of the partition up to `pos`. */
    passed: (p: Part, pos: Pos) => {
      p.read = maxPos(p.read, pos)
    },

    // Record's side.
    /**
     * Where the cursors go if `rows` are written now: each owned partition's, up to its first
     * event with unwritten deliveries. `final` (shutdown) frees every partition with its cursor
     * where everything is written; a drained one being given up is freed too.
     */
    plan: (rows: ReadonlyArray<Item>, final: boolean): CursorPlan => {
      for (const p of owned.values()) prune(p)
      const written = rows.filter((it) => owned.get(it.src!.entry.part.part) === it.src!.entry.part)
      for (const it of written) it.src!.entry.remaining--
      const recorded = new Map<Part, Pos>()
      for (const it of written) {
        const e = it.src!.entry
        recorded.set(e.part, maxPos(recorded.get(e.part) ?? e.part.recorded, e.pos))
      }
      const moves: Array<CursorMove & { readonly p: Part }> = []
      for (const p of owned.values()) {
        const first = firstUnwritten(p)
        const cursor = first?.before ?? p.read
        const release = final || (p.draining && first === null)
        const rec = recorded.get(p) ?? p.recorded
        if (comparePos(cursor, p.durable) > 0 || release || comparePos(rec, p.recorded) > 0) {
          moves.push({ p, part: p.part, cursor, recorded: rec, release })
          // From here the cursor written is where the next owner resumes: nothing more is read.
          if (release) p.releasing = p.draining = true
        }
      }
      return { moves, written }
    },
    /** The write failed: everything it covered is still to be written. */
    undo: (plan: CursorPlan) => {
      for (const m of plan.moves) if (m.release) m.p.releasing = false
      for (const it of plan.written) it.src!.entry.remaining++
    },
    /** The write stored the cursors of `moved` (those this process still owned); the others are lost. */
    settle: (plan: CursorPlan, moved: ReadonlySet<number>) => {
      for (const m of plan.moves) {
        if (owned.get(m.part) !== m.p) continue
        if (!moved.has(m.part)) {
          lose(m.p) // another process took it meanwhile
          continue
        }
        m.p.durable = m.cursor
        m.p.recorded = m.recorded
        if (m.release) {
          owned.delete(m.part)
          epoch++
        }
      }
    }
  }
}
