// Send: starts attempts from the origin queues while send slots are free, and turns each
// answer into an outcome for record to write. This is the measured hot path (one call per
// attempt, delivery ~5.3k/s): it stays plain promise code over the engine's state, with no
// fiber or Effect per attempt, because that cost throughput; time still comes from the
// engine's Clock, read synchronously. An attempt becomes an Effect only for its span, and
// only with tracing on.
import type { Tracer } from "effect"
import { Effect } from "effect"
import { withDeliverySpan } from "../../platform/tracing.ts"
import { endpointSecretContext, keySecretContext } from "../../platform/db/channels.ts"
import { decryptSecret } from "../../platform/secrets/secrets-key.ts"
import { delayAfter, type RetrySchedule } from "../../domain/retry-schedule.ts"
import { deliveryBody } from "../net/body.ts"
import type { Claimed, Outcome } from "./item.ts"
import { send, type SendResult } from "../net/sender.ts"
import type { EngineEnv } from "./runtime.ts"
import { add, handBack, poke, toWrite, type EngineState, type Item } from "./state.ts"

/** Starts sends from the origin queues while slots are free. */
export type Pump = () => void

export const makeSend = (env: EngineEnv, s: EngineState): Pump => {
  const { o, options, nowMs } = env
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
      // A rotated secret's predecessor signs too while its overlap lasts (issue 15.5).
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
      return toWrite(s, it)
    }
    env.observeAttempt({ ok: result.ok, durationMs: result.durationMs, errorKind: result.errorKind })
    if (it.dropped) return
    it.outcome = decide(c, result, started, nowMs(), options.schedule)
    if (span) {
      span.attribute("delivery.outcome", it.outcome.state)
      if (result.status !== null) span.attribute("http.response.status_code", result.status)
      if (result.errorKind !== null) span.attribute("error.type", result.errorKind)
    }
    s.completed.push(it)
    poke(s.wake.record)
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
    if (s.stopping) return
    const at = nowMs()
    for (const [origin, queue] of s.queues) {
      while (queue.length > 0 && s.sendingTotal < o.concurrency && (s.sending.get(origin) ?? 0) < o.perOrigin) {
        const it = queue.shift()!
        // Never start an attempt that might outlive its lease: give it back instead.
        if (it.persisted && at > it.leaseUntil - o.timeoutMs - 5_000) {
          add(s.open, origin, -1)
          handBack(s, it)
          continue
        }
        it.state = "sending"
        add(s.sending, origin, 1)
        s.sendingTotal++
        const abort = new AbortController()
        const running = (env.runTraced === null ? attempt(it, abort.signal) : tracedAttempt(it, abort.signal)).finally(
          () => {
            add(s.sending, origin, -1)
            add(s.open, origin, -1)
            s.sendingTotal--
            s.inFlight.delete(running)
            s.stats.inFlight = s.sendingTotal
            if (s.claimWaiting) poke(s.wake.claim) // room in this origin's queue
            pump()
          }
        )
        s.inFlight.set(running, abort)
      }
      if (queue.length === 0) s.queues.delete(origin)
    }
    s.stats.inFlight = s.sendingTotal
  }
  return pump
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
