// Claim: leases a batch of due rows (retries, hand-backs, Send Again, replays), each
// destination's as many as this process has room for. Each waits in its destination's queue
// for a send slot, and starts only if its attempt can end within its lease (else send hands
// it back). Deliveries ordered by record wait in the database until their turn.
import { Effect } from "effect"
import { claim, nextDue } from "./claim-queries.ts"
import type { DeliveryQueryFailed } from "./errors.ts"
import type { Item } from "./item.ts"
import type { Pending } from "./record.ts"
import { UNKNOWN_CAP } from "./health.ts"
import { db, now, survive, waitFor, type EngineEnv, type Wake } from "./runtime.ts"
import type { Sends } from "./send.ts"

/**
 * "more": a full scan, claim again at once; "full": no room; "idle": nothing due now;
 * "soon": deliveries ordered by record wait for fan-out to pass their event: look again shortly.
 */
type Step = "more" | "full" | "idle" | "soon"

/** How soon claim looks again for deliveries that wait for fan-out (their order needs it). */
const SOON_MS = 100

export type ClaimWake = ReturnType<typeof makeClaimWake>

/** Claim's wake-up, and whether the last claim left due rows for lack of room (only claim says so). */
export const makeClaimWake = (wake: Wake) => {
  let waiting = false
  return {
    ...wake,
    /** Room freed (an attempt ended, a write freed memory): another claim, if the last one left rows. */
    roomFreed: () => {
      if (waiting) wake.poke()
    },
    setWaiting: (w: boolean) => {
      waiting = w
    }
  }
}

export const makeClaim = (
  env: EngineEnv,
  wake: ClaimWake,
  sends: Pick<Sends, "enqueue" | "pump" | "room">,
  pending: Pick<Pending, "held" | "admit" | "handBack">,
  live: () => number
) => {
  const { sql, o, owner, maxHeld, signals } = env

  const once: Effect.Effect<Step, DeliveryQueryFailed> = Effect.gen(function* () {
    const free = maxHeld - pending.held()
    // Claim in batches, not for a slot or two.
    wake.setWaiting(true)
    if (signals.stopping || free < Math.min(32, maxHeld / 8)) return "full"
    if (!(yield* env.writable)) return "idle"
    const at = yield* now
    // Enough rows to fill what is free; one destination's share stops at its room, and a
    // destination or origin with none is not scanned at all, so the next claim moves on to the others.
    const room = sends.room()
    const scan = Math.min(free, 256)
    const seen = signals.generation
    const { claimed, scanned, left, waitingForFanout } = yield* db("claim", () =>
      claim(sql, {
        now: at,
        free,
        scan,
        saturated: room.saturated,
        full: room.full,
        rooms: room.flows,
        originCaps: room.origins,
        defaultRoom: UNKNOWN_CAP,
        live: live(),
        rateWindowMs: o.writeAfterMs,
        leaseUntil: new Date(at.getTime() + o.leaseMs),
        owner
      })
    )
    for (const c of claimed) {
      const it: Item = {
        c,
        src: null,
        persisted: true,
        leaseUntil: at.getTime() + o.leaseMs,
        fannedAt: Date.now(),
        state: "queued",
        outcome: null,
        handBack: seen !== signals.generation,
        persist: false,
        dropped: false,
        span: null,
        probe: false,
        dueAtMs: null
      }
      pending.admit()
      if (it.handBack) pending.handBack(it)
      else sends.enqueue(it)
    }
    sends.pump()
    // Rows may be left for later: room freed by a finished attempt is worth another claim.
    wake.setWaiting(claimed.length >= free || left > 0 || room.saturated.length > 0 || room.full.length > 0)
    if (claimed.length >= free) return "full"
    // A full scan, or rows left for a destination new here: look again now (it has room now
    // that what was just claimed of it is held here, measured by its origin).
    if (claimed.length > 0 && (scanned >= scan || left > 0)) return "more"
    return waitingForFanout > 0 ? "soon" : "idle"
  })

  const loop = Effect.forever(
    Effect.gen(function* () {
      const step = yield* once.pipe(
        survive("claim"),
        Effect.map((x) => x ?? "idle")
      )
      if (step === "more") return yield* Effect.yieldNow
      if (step === "full") return void (yield* waitFor(wake.queue, o.pollMs))
      if (step === "soon") return void (yield* waitFor(wake.queue, SOON_MS))
      const at = yield* now
      const due = yield* db("next due", () => nextDue(sql, at)).pipe(Effect.orElseSucceed(() => null))
      const wait = due === null ? o.pollMs : Math.min(o.pollMs, due - at.getTime())
      yield* waitFor(wake.queue, wait)
    })
  )
  return { once, loop }
}
