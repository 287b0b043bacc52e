// Send: owns the send queues and slots. Fan-out and claim queue deliveries per receiver
// origin; send starts attempts while slots are free and hands each answer to record as an
// outcome. This is the measured hot path (one call per attempt, delivery ~5.3k/s): it stays
// plain promise code over this step's own maps and counters, with no fiber or Effect per
// attempt, because that cost throughput; time still comes from the engine's Clock, read
// synchronously. An attempt becomes an Effect only for its span, and only with tracing on.
import type { Tracer } from "effect"
import { Effect } from "effect"
import { withDeliverySpan } from "../../platform/tracing.ts"
import { endpointSecretContext, keySecretContext } from "../../platform/db/channels.ts"
import { decryptSecret } from "../../platform/secrets/secrets-key.ts"
import { delayAfter, type RetrySchedule } from "../../domain/retry-schedule.ts"
import { deliveryBody } from "../net/body.ts"
import type { Claimed, Item, Outcome } from "./item.ts"
import { send, type SendResult } from "../net/sender.ts"
import type { Pending } from "./record.ts"
import type { EngineEnv } from "./runtime.ts"

/** The send queues and slots, as the other steps see them. */
export type Sends = {
  /** Starts sends from the origin queues while slots are free. */
  readonly pump: () => void
  /** Queues an item for a send slot of its origin (`pump` starts it). */
  readonly enqueue: (it: Item) => void
  /** Takes an item out of its origin's queue (not started). */
  readonly dequeue: (it: Item) => void
  /** Takes the items waiting for a send slot that `which` picks out of their queues (not started). */
  readonly takeQueued: (which: (it: Item) => boolean) => Array<Item>
  /** Gives back everything waiting for a send slot (a destination changed, or shutdown). */
  readonly handBackQueued: () => void
  /** Per origin: deliveries queued or sending (claim's fairness between origins). */
  readonly open: ReadonlyMap<string, number>
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

/** Adds d to a per-origin count, dropping it at zero. */
const add = (m: Map<string, number>, k: string, d: number) => {
  const n = (m.get(k) ?? 0) + d
  if (n <= 0) m.delete(k)
  else m.set(k, n)
}

/**
 * `pending`: where outcomes and hand-backs go (record's); `roomFreed`: an attempt ended, so an
 * origin has room again (claim's, which claims again if it left rows for lack of room).
 */
export const makeSend = (
  env: EngineEnv,
  pending: Pick<Pending, "complete" | "toWrite" | "handBack">,
  roomFreed: () => void
): Sends => {
  const { o, options, nowMs, signals } = env
  /** Per origin: queued + sending. */
  const open = new Map<string, number>()
  /** Per origin: items waiting for a send slot, in order. */
  const queues = new Map<string, Array<Item>>()
  /** Per origin: attempts on the wire. */
  const sending = new Map<string, number>()
  let sendingTotal = 0
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
    if (signal.aborted) {
      it.handBack = true
      return pending.toWrite(it)
    }
    env.observeAttempt({ ok: result.ok, durationMs: result.durationMs, errorKind: result.errorKind })
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

  const pump = (): void => {
    if (signals.stopping) return
    const at = nowMs()
    for (const [origin, queue] of queues) {
      while (queue.length > 0 && sendingTotal < o.concurrency && (sending.get(origin) ?? 0) < o.perOrigin) {
        const it = queue.shift()!
        // Never start an attempt that might outlive its lease: give it back instead.
        if (it.persisted && at > it.leaseUntil - o.timeoutMs - 5_000) {
          add(open, origin, -1)
          pending.handBack(it)
          continue
        }
        it.state = "sending"
        add(sending, origin, 1)
        sendingTotal++
        const abort = new AbortController()
        const running = (env.runTraced === null ? attempt(it, abort.signal) : tracedAttempt(it, abort.signal)).finally(
          () => {
            add(sending, origin, -1)
            add(open, origin, -1)
            sendingTotal--
            inFlight.delete(running)
            roomFreed()
            pump()
          }
        )
        inFlight.set(running, abort)
      }
      if (queue.length === 0) queues.delete(origin)
    }
  }

  const takeQueued = (which: (it: Item) => boolean): Array<Item> => {
    const taken: Array<Item> = []
    for (const [origin, queue] of queues) {
      const keep = queue.filter((it) => !which(it))
      if (keep.length === queue.length) continue
      for (const it of queue) if (which(it)) taken.push(it)
      add(open, origin, keep.length - queue.length)
      if (keep.length === 0) queues.delete(origin)
      else queues.set(origin, keep)
    }
    return taken
  }

  const handBackQueued = () => {
    for (const it of takeQueued(() => true)) pending.handBack(it)
  }

  return {
    pump,
    enqueue: (it: Item) => {
      add(open, it.c.origin, 1)
      const q = queues.get(it.c.origin)
      if (q) q.push(it)
      else queues.set(it.c.origin, [it])
    },
    dequeue: (it: Item) => {
      const q = queues.get(it.c.origin)
      const i = q?.indexOf(it) ?? -1
      if (i < 0) return
      q!.splice(i, 1)
      if (q!.length === 0) queues.delete(it.c.origin)
      add(open, it.c.origin, -1)
    },
    takeQueued,
    handBackQueued,
    open,
    openTotal: () => {
      let n = 0
      for (const k of open.values()) n += k
      return n
    },
    sending: () => sendingTotal,
    queued: () => {
      let n = 0
      for (const q of queues.values()) n += q.length
      return n
    },
    finish: Effect.gen(function* () {
      handBackQueued()
      open.clear()
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
    subscriptionId: c.subscriptionId
  }
  if (r.ok)
    return { ...common, state: "succeeded", nextAt: null, health: c.endpointId !== null ? "reset" : null, gone: false }
  const gone = c.subscriptionId !== null && r.status === 410
  // Send Again of a finished delivery is one attempt: failing, it is finished again.
  const wait = gone || c.manual ? null : delayAfter(schedule, number)
  if (wait !== null)
    return { ...common, state: "pending", nextAt: new Date(finishedMs + wait), health: null, gone: false }
  // A Send Again that fails again was counted when the delivery first failed.
  return { ...common, state: "failed", nextAt: null, health: c.endpointId !== null && !c.manual ? "fail" : null, gone }
}
