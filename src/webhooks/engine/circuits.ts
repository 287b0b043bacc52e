// Circuits: a breaker per destination (endpoint or subscription), shared by every engine
// process through service.webhook_circuits (circuits-queries.ts). After `after` timeouts or
// connection failures in a row, the destination's circuit opens: its deliveries that come due
// are not sent, and hold no slot; each is recorded as a failed attempt ("circuit open: not
// sent") and its next attempt scheduled as for any failure, so the retry schedule and the
// switch-off after 15 fully failed deliveries go on exactly as before. From `probeAt` the next
// delivery due is sent as the single probe (half open; one engine takes it in the database):
// an answer, whatever its status, closes the circuit; no answer opens it again and the wait
// before the next probe doubles (`probeMs`, 2x, 4x... up to `probeMaxMs`). Send Again is
// always sent, and an answer to it closes the circuit.
//
// The send path asks `gate` and reports each result to `observe`, synchronously; what touches
// the database goes through one queue, worked by `loop` under the supervisor, which also
// re-reads the circuits when another engine (or an admin's Turn On) changed them.
import { Cause, Effect } from "effect"
import type { SendResult } from "../net/sender.ts"
import {
  claimProbe,
  closeCircuit,
  loadCircuits,
  openCircuit,
  reopenCircuit,
  type CircuitRow,
  type Dest
} from "./circuits-queries.ts"
import { isUnanswered } from "./health.ts"
import { isAlertKind } from "../../domain/event-kinds.ts"
import { raiseAlerts } from "../alerts/raise.ts"
import type { Claimed } from "./item.ts"
import { db, realWaitFor, type EngineEnv, type Wake } from "./runtime.ts"

export type CircuitSettings = {
  /** Timeouts or connection failures in a row that open a circuit. */
  readonly after: number
  /** The wait before the first probe; it doubles after each failed probe. */
  readonly probeMs: number
  readonly probeMaxMs: number
}

/** What the send path does with a delivery: send it, record it as not sent, or make it the probe. */
export type Gate = "send" | "fail" | "probe"

type Op =
  | {
      readonly kind: "open"
      readonly dest: Dest
      readonly companyId: string
      readonly failures: number
      readonly lastError: string | null
      /** Opened by an alert's own delivery: it makes no alert. */
      readonly byAlert: boolean
    }
  | { readonly kind: "claim"; readonly dest: Dest; readonly done: (won: boolean) => void }
  | { readonly kind: "close"; readonly dest: Dest }
  | { readonly kind: "reopen"; readonly dest: Dest; readonly lastError: string | null }

const destOf = (c: Pick<Claimed, "endpointId" | "subscriptionId">): Dest => ({
  endpointId: c.endpointId,
  subscriptionId: c.subscriptionId
})
const keyOf = (d: Dest) => (d.endpointId ?? d.subscriptionId)!

export type CircuitStats = { circuitsOpened: number; circuitsClosed: number; notSent: number }

export const makeCircuits = (
  env: EngineEnv,
  settings: CircuitSettings,
  wake: Wake,
  /** A circuit opened: what waits for a slot to that destination is not sent. */
  opened: (destination: string) => void
) => {
  /** Circuits not closed, by destination id: the database's, and those this process just opened. */
  let known = new Map<string, CircuitRow>()
  /** Opened here, not yet in the database: kept across a re-read until written. */
  const provisional = new Map<string, CircuitRow>()
  /** Timeouts or connection failures in a row, per destination whose circuit is closed. */
  const failures = new Map<string, number>()
  /**
   * Destinations whose probe this process is taking or sending, until when at the latest (a
   * probe handed back unsent, or lost with its partition, does not hold its circuit shut).
   */
  const probing = new Map<string, number>()
  const ops: Array<Op> = []
  const stats: CircuitStats = { circuitsOpened: 0, circuitsClosed: 0, notSent: 0 }
  const probeLeaseMs = env.o.timeoutMs + 5_000

  const enqueue = (op: Op) => {
    ops.push(op)
    wake.poke()
  }
  const circuitOf = (id: string) => provisional.get(id) ?? known.get(id)

  const gate = (c: Claimed, nowMs: number): Gate => {
    const id = (c.endpointId ?? c.subscriptionId)!
    const k = circuitOf(id)
    if (k === undefined || c.manual) return "send"
    const until = probing.get(id)
    if (until !== undefined) {
      if (until > nowMs) return "fail"
      probing.delete(id)
    }
    if (nowMs < k.probeAtMs) return "fail"
    if (k.state === "half_open" && k.probeUntilMs !== null && k.probeUntilMs > nowMs) return "fail"
    return "probe"
  }

  /** Asks the database for the probe; `done(true)`: this process sends it. */
  const claim = (c: Claimed, done: (won: boolean) => void) => {
    const dest = destOf(c)
    probing.set(keyOf(dest), env.nowMs() + probeLeaseMs)
    enqueue({
      kind: "claim",
      dest,
      done: (won) => {
        if (!won) probing.delete(keyOf(dest))
        done(won)
      }
    })
  }

  /** An attempt's result. `probe`: it was sent while the circuit was open (the probe, or Send Again). */
  const observe = (c: Claimed, r: SendResult, probe: boolean, nowMs: number) => {
    const dest = destOf(c)
    const id = keyOf(dest)
    if (probe) probing.delete(id)
    if (r.status !== null) {
      failures.delete(id)
      if (circuitOf(id) !== undefined || probe) {
        provisional.delete(id)
        known.delete(id)
        enqueue({ kind: "close", dest })
      }
      return
    }
    if (probe) {
      const k = circuitOf(id)
      if (k)
        known.set(id, { ...k, state: "open", probeAtMs: nowMs + settings.probeMs, probeBy: null, probeUntilMs: null })
      enqueue({ kind: "reopen", dest, lastError: r.error })
      return
    }
    if (!isUnanswered(r.errorKind) || circuitOf(id) !== undefined) return
    const n = (failures.get(id) ?? 0) + 1
    if (n < settings.after) {
      if (failures.size >= 10_000) failures.clear()
      failures.set(id, n)
      return
    }
    failures.delete(id)
    provisional.set(id, {
      endpointId: c.endpointId,
      subscriptionId: c.subscriptionId,
      companyId: c.companyId,
      state: "open",
      failures: n,
      openedAtMs: nowMs,
      probeAtMs: nowMs + settings.probeMs,
      probes: 0,
      probeBy: null,
      probeUntilMs: null,
      lastError: r.error
    })
    enqueue({
      kind: "open",
      dest,
      companyId: c.companyId,
      failures: n,
      lastError: r.error,
      byAlert: isAlertKind(c.event)
    })
    opened(id)
  }

  const who = (d: Dest) => (d.endpointId !== null ? { endpointId: d.endpointId } : { subscriptionId: d.subscriptionId })

  const run = (op: Op) =>
    Effect.gen(function* () {
      const { sql, owner } = env
      const at = env.nowMs()
      switch (op.kind) {
        case "open": {
          const r = yield* db("circuits", () =>
            openCircuit(sql, {
              ...op.dest,
              companyId: op.companyId,
              failures: op.failures,
              nowMs: at,
              probeAtMs: at + settings.probeMs,
              lastError: op.lastError
            })
          )
          provisional.delete(keyOf(op.dest))
          if (r.circuit) known.set(keyOf(op.dest), r.circuit)
          if (r.opened) {
            stats.circuitsOpened++
            yield* Effect.logWarning("webhook circuit opened: deliveries are not sent until a probe gets an answer", {
              ...who(op.dest),
              companyId: op.companyId,
              failures: op.failures,
              lastError: op.lastError,
              nextProbeAt: new Date(r.circuit!.probeAtMs).toISOString()
            })
            // A circuit that opens is a destination failing (docs/events.md#failure-alerts).
            if (!op.byAlert)
              yield* db("circuits", () =>
                sql.begin((tx) =>
                  raiseAlerts(
                    tx,
                    [{ kind: "webhook.failing", ...op.dest, lastError: op.lastError, lastAttemptAt: new Date(at) }],
                    { now: new Date(at), mail: env.options.alertMail === true }
                  )
                )
              ).pipe(Effect.ignore)
          }
          return
        }
        case "claim": {
          const won = yield* db("circuits", () => claimProbe(sql, op.dest, owner, at, at + probeLeaseMs)).pipe(
            Effect.orElseSucceed(() => false)
          )
          const k = known.get(keyOf(op.dest))
          if (won && k)
            known.set(keyOf(op.dest), { ...k, state: "half_open", probeBy: owner, probeUntilMs: at + probeLeaseMs })
          op.done(won)
          return
        }
        case "close": {
          const was = yield* db("circuits", () => closeCircuit(sql, op.dest))
          if (was) {
            stats.circuitsClosed++
            yield* Effect.logInfo("webhook circuit closed: the receiver answered", {
              ...who(op.dest),
              companyId: was.companyId,
              openedAt: new Date(was.openedAtMs).toISOString(),
              probes: was.probes + 1
            })
          }
          return
        }
        case "reopen": {
          const r = yield* db("circuits", () =>
            reopenCircuit(sql, op.dest, {
              owner,
              nowMs: at,
              baseMs: settings.probeMs,
              maxMs: settings.probeMaxMs,
              lastError: op.lastError
            })
          )
          if (r) {
            known.set(keyOf(op.dest), r)
            yield* Effect.logInfo("webhook circuit probe got no answer; the circuit stays open", {
              ...who(op.dest),
              companyId: r.companyId,
              lastError: op.lastError,
              probes: r.probes,
              nextProbeAt: new Date(r.probeAtMs).toISOString()
            })
          }
          return
        }
      }
    })

  /** Re-reads every circuit: one another engine opened stops sends here too. */
  const reload = Effect.gen(function* () {
    const rows = yield* db("circuits", () => loadCircuits(env.sql))
    const next = new Map<string, CircuitRow>()
    for (const r of rows) next.set((r.endpointId ?? r.subscriptionId)!, r)
    for (const id of next.keys()) if (!known.has(id) && !provisional.has(id)) opened(id)
    for (const id of known.keys()) if (!next.has(id)) failures.delete(id)
    known = next
  })

  let reloadWanted = true
  let reloadedAt = Number.NEGATIVE_INFINITY
  const loop = Effect.forever(
    Effect.gen(function* () {
      while (ops.length > 0) {
        const op = ops.shift()!
        yield* run(op).pipe(
          Effect.catchCause((cause) =>
            Effect.gen(function* () {
              if (op.kind === "claim") op.done(false)
              if (op.kind === "open") provisional.delete(keyOf(op.dest))
              yield* Effect.logWarning("delivery circuits: a write failed", Cause.pretty(cause))
            })
          )
        )
      }
      // Re-read on a notification, and every poll in case one was lost.
      if (reloadWanted || performance.now() - reloadedAt >= env.o.pollMs) {
        reloadWanted = false
        reloadedAt = performance.now()
        yield* reload.pipe(
          Effect.catchCause((cause) => Effect.logWarning("delivery circuits: reading them failed", Cause.pretty(cause)))
        )
      }
      if (ops.length > 0 || reloadWanted) return
      yield* realWaitFor(wake.queue, env.o.pollMs)
    })
  )

  return {
    gate,
    claim,
    observe,
    loop,
    stats,
    /** Circuits not closed, as this process knows them (tests, stats). */
    openCount: () => new Set([...known.keys(), ...provisional.keys()]).size,
    /** A notification: re-read them. */
    changed: () => {
      reloadWanted = true
      wake.poke()
    },
    /** A delivery was recorded as not sent (its circuit open). */
    notSent: () => void stats.notSent++
  }
}

export type Circuits = ReturnType<typeof makeCircuits>
