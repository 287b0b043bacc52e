// Record: writes what this process holds once it is settled: outcomes in completion order,
// hand-backs, leased rows for slow receivers, and the partitions' cursors, in one statement
// (queries.ts `writeBatch`) when nothing failed. Nobody waits for a write: the receiver has
// the delivery already.
import { Cause, Effect, Exit, Queue } from "effect"
import { comparePos, maxPos, type Pos } from "./positions.ts"
import { writeBatch, type CursorMove, type NewRow } from "./record-queries.ts"
import type { Outcome } from "./item.ts"
import { lose } from "./housekeeping.ts"
import { db, realSleep, type EngineEnv } from "./runtime.ts"
import { dequeue, poke, type EngineState, type Entry, type Item, type Part } from "./state.ts"

/** Writes gather answers for up to GATHER_MS while attempts are in flight, until WRITE_BATCH are in. */
const GATHER_MS = 100
const WRITE_BATCH = 128

/** Where the partition's cursor can be: before its first event with unwritten deliveries (null: none). */
const firstUnwritten = (p: Part): Entry | null => p.outstanding.find((e) => e.remaining > 0) ?? null
/** Drops the events whose deliveries are all written, once that is stored. */
const prune = (p: Part) => {
  while (p.outstanding.length > 0 && p.outstanding[0]!.remaining <= 0) p.outstanding.shift()
}

/**
 * One write of everything settled. `final` (shutdown) frees every partition with its cursor
 * where everything is written. False when the write failed: everything stays to be written.
 */
export const recordOnce = (env: EngineEnv, s: EngineState, final: boolean) =>
  Effect.gen(function* () {
    const { sql, o, owner } = env
    const done = s.completed.splice(0)
    const asked = [...s.requests]
    s.requests.clear()
    const at = env.nowMs()
    const rows: Array<NewRow> = []
    const rowItems: Array<Item> = []
    const leased: Array<Outcome> = []
    const handBackIds: Array<string> = []
    const handBackItems: Array<Item> = []
    const row = (it: Item, outcome: Outcome | null, leaseUntil: number | null): NewRow => ({
      id: it.c.id,
      eventId: it.src!.eventId,
      companyId: it.src!.companyId,
      event: it.c.event,
      endpointId: it.c.endpointId,
      subscriptionId: it.c.subscriptionId,
      origin: it.c.origin,
      state: outcome?.state ?? "pending",
      attempts: outcome ? 1 : 0,
      nextAt: outcome ? outcome.nextAt : new Date(at),
      leaseUntil: leaseUntil === null ? null : new Date(leaseUntil),
      outcome
    })
    for (const it of done) {
      if (it.persisted) leased.push(it.outcome!)
      else {
        rows.push(row(it, it.outcome, null))
        rowItems.push(it)
      }
    }
    for (const it of asked) {
      if (it.dropped || it.outcome !== null) continue
      if (it.handBack) {
        handBackItems.push(it)
        if (it.persisted) handBackIds.push(it.c.id)
        else {
          rows.push(row(it, null, null))
          rowItems.push(it)
        }
      } else if (it.persist && !it.persisted) {
        rows.push(row(it, null, at + o.leaseMs))
        rowItems.push(it)
      }
    }
    // The cursors, as if these rows were written (undone if the write fails).
    for (const p of s.owned.values()) prune(p)
    const written = rowItems.filter((it) => s.owned.get(it.src!.entry.part.part) === it.src!.entry.part)
    for (const it of written) it.src!.entry.remaining--
    const recorded = new Map<Part, Pos>()
    for (const it of written) {
      const e = it.src!.entry
      recorded.set(e.part, maxPos(recorded.get(e.part) ?? e.part.recorded, e.pos))
    }
    const moves: Array<CursorMove & { readonly p: Part }> = []
    for (const p of s.owned.values()) {
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
    const order = done.map((it) => it.outcome!)
    if (
      rows.length === 0 &&
      leased.length === 0 &&
      handBackIds.length === 0 &&
      moves.length === 0 &&
      order.length === 0
    )
      return true
    const result = yield* db("record", () =>
      writeBatch(sql, {
        owner,
        rows,
        leased,
        handBack: handBackIds,
        cursors: moves,
        order,
        switchOffAfter: o.switchOffAfter,
        now: new Date(at)
      })
    ).pipe(Effect.exit)
    if (Exit.isFailure(result)) {
      for (const m of moves) if (m.release) m.p.releasing = false
      for (const it of written) it.src!.entry.remaining++
      s.completed.unshift(...done)
      for (const it of asked) s.requests.add(it)
      yield* Effect.logError("delivery results could not be written; retrying", Cause.pretty(result.cause))
      return false
    }
    const r = result.value
    for (const m of moves) {
      if (s.owned.get(m.part) !== m.p) continue
      if (!r.parts.has(m.part)) {
        lose(s, m.p) // another process took it meanwhile
        continue
      }
      m.p.durable = m.cursor
      m.p.recorded = m.recorded
      if (m.release) {
        s.owned.delete(m.part)
        s.partEpoch++
      }
    }
    s.stats.partitions = s.owned.size
    // What is written is no longer this process's to hold, except rows leased to it.
    const finish = (it: Item) => {
      if (it.dropped) return
      it.dropped = true
      s.held--
    }
    for (const it of done) {
      finish(it)
      const out = it.outcome!
      if (!(r.inserted.has(out.id) || r.applied.has(out.id))) continue
      s.stats.attempts++
      if (out.state === "succeeded") s.stats.succeeded++
      else if (out.state === "failed") s.stats.failed++
      else s.stats.retried++
    }
    for (const it of handBackItems) finish(it)
    s.stats.handedBack += r.handedBack + handBackItems.filter((it) => !it.persisted && r.inserted.has(it.c.id)).length
    for (const it of asked) {
      if (!it.persist || it.persisted || it.dropped || it.handBack) continue
      if (r.inserted.has(it.c.id)) {
        it.persisted = true
        it.leaseUntil = at + o.leaseMs
        s.stats.written++
      } else {
        // Another process wrote it first: it is theirs.
        if (it.state === "queued") {
          dequeue(s, it)
          it.state = "done"
        }
        finish(it)
      }
    }
    s.stats.switchedOff += r.switchedOff.length
    s.stats.subscriptionsGone += r.deletedSubscriptions.length
    // Issue 16.7: one greppable line per switch-off, with the reason the activity log has.
    if (r.switchedOff.length > 0) {
      const off = yield* db(
        "record",
        () =>
          sql<{ id: string; company_id: string; disabled_reason: string | null }[]>`
          select id::text, company_id::text, disabled_reason from service.webhook_endpoints where id = any(${[...r.switchedOff]}::uuid[])`
      ).pipe(Effect.orElseSucceed(() => []))
      const why = new Map(off.map((e) => [e.id, e]))
      for (const id of r.switchedOff) {
        yield* Effect.logWarning("webhook endpoint switched off", {
          endpointId: id,
          companyId: why.get(id)?.company_id ?? null,
          reason: why.get(id)?.disabled_reason ?? null
        })
      }
    }
    for (const id of r.deletedSubscriptions)
      yield* Effect.logInfo("subscription deleted: its receiver answered 410", { subscriptionId: id })
    // Room for more; rows handed back are due now, and a retry may be due before the claim
    // loop's next look.
    poke(s.wake.fanout)
    if (s.claimWaiting || handBackItems.length > 0 || order.some((x) => x.state === "pending")) poke(s.wake.claim)
    return true
  })

/** Something settled is to be written (see `recordOnce`). */
const pending = (s: EngineState) => s.completed.length > 0 || s.requests.size > 0

/** Writes whenever poked; a failed write is tried again a second later. */
export const recordLoop = (env: EngineEnv, s: EngineState) =>
  Effect.forever(
    Effect.gen(function* () {
      yield* Queue.take(s.wake.record)
      // While answers keep coming, gather them: one statement writes them together (a
      // statement's own cost is that of tens of rows).
      const gatherUntil = Date.now() + GATHER_MS
      while (!s.stopping && s.sendingTotal > 0 && s.completed.length < WRITE_BATCH && Date.now() < gatherUntil)
        yield* realSleep(5)
      // A write, once begun, finishes: its outcome decides what is held and what is freed.
      const ok = yield* Effect.uninterruptible(recordOnce(env, s, false))
      if (!ok) {
        yield* Effect.sleep(1_000)
        poke(s.wake.record)
      } else if (pending(s)) poke(s.wake.record)
    })
  )

/** The last writes at shutdown: up to three failures, then what is left is the next engine's to read again. */
export const recordLast = (env: EngineEnv, s: EngineState) =>
  Effect.gen(function* () {
    for (let tries = 0; tries < 3; tries++) {
      if (yield* recordOnce(env, s, true)) {
        if (!pending(s)) break
        tries--
      }
    }
  })

// A delivery fanned out and still unwritten after writeAfterMs (a slow or hung receiver)
// is written, so the cursor can pass its event: still waiting for a slot, it goes back as
// a row due now (memory is freed for other receivers; a claim takes it again when its
// receiver has room, as for any scheduled row); already sending, it is written leased to
// this process, and its outcome updates the row.
export const overdueLoop = (env: EngineEnv, s: EngineState) =>
  Effect.forever(
    Effect.gen(function* () {
      yield* realSleep(Math.max(50, env.o.writeAfterMs / 4))
      const before = Date.now() - env.o.writeAfterMs
      let any = false
      while (s.unwrittenHead < s.unwritten.length && s.unwritten[s.unwrittenHead]!.fannedAt <= before) {
        const it = s.unwritten[s.unwrittenHead++]!
        if (it.persisted || it.outcome !== null || it.handBack || it.dropped || it.state === "done") continue
        if (it.state === "queued") {
          dequeue(s, it)
          it.state = "done"
          it.handBack = true
        } else it.persist = true
        s.requests.add(it)
        any = true
      }
      // Items behind the head are done with but still referenced (with their outcomes): drop
      // them once they are half the array, so at most a few hundred wait for the next slice.
      if (s.unwrittenHead > 256 && s.unwrittenHead * 2 > s.unwritten.length) {
        s.unwritten = s.unwritten.slice(s.unwrittenHead)
        s.unwrittenHead = 0
      }
      if (any) poke(s.wake.record)
    })
  )
