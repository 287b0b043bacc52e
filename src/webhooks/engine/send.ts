// Send: owns the send queues and slots. Fan-out and claim queue deliveries per destination
// (fair.ts: companies take turns for the slots, and destinations within each); send starts
// attempts while slots are free and hands each answer to record as an outcome. Before a
// delivery waits for a slot, its destination's circuit is asked (circuits.ts): open, the
// delivery is recorded as not sent, at once, holding nothing. This is the measured hot path
// (one call per attempt): it stays plain promise code over this step's own maps and counters,
// with no fiber or Effect per attempt, because that cost throughput; time still comes from the
// engine's Clock, read synchronously. An attempt becomes an Effect only for its span, and only
// with tracing on.
import type { Tracer } from "effect"
import { Effect } from "effect"
import { withDeliverySpan } from "../../platform/tracing.ts"
import { endpointSecretContext, keySecretContext } from "../../platform/db/channels.ts"
import { decryptSecret } from "../../platform/secrets/secrets-key.ts"
import { delayAfter, type RetrySchedule } from "../../domain/retry-schedule.ts"
import { isAlertKind } from "../../domain/event-kinds.ts"
import { deliveryBody } from "../net/body.ts"
import type { Circuits } from "./circuits.ts"
import { fairLimits, makeScheduler, type Lane } from "./fair.ts"
import { UNKNOWN_CAP, type Health } from "./health.ts"
import type { Claimed, Item, Outcome } from "./item.ts"
import { send, type SendResult } from "../net/sender.ts"
import type { Pending } from "./record.ts"
import type { EngineEnv } from "./runtime.ts"

/** The send queues and slots, as the other steps see them. */
export type Sends = {
  /** Starts sends from the queues while slots are free. */
  readonly pump: () => void
  /**
   * Queues an item for a send slot (`pump` starts it), or records it at once as not sent when
   * its destination's circuit is open.
   */
  readonly enqueue: (it: Item) => void
  /** Whether this process may hold one more of the destination's deliveries in memory (fan-out asks). */
  readonly hasRoom: (c: Claimed) => boolean
  /**
   * When a delivery written as a row for lack of room here should fall due: spaced at its
   * destination's rate after what waits in memory; after a timeout's time when its receiver is
   * not answering; else at once. Rows that cannot be taken yet are not walked past by every claim.
   */
  readonly dueFor: (c: Claimed) => number
  /** Takes an item out of its queue (not started). */
  readonly dequeue: (it: Item) => void
  /** Takes the items waiting for a send slot that `which` picks out of their queues (not started). */
  readonly takeQueued: (which: (it: Item) => boolean) => Array<Item>
  /** Gives back everything waiting for a send slot (a destination changed, or shutdown). */
  readonly handBackQueued: () => void
  /** A destination's circuit opened: what of it waits for a slot is recorded as not sent. */
  readonly circuitOpened: (destination: string) => void
  /** What claim needs to share its batch fairly: per destination and per origin, held and the most that may be. */
  readonly room: () => ClaimRoom
  /** Deliveries queued or sending, in all. */
  readonly openTotal: () => number
  /** Attempts on the wire. */
  readonly sending: () => number
  /** Waiting for a send slot. */
  readonly queued: () => number
  /**
   * Shutdown's sends (after `signals.stopping`, so none starts): waiting for a slot, back at
   * once. Attempts in flight get the grace to finish and be written; whatever is still out
   * after it is cancelled and handed back unattempted, due at once for the next engine.
   */
  readonly finish: Effect.Effect<void>
}

/** Room per destination and per origin for claim: deliveries held here and the most that may be. */
export type ClaimRoom = {
  /** Destinations with deliveries here: how many more this process may hold. */
  readonly flows: ReadonlyMap<string, number>
  /** Origins known here: how many deliveries of a destination new to this process it may hold. */
  readonly origins: ReadonlyMap<string, number>
  /** Origins at their limit: none of theirs is claimed. */
  readonly saturated: ReadonlyArray<string>
  /** Destinations at their limit. */
  readonly full: ReadonlyArray<string>
}

const laneOf = (c: Claimed): Lane => ({
  company: c.companyId,
  flow: (c.endpointId ?? c.subscriptionId)!,
  origin: c.origin
})

/** The result of a delivery not sent because its destination's circuit is open. */
const notSentResult: SendResult = {
  ok: false,
  status: null,
  error: "circuit open: not sent (its receiver gave no answer to the last attempts); the next attempt is scheduled",
  errorKind: "circuit",
  durationMs: 0,
  responseSnippet: "",
  addresses: []
}

/**
 * `pending`: where outcomes and hand-backs go (record's); `roomFreed`: an attempt ended, so a
 * destination has room again (claim's, which claims again if it left rows for lack of room);
 * `live`: engine processes sharing the work (a destination's rate is shared among them).
 */
export const makeSend = (
  env: EngineEnv,
  pending: Pick<Pending, "complete" | "toWrite" | "handBack">,
  roomFreed: () => void,
  health: Health,
  circuits: Pick<Circuits, "gate" | "claim" | "observe" | "notSent">,
  live: () => number
): Sends => {
  const { o, options, nowMs, signals } = env
  const scheduler = makeScheduler<Item>(fairLimits(o.concurrency, o.perOrigin), health.limit)
  /** Waiting for the database to say whether this process sends the probe of their circuit. */
  const parked = new Set<Item>()
  let rateTimer: ReturnType<typeof setTimeout> | null = null
  let rateTimerAt = Number.POSITIVE_INFINITY
  const inFlight = new Map<Promise<void>, AbortController>()
  const secrets = new Map<string, string>() // decrypted signing secrets, by context and blob
  const byBlob = new WeakMap<Buffer, string>() // the same, by the blob fan-out shares among a destination's deliveries
  const secretFor = (c: Claimed, blob: Buffer = c.secret): string => {
    let plain = byBlob.get(blob)
    if (plain !== undefined) return plain
    const context = c.endpointId !== null ? endpointSecretContext(c.endpointId) : keySecretContext(c.keyId!)
    const key = `${context}|${blob.toString("base64")}`
    plain = secrets.get(key)
    if (plain === undefined) {
      plain = decryptSecret(options.secretsKey, blob, context)
      if (secrets.size >= 10_000) secrets.clear()
      secrets.set(key, plain)
    }
    byBlob.set(blob, plain)
    return plain
  }
  /** This process's share of the destination's rate, per second; null: no rate. */
  const rateShare = (c: Claimed): number | null => (c.rateLimit === null ? null : c.rateLimit / Math.max(1, live()))
  const intervalOf = (c: Claimed): number => {
    const r = rateShare(c)
    return r === null ? 0 : 1000 / r
  }

  /** Records the delivery as not sent (its circuit is open): a failed attempt that held nothing. */
  const notSent = (it: Item) => {
    it.state = "done"
    if (it.dropped) return
    const at = nowMs()
    circuits.notSent()
    it.outcome = decide(it.c, notSentResult, at, at, options.schedule)
    pending.complete(it)
  }

  const attempt = async (it: Item, signal: AbortSignal, span?: Tracer.Span): Promise<void> => {
    const c = it.c
    const started = nowMs()
    let result: SendResult
    try {
      const body = deliveryBody({ deliveryId: c.id, event: c.event, createdAt: c.eventCreatedAt, payload: c.payload })
      // A rotated secret's predecessor signs too while its overlap lasts (docs/events.md#secret-rotation).
      const previousSecret = c.previousSecret === null ? null : secretFor(c, c.previousSecret)
      result = await send(
        { url: c.url, secret: secretFor(c), previousSecret },
        { deliveryId: c.id, event: c.event, body },
        {
          allowed: options.allowed,
          timeoutMs: o.timeoutMs,
          maxResponseBytes: o.maxResponseBytes,
          signal,
          ...(options.lookup ? { lookup: options.lookup } : {}),
          ...(options.ca ? { ca: options.ca } : {})
        }
      )
    } catch (e) {
      result = {
        ok: false,
        status: null,
        error: `internal: ${(e as Error).message}`,
        errorKind: "internal",
        durationMs: 0,
        responseSnippet: "",
        addresses: []
      }
    }
    it.state = "done"
    // Cancelled by shutdown: not an attempt to record; the delivery is handed back.
    // A probe's claim on its circuit runs out by itself (probe_until): another engine probes then.
    if (signal.aborted) {
      it.handBack = true
      return pending.toWrite(it)
    }
    env.observeAttempt({ ok: result.ok, durationMs: result.durationMs, errorKind: result.errorKind })
    health.observe(c.origin, result.status, result.errorKind, result.durationMs)
    circuits.observe(c, result, it.probe, nowMs())
    if (it.dropped) return
    it.outcome = decide(c, result, started, nowMs(), options.schedule)
    if (span) {
      span.attribute("delivery.outcome", it.outcome.state)
      if (result.status !== null) span.attribute("http.response.status_code", result.status)
      if (result.errorKind !== null) span.attribute("error.type", result.errorKind)
    }
    pending.complete(it)
  }

  /** An attempt in its span, under its fan-out round's span if it has one. */
  const tracedAttempt = (it: Item, signal: AbortSignal): Promise<void> => {
    const c = it.c
    const traced = Effect.flatMap(Effect.currentSpan, (span) => Effect.promise(() => attempt(it, signal, span))).pipe(
      withDeliverySpan({
        deliveryId: c.id,
        eventId: c.eventId,
        event: c.event,
        endpointId: c.endpointId,
        subscriptionId: c.subscriptionId,
        attempt: c.attempts + 1
      })
    )
    return env.runTraced!(it.span ? Effect.withParentSpan(traced, it.span) : traced)
  }

  const start = (it: Item) => {
    it.state = "sending"
    health.started(it.c.origin)
    const abort = new AbortController()
    const running = (env.runTraced === null ? attempt(it, abort.signal) : tracedAttempt(it, abort.signal)).finally(
      () => {
        scheduler.done(it, nowMs())
        inFlight.delete(running)
        roomFreed()
        pump()
      }
    )
    inFlight.set(running, abort)
  }

  /** Waits for a slot, or goes to its circuit first (not sent, or the probe). */
  const enqueue = (it: Item) => {
    const gate = circuits.gate(it.c, nowMs())
    if (gate === "send") return scheduler.enqueue(it, laneOf(it.c), intervalOf(it.c))
    if (gate === "fail") return notSent(it)
    parked.add(it)
    circuits.claim(it.c, (won) => {
      // Taken back meanwhile (a destination changed, a partition lost): nothing to do.
      if (!parked.delete(it)) return
      if (!won) return notSent(it)
      it.probe = true
      scheduler.enqueueFront(it, laneOf(it.c), intervalOf(it.c))
      pump()
    })
  }

  const pump = (): void => {
    if (signals.stopping) return
    const at = nowMs()
    for (;;) {
      const it = scheduler.next(at)
      if (it === null) break
      // Never start an attempt that might outlive its lease: give it back instead.
      if (it.persisted && at > it.leaseUntil - o.timeoutMs - 5_000) {
        scheduler.done(it, at)
        pending.handBack(it)
        continue
      }
      // Its circuit opened while it waited: not sent, or the probe.
      if (!it.probe && circuits.gate(it.c, at) !== "send") {
        scheduler.done(it, at)
        enqueue(it)
        continue
      }
      start(it)
    }
    // A destination held back by its rate: look again when it may start.
    const wakeAt = scheduler.takeWakeAt()
    if (wakeAt < rateTimerAt) {
      if (rateTimer) clearTimeout(rateTimer)
      rateTimerAt = wakeAt
      rateTimer = setTimeout(
        () => {
          rateTimer = null
          rateTimerAt = Number.POSITIVE_INFINITY
          pump()
        },
        Math.max(1, wakeAt - at)
      )
      rateTimer.unref()
    }
  }

  const takeQueued = (which: (it: Item) => boolean): Array<Item> => {
    const taken = scheduler.take(which)
    for (const it of [...parked]) {
      if (!which(it)) continue
      parked.delete(it)
      taken.push(it)
    }
    scheduler.sweep(nowMs())
    return taken
  }

  const handBackQueued = () => {
    for (const it of takeQueued(() => true)) pending.handBack(it)
  }

  /** Per rate-limited destination: the last due time given to a row written for lack of room. */
  const reserved = new Map<string, number>()
  /** A delivery of each destination held here: its origin and rate, for `room`. */
  const sampleOf = new Map<string, Claimed>()
  const room = (): ClaimRoom => {
    const flows = new Map<string, number>()
    const full: Array<string> = []
    for (const [flow, n] of scheduler.openByFlow()) {
      const sample = sampleOf.get(flow)
      const cap = sample ? health.capOf(sample.origin, rateShare(sample), false) : o.perOrigin
      if (n >= cap) full.push(flow)
      else flows.set(flow, cap - n)
    }
    const origins = new Map<string, number>()
    const saturated: Array<string> = []
    for (const [origin, n] of scheduler.openByOrigin()) {
      const cap = health.capOf(origin, null, false)
      origins.set(origin, cap)
      if (n >= cap) saturated.push(origin)
    }
    return { flows, origins, saturated, full }
  }

  return {
    pump,
    enqueue: (it: Item) => {
      const flow = (it.c.endpointId ?? it.c.subscriptionId)!
      if (sampleOf.size >= 10_000) sampleOf.clear()
      sampleOf.set(flow, it.c)
      enqueue(it)
    },
    hasRoom: (c: Claimed) => {
      const open = scheduler.openOf((c.endpointId ?? c.subscriptionId)!)
      // Receivers not heard from yet take at most a quarter of memory per company, whatever their
      // grace: fan-out keeps room to read (it reads with half of memory free).
      if (health.unknown(c.origin) && scheduler.openOfCompany(c.companyId) >= env.maxHeld / 4) return open < UNKNOWN_CAP
      return open < health.capOf(c.origin, rateShare(c))
    },
    dueFor: (c: Claimed) => {
      const at = nowMs()
      const share = rateShare(c)
      if (share !== null) {
        const flow = (c.endpointId ?? c.subscriptionId)!
        const due = Math.max(at + o.writeAfterMs, reserved.get(flow) ?? 0) + 1000 / share
        if (reserved.size >= 10_000) reserved.clear()
        reserved.set(flow, due)
        return due
      }
      return health.failing(c.origin) ? at + o.timeoutMs : at
    },
    dequeue: (it: Item) => {
      if (!scheduler.remove(it, nowMs())) parked.delete(it)
    },
    takeQueued,
    handBackQueued,
    circuitOpened: (destination: string) => {
      const of = (it: Item) => (it.c.endpointId ?? it.c.subscriptionId) === destination && !it.c.manual && !it.probe
      for (const it of scheduler.take(of)) notSent(it)
      scheduler.sweep(nowMs())
    },
    room,
    openTotal: () => scheduler.queued() + scheduler.sending() + parked.size,
    sending: () => scheduler.sending(),
    queued: () => scheduler.queued() + parked.size,
    finish: Effect.gen(function* () {
      handBackQueued()
      if (rateTimer) clearTimeout(rateTimer)
      if (inFlight.size > 0) {
        const all = [...inFlight.keys()]
        yield* Effect.promise(() => Promise.all(all)).pipe(Effect.timeoutOption(o.shutdownGraceMs))
      }
      const late = [...inFlight]
      for (const [, abort] of late) abort.abort()
      yield* Effect.promise(() => Promise.all(late.map(([p]) => p)))
    })
  }
}

/** What an attempt's result means for the delivery. */
export const decide = (
  c: Claimed,
  r: SendResult,
  startedMs: number,
  finishedMs: number,
  schedule: RetrySchedule
): Outcome => {
  const number = c.attempts + 1
  const common = {
    id: c.id,
    before: c.attempts,
    startedAt: new Date(startedMs),
    durationMs: r.durationMs,
    status: r.status,
    error: r.error,
    errorKind: r.errorKind,
    snippet: r.responseSnippet,
    endpointId: c.endpointId,
    subscriptionId: c.subscriptionId,
    orderingKey: c.orderingKey
  }
  if (r.ok)
    return {
      ...common,
      state: "succeeded",
      nextAt: null,
      health: c.endpointId !== null ? "reset" : null,
      gone: false,
      alert: isAlertKind(c.event) ? null : "ok"
    }
  const gone = c.subscriptionId !== null && r.status === 410
  // Send Again of a finished delivery is one attempt: failing, it is finished again.
  const wait = gone || c.manual ? null : delayAfter(schedule, number)
  if (wait !== null)
    return { ...common, state: "pending", nextAt: new Date(finishedMs + wait), health: null, gone: false, alert: null }
  // A Send Again that fails again was counted when the delivery first failed.
  return {
    ...common,
    state: "failed",
    nextAt: null,
    health: c.endpointId !== null && !c.manual ? "fail" : null,
    gone,
    // An alert's own delivery makes no alert (docs/events.md#failure-alerts).
    alert: c.manual || isAlertKind(c.event) ? null : "fail"
  }
}
