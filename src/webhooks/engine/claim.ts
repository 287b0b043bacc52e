// Claim: leases a batch of due rows (retries, hand-backs, Send Again, replays). Each waits in
// its origin's queue for a send slot, and starts only if its attempt can end within its lease
// (else send hands it back).
import { Effect } from "effect"
import { claim, nextDue } from "./claim-queries.ts"
import type { DeliveryQueryFailed } from "./errors.ts"
import { db, now, survive, waitFor, type EngineEnv } from "./runtime.ts"
import type { Pump } from "./send.ts"
import { enqueue, handBack, type EngineState, type Item } from "./state.ts"

/** "more": a full scan, claim again at once; "full": no room; "idle": nothing due now. */
type Step = "more" | "full" | "idle"

export const makeClaim = (env: EngineEnv, s: EngineState, pump: Pump) => {
  const { sql, o, owner, maxHeld, maxOpenPerOrigin } = env

  const once: Effect.Effect<Step, DeliveryQueryFailed> = Effect.gen(function* () {
    const free = maxHeld - s.held
    // Claim in batches, not for a slot or two.
    s.claimWaiting = true
    if (s.stopping || free < Math.min(32, maxHeld / 8)) return "full"
    const at = yield* now
    const saturated = [...s.open].filter(([, n]) => n >= maxOpenPerOrigin).map(([origin]) => origin)
    // Enough rows to fill what is free; one origin's share stops at its limit, and a
    // saturated origin is not scanned at all, so the next claim moves on to the others.
    const scan = Math.min(free, 256)
    const seen = s.generation
    const { claimed, scanned } = yield* db("claim", () =>
      claim(sql, {
        now: at,
        free,
        scan,
        perOrigin: maxOpenPerOrigin,
        saturated,
        busy: s.open,
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
        handBack: seen !== s.generation,
        persist: false,
        dropped: false,
        span: null
      }
      s.held++
      if (it.handBack) handBack(s, it)
      else enqueue(s, it)
    }
    pump()
    // Rows may be left for later: room freed by a finished attempt is worth another claim.
    s.claimWaiting = claimed.length >= free || saturated.length > 0
    if (claimed.length >= free) return "full"
    return claimed.length > 0 && scanned >= scan ? "more" : "idle"
  })

  const loop = Effect.forever(
    Effect.gen(function* () {
      const step = yield* once.pipe(
        survive("claim"),
        Effect.map((x) => x ?? "idle")
      )
      if (step === "more") return yield* Effect.yieldNow
      if (step === "full") return void (yield* waitFor(s.wake.claim, o.pollMs))
      const at = yield* now
      const due = yield* db("next due", () => nextDue(sql, at)).pipe(Effect.orElseSucceed(() => null))
      const wait = due === null ? o.pollMs : Math.min(o.pollMs, due - at.getTime())
      yield* waitFor(s.wake.claim, wait)
    })
  )
  return { once, loop }
}
