// Record: owns what this process holds until it is written, and writes it once settled:
// outcomes in completion order, hand-backs, leased rows for slow receivers, and the
// partitions' cursors (as partitions.ts plans them), in one statement (record-queries.ts
// `writeBatch`) when nothing failed. Nobody waits for a write: the receiver has the delivery
// already. The other steps hand it deliveries through `Pending`; it counts the deliveries in
// memory (fan-out and claim admit them, a write or a lost partition frees them), and its
// overdue sweep writes fan-out's deliveries that wait too long.
import { Cause, Effect, Exit, Queue } from "effect"
import type { ClaimWake } from "./claim.ts"
import type { Item, Outcome } from "./item.ts"
import type { Partitions } from "./partitions.ts"
import { writeBatch, type NewRow } from "./record-queries.ts"
import type { Failing } from "../alerts/failing.ts"
import { db, realSleep, type EngineEnv, type Wake } from "./runtime.ts"
import type { Sends } from "./send.ts"

/** Writes gather answers for up to GATHER_MS while attempts are in flight, until WRITE_BATCH are in. */
const GATHER_MS = 100
const WRITE_BATCH = 128

/** How the other steps hand deliveries to record. */
export type Pending = {
  /** Deliveries in memory: queued, sending or waiting to be written (fan-out and claim keep them under their limit). */
  readonly held: () => number
  /** A delivery came into memory (fan-out, claim). */
  readonly admit: () => void
  /** A fanned-out delivery queued to send: written by the overdue sweep if it waits too long. */
  readonly watch: (it: Item) => void
  /** An attempt's outcome, to write. */
  readonly complete: (it: Item) => void
  /** Asks for an item's hand-back or lease to be written. */
  readonly toWrite: (it: Item) => void
  /** Marks an item done and to be given back unattempted, and asks for the write. */
  readonly handBack: (it: Item) => void
  /** Gone from this process (written, or its partition lost): nothing more is written for it. */
  readonly forget: (it: Item) => void
}

export type RecordStats = {
  attempts: number
  succeeded: number
  failed: number
  retried: number
  handedBack: number
  /** Written as leased rows while their first attempt was on the wire (slow receivers). */
  written: number
  switchedOff: number
  subscriptionsGone: number
}

/** What a write needs of the other steps: where the cursors go, queued items, claim's wake. */
export type RecordPorts = {
  readonly partitions: Pick<Partitions, "plan" | "undo" | "settle">
  readonly sends: Pick<Sends, "dequeue" | "sending">
  readonly claim: Pick<ClaimWake, "poke" | "roomFreed">
}

export const makeRecord = (
  env: EngineEnv,
  wakes: { readonly record: Wake; readonly fanout: Wake },
  failing: Pick<Failing, "has" | "set">
) => {
  /** Deliveries in memory: queued, sending or waiting to be written. */
  let held = 0
  /** Outcomes to write, in completion order. */
  const completed: Array<Item> = []
  /** Hand-backs and persists to write. */
  const requests = new Set<Item>()
  /** Fan-out's items in fan-out order, from unwrittenHead on: the overdue sweep's to-do list. */
  let unwritten: Array<Item> = []
  let unwrittenHead = 0
  const stats: RecordStats = {
    attempts: 0,
    succeeded: 0,
    failed: 0,
    retried: 0,
    handedBack: 0,
    written: 0,
    switchedOff: 0,
    subscriptionsGone: 0
  }

  /** Asks for an item's hand-back or lease to be written. */
  const toWrite = (it: Item) => {
    if (it.dropped) return
    requests.add(it)
    wakes.record.poke()
  }

  const pending: Pending = {
    held: () => held,
    admit: () => void held++,
    watch: (it) => void unwritten.push(it),
    complete: (it) => {
      completed.push(it)
      wakes.record.poke()
    },
    toWrite,
    handBack: (it) => {
      it.state = "done"
      it.handBack = true
      toWrite(it)
    },
    forget: (it) => {
      if (it.dropped) return
      it.dropped = true
      held--
    }
  }

  /** Something settled is to be written. */
  const waiting = () => completed.length > 0 || requests.size > 0

  /** The writes, once the steps they go through exist. */
  const writer = ({ partitions, sends, claim }: RecordPorts) => {
    /**
     * One write of everything settled. `final` (shutdown) frees every partition with its cursor
     * where everything is written. False when the write failed: everything stays to be written.
     */
    const once = (final: boolean) =>
      Effect.gen(function* () {
        const { sql, o, owner } = env
        const done = completed.splice(0)
        const asked = [...requests]
        requests.clear()
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
          nextAt: outcome ? outcome.nextAt : new Date(it.dueAtMs ?? at),
          leaseUntil: leaseUntil === null ? null : new Date(leaseUntil),
          outcome,
          orderingKey: it.c.orderingKey
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
        const plan = partitions.plan(rowItems, final)
        const order = done.map((it) => it.outcome!)
        if (
          rows.length === 0 &&
          leased.length === 0 &&
          handBackIds.length === 0 &&
          plan.moves.length === 0 &&
          order.length === 0
        )
          return true
        const result = yield* db("record", () =>
          writeBatch(sql, {
            owner,
            rows,
            leased,
            handBack: handBackIds,
            cursors: plan.moves,
            order,
            switchOffAfter: o.switchOffAfter,
            now: new Date(at),
            failing: failing.has,
            alertMail: env.options.alertMail === true
          })
        ).pipe(Effect.exit)
        if (Exit.isFailure(result)) {
          partitions.undo(plan)
          completed.unshift(...done)
          for (const it of asked) requests.add(it)
          yield* Effect.logError("delivery results could not be written; retrying", Cause.pretty(result.cause))
          return false
        }
        const r = result.value
        partitions.settle(plan, r.parts)
        // What is written is no longer this process's to hold, except rows leased to it.
        const finish = pending.forget
        for (const it of done) {
          finish(it)
          const out = it.outcome!
          if (!(r.inserted.has(out.id) || r.applied.has(out.id))) continue
          stats.attempts++
          if (out.state === "succeeded") stats.succeeded++
          else if (out.state === "failed") stats.failed++
          else stats.retried++
        }
        for (const it of handBackItems) finish(it)
        stats.handedBack += r.handedBack + handBackItems.filter((it) => !it.persisted && r.inserted.has(it.c.id)).length
        for (const it of asked) {
          if (!it.persist || it.persisted || it.dropped || it.handBack) continue
          if (r.inserted.has(it.c.id)) {
            it.persisted = true
            it.leaseUntil = at + o.leaseMs
            stats.written++
          } else {
            // Another process wrote it first: it is theirs.
            if (it.state === "queued") {
              sends.dequeue(it)
              it.state = "done"
            }
            finish(it)
          }
        }
        for (const [dest, now] of r.alerted) failing.set(dest, now)
        stats.switchedOff += r.switchedOff.length
        stats.subscriptionsGone += r.deletedSubscriptions.length
        // One greppable line per switch-off (docs/operations.md#logs), with the reason the activity log has.
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
        wakes.fanout.poke()
        if (handBackItems.length > 0 || order.some((x) => x.state === "pending")) claim.poke()
        else claim.roomFreed()
        return true
      })

    return {
      /** Writes whenever poked; a failed write is tried again a second later. */
      loop: Effect.forever(
        Effect.gen(function* () {
          yield* Queue.take(wakes.record.queue)
          // Fenced out (a newer release's rules): the database refuses these writes; what was
          // sent unrecorded is sent again, under the same ids, by whoever takes the partitions.
          if (env.signals.fenced) return
          // While answers keep coming, gather them: one statement writes them together (a
          // statement's own cost is that of tens of rows).
          const gatherUntil = Date.now() + GATHER_MS
          while (
            !env.signals.stopping &&
            sends.sending() > 0 &&
            completed.length < WRITE_BATCH &&
            Date.now() < gatherUntil
          )
            yield* realSleep(5)
          // A write, once begun, finishes: its outcome decides what is held and what is freed.
          const ok = yield* Effect.uninterruptible(once(false))
          if (!ok) {
            yield* Effect.sleep(1_000)
            wakes.record.poke()
          } else if (waiting()) wakes.record.poke()
        })
      ),

      /** The last writes at shutdown: up to three failures, then what is left is the next engine's to read again. */
      last: Effect.gen(function* () {
        for (let tries = 0; tries < 3; tries++) {
          if (yield* once(true)) {
            if (!waiting()) break
            tries--
          }
        }
      }),

      // A delivery fanned out and still unwritten after writeAfterMs (a slow or hung receiver)
      // is written, so the cursor can pass its event: still waiting for a slot, it goes back as
      // a row due now (memory is freed for other receivers; a claim takes it again when its
      // receiver has room, as for any scheduled row); already sending, it is written leased to
      // this process, and its outcome updates the row.
      overdueLoop: Effect.forever(
        Effect.gen(function* () {
          yield* realSleep(Math.max(50, env.o.writeAfterMs / 4))
          const before = Date.now() - env.o.writeAfterMs
          let any = false
          while (unwrittenHead < unwritten.length && unwritten[unwrittenHead]!.fannedAt <= before) {
            const it = unwritten[unwrittenHead++]!
            if (it.persisted || it.outcome !== null || it.handBack || it.dropped || it.state === "done") continue
            if (it.state === "queued") {
              sends.dequeue(it)
              it.state = "done"
              it.handBack = true
            } else it.persist = true
            requests.add(it)
            any = true
          }
          // Items behind the head are done with but still referenced (with their outcomes): drop
          // them once they are half the array, so at most a few hundred wait for the next slice.
          if (unwrittenHead > 256 && unwrittenHead * 2 > unwritten.length) {
            unwritten = unwritten.slice(unwrittenHead)
            unwrittenHead = 0
          }
          if (any) wakes.record.poke()
        })
      )
    }
  }

  return { pending, stats, writer }
}
