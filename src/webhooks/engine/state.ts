// What one engine holds in memory, in one object, and the few moves on it that several steps
// make. The steps are plain functions over this state, not Refs: every field is read and
// written on the send path (one touch per attempt), and all of it runs on the one JS thread,
// so a step never sees another halfway through a change.
import { Queue, type Tracer } from "effect"
import type { Claimed, Outcome } from "./item.ts"
import type { Destination } from "./fanout-queries.ts"
import type { Pos } from "./positions.ts"

export type EngineStats = {
  events: number
  created: number
  attempts: number
  succeeded: number
  failed: number
  retried: number
  inFlight: number
  /** Waiting in memory for a send slot. */
  queued: number
  handedBack: number
  /** Written as leased rows while their first attempt was on the wire (slow receivers). */
  written: number
  switchedOff: number
  subscriptionsGone: number
  purged: number
  /** Fan-out partitions this process owns. */
  partitions: number
}

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

/** An event read by fan-out, until every one of its deliveries is written. */
export type Entry = { readonly part: Part; readonly pos: Pos; readonly before: Pos; remaining: number }

/** A delivery in memory. From fan-out it has no row until its outcome (or a hand-back) is written. */
export type Item = {
  readonly c: Claimed
  /** Fan-out's: the event, for the row and the cursor. Null for a claimed row. */
  readonly src: { readonly eventId: string; readonly companyId: string; readonly entry: Entry } | null
  /** A row exists, leased to this process until leaseUntil (the engine's clock). */
  persisted: boolean
  leaseUntil: number
  /** Real time (Date.now) it came into memory. */
  readonly fannedAt: number
  state: "queued" | "sending" | "done"
  outcome: Outcome | null
  /** Give it back unattempted: a row due at once, for whoever claims it. */
  handBack: boolean
  /** Write it as a leased row now (it waited too long). */
  persist: boolean
  /** Gone from this process (its partition was lost): nothing more is written for it. */
  dropped: boolean
  /** The fan-out round's span (tracing on): the first attempt's span goes under it. */
  readonly span: Tracer.AnySpan | null
}

/** Wake-ups, one per loop: a poke makes the loop look now instead of at its next poll. */
export type Wakes = {
  readonly fanout: Queue.Queue<void>
  readonly claim: Queue.Queue<void>
  readonly release: Queue.Queue<void>
  readonly record: Queue.Queue<void>
  readonly heartbeat: Queue.Queue<void>
}

/**
 * Everything the engine holds. Who writes what (everyone may read):
 * - heartbeat (housekeeping.ts): takes and loses `owned` partitions, marks them draining;
 * - fan-out: moves each owned partition's `read` and `outstanding`, fills `destinations`,
 *   `targetsPerEvent` and `unwritten`; adds to `held` and the send queues;
 * - claim: adds to `held` and the send queues; sets `claimWaiting`;
 * - send: moves items from `queues` to `sending`/`inFlight` (`sendingTotal`), pushes outcomes
 *   to `completed`;
 * - record: takes `completed` and `requests`, moves the cursors, frees partitions (bumps
 *   `partEpoch`) and written items (`held`);
 * - the overdue sweep (record.ts): advances `unwrittenHead`, adds to `requests`;
 * - a destination change: bumps `generation`, clears `destinations`, hands the queues back;
 * - shutdown: sets `stopping`.
 * `stats` is counted by the step that does the thing counted.
 */
export type EngineState = {
  readonly owned: Map<number, Part>
  /** Per origin: queued + sending. */
  readonly open: Map<string, number>
  /** Per origin: items waiting for a send slot, in order. */
  readonly queues: Map<string, Array<Item>>
  /** Per origin: attempts on the wire. */
  readonly sending: Map<string, number>
  /** Queued + sending + waiting to be written. */
  held: number
  sendingTotal: number
  readonly inFlight: Map<Promise<void>, AbortController>
  /** Fan-out's items in fan-out order, from unwrittenHead on: the overdue sweep's to-do list. */
  unwritten: Array<Item>
  unwrittenHead: number
  /** Outcomes to write, in completion order. */
  readonly completed: Array<Item>
  /** Hand-backs and persists to write. */
  readonly requests: Set<Item>
  stopping: boolean
  /** Bumped when a destination changes: what was read before goes back. */
  generation: number
  /** Bumped when partitions are freed: a heartbeat begun before does not take them back. */
  partEpoch: number
  /** The last claim may have left due rows for lack of room. */
  claimWaiting: boolean
  /** Deliveries per event in the last read, to size the next one. */
  targetsPerEvent: number
  /**
   * Destinations fan-out sends to, by id: dropped whenever a destination changes (the
   * DESTINATIONS_CHANNEL), like everything read before the change.
   */
  readonly destinations: Map<string, Destination & { readonly origin: string }>
  readonly stats: EngineStats
  readonly wake: Wakes
}

export const makeState = (wake: Wakes): EngineState => ({
  owned: new Map(),
  open: new Map(),
  queues: new Map(),
  sending: new Map(),
  held: 0,
  sendingTotal: 0,
  inFlight: new Map(),
  unwritten: [],
  unwrittenHead: 0,
  completed: [],
  requests: new Set(),
  stopping: false,
  generation: 0,
  partEpoch: 0,
  claimWaiting: false,
  // A first read assumes many, so that it does not queue more than can be sent before writeAfterMs.
  targetsPerEvent: 8,
  destinations: new Map(),
  stats: {
    events: 0,
    created: 0,
    attempts: 0,
    succeeded: 0,
    failed: 0,
    retried: 0,
    inFlight: 0,
    queued: 0,
    handedBack: 0,
    written: 0,
    switchedOff: 0,
    subscriptionsGone: 0,
    purged: 0,
    partitions: 0
  },
  wake
})

export const poke = (q: Queue.Queue<void>) => void Queue.offerUnsafe(q, undefined)

/** Adds d to a per-origin count, dropping it at zero. */
export const add = (m: Map<string, number>, k: string, d: number) => {
  const n = (m.get(k) ?? 0) + d
  if (n <= 0) m.delete(k)
  else m.set(k, n)
}

/** Asks record to write an item's hand-back or lease. */
export const toWrite = (s: EngineState, it: Item) => {
  if (it.dropped) return
  s.requests.add(it)
  poke(s.wake.record)
}

/** Queues an item for a send slot of its origin. */
export const enqueue = (s: EngineState, it: Item) => {
  add(s.open, it.c.origin, 1)
  const q = s.queues.get(it.c.origin)
  if (q) q.push(it)
  else s.queues.set(it.c.origin, [it])
}

/** Takes an item out of its origin's queue (not started). */
export const dequeue = (s: EngineState, it: Item) => {
  const q = s.queues.get(it.c.origin)
  const i = q?.indexOf(it) ?? -1
  if (i < 0) return
  q!.splice(i, 1)
  if (q!.length === 0) s.queues.delete(it.c.origin)
  add(s.open, it.c.origin, -1)
}

/** Marks an item done and to be given back unattempted, and asks for the write. */
export const handBack = (s: EngineState, it: Item) => {
  it.state = "done"
  it.handBack = true
  toWrite(s, it)
}

/** Gives back everything waiting for a send slot (a destination changed, or shutdown). */
export const handBackQueued = (s: EngineState) => {
  for (const queue of s.queues.values()) {
    for (const it of queue) {
      add(s.open, it.c.origin, -1)
      handBack(s, it)
    }
  }
  s.queues.clear()
}
