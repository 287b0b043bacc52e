// The delivery engine: fans the outbox out into deliveries, claims due deliveries under a
// lease, sends them, records each attempt and schedules the next. All state that matters
// lives in the database (the schedule, leases, the fan-out cursor), so a restart loses
// nothing and several processes can share the work. Time that drives the schedule comes
// from Effect's Clock, so tests can run it on a TestClock.
import { randomUUID } from "node:crypto"
import { Cause, Clock, Context, Effect, Fiber, Queue } from "effect"
import type { Sql } from "postgres"
import { EVENTS_CHANNEL } from "../outbox/events.ts"
import type { AllowedNetworks, Lookup } from "./address-guard.ts"
import { deliveryBody } from "./body.ts"
import { DELIVERIES_CHANNEL, DESTINATIONS_CHANNEL, endpointSecretContext, keySecretContext } from "./channels.ts"
import { claim, fanout, handBack, nextDue, purgeOld, recordOutcomes, releaseHeld, type Claimed, type Outcome } from "./queries.ts"
import { delayAfter, type RetrySchedule } from "./schedule.ts"
import { decryptSecret } from "./secrets.ts"
import { DEFAULT_TIMEOUT_MS, send, type SendOptions, type SendResult } from "./sender.ts"

export type EngineOptions = {
  readonly sql: Sql
  readonly secretsKey: Uint8Array
  readonly schedule: RetrySchedule
  readonly allowed: AllowedNetworks
  readonly lookup?: Lookup | undefined
  readonly ca?: SendOptions["ca"] | undefined
  /** An answer must be complete within this (spec: 10 s). */
  readonly timeoutMs?: number | undefined
  /** Claim lease; at least 2 timeouts + 5 s. An attempt only starts if it can end within its lease. */
  readonly leaseMs?: number | undefined
  /** Attempts in flight in this process, in all. */
  readonly concurrency?: number | undefined
  /** Attempts in flight per receiver origin (scheme://host:port), so one slow receiver cannot take every slot. */
  readonly perOrigin?: number | undefined
  /** Safety poll, in case a notification is lost. */
  readonly pollMs?: number | undefined
  readonly fanoutBatch?: number | undefined
  /** Deliveries in a row that fail every attempt before an endpoint is switched off (spec: 15). */
  readonly switchOffAfter?: number | undefined
  readonly retentionMs?: number | undefined
  readonly purgeEveryMs?: number | undefined
  /** On shutdown, in-flight attempts get this long to finish; the rest are handed back. */
  readonly shutdownGraceMs?: number | undefined
  readonly maxResponseBytes?: number | undefined
}

export type EngineStats = {
  events: number
  created: number
  attempts: number
  succeeded: number
  failed: number
  retried: number
  inFlight: number
  handedBack: number
  switchedOff: number
  subscriptionsGone: number
  purged: number
}

export interface DeliveryEngineShape {
  /** This process's lease owner id. */
  readonly instanceId: string
  /** Looks for new events and due deliveries now, as a notification would. */
  readonly wake: Effect.Effect<void>
  readonly stats: Effect.Effect<EngineStats>
}

export class DeliveryEngine extends Context.Service<DeliveryEngine, DeliveryEngineShape>()("service/DeliveryEngine") {}

/** Told of every recorded attempt (metrics: the latency histogram); a no-op unless provided. */
export type AttemptObservation = { readonly ok: boolean; readonly durationMs: number; readonly errorKind: string | null }
export const AttemptObserver = Context.Reference<(a: AttemptObservation) => void>("service/DeliveryEngine/AttemptObserver", {
  defaultValue: () => () => {}
})

const DAY = 86_400_000
/**
 * An origin may hold this many rounds of its send slots, queued or sending: deep enough that
 * one claim feeds a fast receiver for a while. Behind a slow receiver the queue drains slower
 * than leases run; what would start too late to finish within its lease is handed back.
 */
const QUEUE_ROUNDS = 8
/** Fan-out leases its new deliveries itself when there are at most this many. */
const DIRECT_MAX = 64

export const ENGINE_DEFAULTS = {
  timeoutMs: DEFAULT_TIMEOUT_MS,
  leaseMs: 60_000,
  concurrency: 64,
  perOrigin: 8,
  pollMs: 5_000,
  fanoutBatch: 1_000,
  switchOffAfter: 15,
  retentionMs: 30 * DAY,
  purgeEveryMs: 3_600_000,
  shutdownGraceMs: 11_000,
  maxResponseBytes: 16 * 1024
} as const

type Written = { readonly outcome: Outcome; readonly origin: string }

/** Builds the engine in the current scope; closing the scope shuts it down gracefully. */
export const makeEngine = (options: EngineOptions) =>
  Effect.gen(function* () {
    const o = { ...ENGINE_DEFAULTS, ...defined(options) }
    if (o.leaseMs < 2 * o.timeoutMs + 5_000) {
      return yield* Effect.die(new Error(`delivery lease (${o.leaseMs} ms) must be at least two timeouts (${o.timeoutMs} ms) plus 5 s`))
    }
    const { sql } = options
    const owner = randomUUID()
    const observeAttempt = yield* AttemptObserver
    const stats: EngineStats = {
      events: 0,
      created: 0,
      attempts: 0,
      succeeded: 0,
      failed: 0,
      retried: 0,
      inFlight: 0,
      handedBack: 0,
      switchedOff: 0,
      subscriptionsGone: 0,
      purged: 0
    }

    const fanQ = yield* Queue.sliding<void>(1)
    const dispatchQ = yield* Queue.sliding<void>(1)
    const releaseQ = yield* Queue.sliding<void>(1)
    const results = yield* Queue.unbounded<Written>()
    const poke = (q: Queue.Queue<void>) => void Queue.offerUnsafe(q, undefined)

    const now = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))
    const db = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (e) => (e instanceof Error ? e : new Error(String(e))) })
    /** Waits for a poke or the time limit, whichever comes first; true when poked. */
    const waitFor = (q: Queue.Queue<void>, ms: number) =>
      Queue.take(q).pipe(
        Effect.timeoutOption(Math.max(0, ms)),
        Effect.map((r) => r._tag === "Some")
      )
    const survive = (what: string) => <A, E>(self: Effect.Effect<A, E>) =>
      self.pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause as Cause.Cause<never>)
            : Effect.logWarning(`delivery ${what} failed; retrying in 1 s`, Cause.pretty(cause)).pipe(Effect.andThen(Effect.sleep(1_000)))
        )
      )

    // -------------------------------------------------------------------------------------
    // Fan-out: every new outbox event into deliveries, exactly once (cursor + unique keys).

    const fanoutAll = Effect.gen(function* () {
      for (;;) {
        const at = yield* now
        // A few new deliveries come back leased, straight to the send queues (no claim).
        const directMax = stopping ? 0 : Math.max(0, Math.min(DIRECT_MAX, maxLeased - leasedTotal))
        const seen = generation
        const r = yield* db(() => fanout(sql, o.fanoutBatch, { now: at, directMax, leaseUntil: new Date(at.getTime() + o.leaseMs), owner }))
        stats.events += r.events
        stats.created += r.deliveries
        if (r.direct.length > 0) {
          admitClaimed(r.direct, at.getTime(), seen)
        }
        if (r.deliveries > r.direct.length) poke(dispatchQ)
        if (r.events < o.fanoutBatch) return
      }
    })
    const fanoutLoop = Effect.forever(
      Effect.gen(function* () {
        yield* survive("fan-out")(fanoutAll)
        yield* waitFor(fanQ, o.pollMs)
      })
    )

    // -------------------------------------------------------------------------------------
    // Dispatch. A claim leases a batch; each leased delivery waits in its origin's queue for
    // a send slot, and starts only if its attempt can end within its lease (else it is handed
    // back). Recording is off the send path: a slot frees when the answer is in, and the
    // lease is released when the writer has recorded the attempt.

    const open = new Map<string, number>() // per origin: queued + sending
    const queues = new Map<string, Array<Claimed & { readonly leaseUntil: number }>>()
    const sending = new Map<string, number>()
    let leasedTotal = 0 // queued + sending + waiting to be recorded
    let sendingTotal = 0
    // As many leases as QUEUE_ROUNDS queues of every send slot: an origin whose receiver hangs
    // holds no more of them than of the send slots, so others keep being claimed.
    const maxLeased = o.concurrency * QUEUE_ROUNDS
    const maxOpenPerOrigin = o.perOrigin * QUEUE_ROUNDS
    const inFlight = new Map<Promise<void>, AbortController>()
    const unsent = new Set<string>() // leased and not yet answered: handed back on shutdown
    let stopping = false

    const add = (m: Map<string, number>, k: string, d: number) => {
      const n = (m.get(k) ?? 0) + d
      if (n <= 0) m.delete(k)
      else m.set(k, n)
    }

    // The hot path (one call per attempt) is plain promise code; time still comes from the
    // engine's Clock, read synchronously.
    const clock = yield* Clock.Clock
    const secrets = new Map<string, string>() // decrypted signing secrets, by context and blob
    const secretFor = (c: Claimed, blob: Buffer = c.secret): string => {
      const context = c.endpointId !== null ? endpointSecretContext(c.endpointId) : keySecretContext(c.keyId!)
      const key = `${context}|${blob.toString("base64")}`
      let plain = secrets.get(key)
      if (plain === undefined) {
        plain = decryptSecret(options.secretsKey, blob, context)
        if (secrets.size >= 10_000) secrets.clear()
        secrets.set(key, plain)
      }
      return plain
    }

    const attempt = async (c: Claimed, signal: AbortSignal): Promise<void> => {
      const started = clock.currentTimeMillisUnsafe()
      let result: SendResult
      try {
        const body = deliveryBody({ deliveryId: c.id, event: c.event, createdAt: c.eventCreatedAt, payload: c.payload })
        // A rotated secret's predecessor signs too while its overlap lasts (issue 15.5).
        const previousSecret = c.previousSecret === null ? null : secretFor(c, c.previousSecret)
        result = await send({ url: c.url, secret: secretFor(c), previousSecret }, { deliveryId: c.id, event: c.event, body }, {
          allowed: options.allowed,
          timeoutMs: o.timeoutMs,
          maxResponseBytes: o.maxResponseBytes,
          signal,
          ...(options.lookup ? { lookup: options.lookup } : {}),
          ...(options.ca ? { ca: options.ca } : {})
        })
      } catch (e) {
        result = { ok: false, status: null, error: `internal: ${(e as Error).message}`, errorKind: "internal", durationMs: 0, responseSnippet: "", addresses: [] }
      }
      // Cancelled by shutdown: not an attempt to record; the delivery is handed back.
      if (signal.aborted) return
      unsent.delete(c.id)
      observeAttempt({ ok: result.ok, durationMs: result.durationMs, errorKind: result.errorKind })
      Queue.offerUnsafe(results, { outcome: decide(c, result, started, clock.currentTimeMillisUnsafe(), options.schedule), origin: c.origin })
    }

    /** Deliveries leased to this process at `at`, into their origin queues. */
    const enqueue = (claimed: ReadonlyArray<Claimed>, at: number) => {
      for (const c of claimed) {
        add(open, c.origin, 1)
        leasedTotal++
        unsent.add(c.id)
        const item = { ...c, leaseUntil: at + o.leaseMs }
        const q = queues.get(c.origin)
        if (q) q.push(item)
        else queues.set(c.origin, [item])
      }
    }

    const release = (c: Claimed) => {
      add(open, c.origin, -1)
      leasedTotal--
      unsent.delete(c.id)
    }

    // A destination changed (DESTINATIONS_CHANNEL): what is leased and not yet sending was
    // read before the change, with the old address, secret or eligibility. It goes back, due
    // at once, and the next claim reads it as the destination now stands (or holds it).
    // A claim or fan-out that was running when the change arrived hands its rows back too.
    let generation = 0
    const giveBack = (items: ReadonlyArray<Claimed>) => {
      if (items.length === 0) return
      handBack(sql, items.map((c) => c.id), owner, new Date(clock.currentTimeMillisUnsafe()))
        .catch(() => undefined) // unreturned leases run out, and the rows fall due again
        .finally(() => poke(dispatchQ))
    }
    const destinationsChanged = () => {
      generation++
      const waiting: Array<Claimed> = []
      for (const queue of queues.values()) waiting.push(...queue)
      queues.clear()
      waiting.forEach(release)
      giveBack(waiting)
    }
    /** Claimed rows into the send queues, unless a destination changed since they were read. */
    const admitClaimed = (claimed: ReadonlyArray<Claimed>, at: number, seen: number) => {
      if (seen !== generation) return giveBack(claimed)
      enqueue(claimed, at)
      pump()
    }

    /** Starts sends from the origin queues while slots are free. */
    const pump = (): void => {
      if (stopping) return
      const at = clock.currentTimeMillisUnsafe()
      const stale: Array<Claimed> = []
      for (const [origin, queue] of queues) {
        while (queue.length > 0 && sendingTotal < o.concurrency && (sending.get(origin) ?? 0) < o.perOrigin) {
          const c = queue.shift()!
          // Never start an attempt that might outlive its lease: give it back instead.
          if (at > c.leaseUntil - o.timeoutMs - 5_000) {
            stale.push(c)
            continue
          }
          add(sending, origin, 1)
          sendingTotal++
          const abort = new AbortController()
          const running = attempt(c, abort.signal).finally(() => {
            add(sending, c.origin, -1)
            add(open, c.origin, -1)
            sendingTotal--
            inFlight.delete(running)
            stats.inFlight = sendingTotal
            poke(dispatchQ) // room in this origin's queue
            pump()
          })
          inFlight.set(running, abort)
        }
        if (queue.length === 0) queues.delete(origin)
      }
      if (stale.length > 0) {
        stale.forEach(release)
        handBack(sql, stale.map((c) => c.id), owner, new Date(at)).catch(() => undefined)
        poke(dispatchQ)
      }
      stats.inFlight = sendingTotal
    }

    type Step = "more" | "full" | "idle"
    const dispatchOnce: Effect.Effect<Step, Error> = Effect.gen(function* () {
      const free = maxLeased - leasedTotal
      // Claim in batches, not for a slot or two.
      if (stopping || free < Math.min(32, maxLeased / 8)) return "full"
      const at = yield* now
      const saturated = [...open].filter(([, n]) => n >= maxOpenPerOrigin).map(([origin]) => origin)
      // Enough rows to fill what is free; one origin's share stops at its limit, and a
      // saturated origin is not scanned at all, so the next claim moves on to the others.
      const scan = Math.min(free, 256)
      const seen = generation
      const { claimed, scanned } = yield* db(() =>
        claim(sql, { now: at, free, scan, perOrigin: maxOpenPerOrigin, saturated, busy: open, leaseUntil: new Date(at.getTime() + o.leaseMs), owner })
      )
      admitClaimed(claimed, at.getTime(), seen)
      if (claimed.length >= free) return "full"
      return claimed.length > 0 && scanned >= scan ? "more" : "idle"
    })

    const dispatchLoop = Effect.forever(
      Effect.gen(function* () {
        const step = yield* dispatchOnce.pipe(
          survive("claim"),
          Effect.map((s) => s ?? "idle")
        )
        if (step === "more") return yield* Effect.yieldNow
        if (step === "full") return void (yield* waitFor(dispatchQ, o.pollMs))
        const at = yield* now
        const due = yield* db(() => nextDue(sql, at)).pipe(Effect.orElseSucceed(() => null))
        const wait = due === null ? o.pollMs : Math.min(o.pollMs, due - at.getTime())
        yield* waitFor(dispatchQ, wait)
      })
    )

    // -------------------------------------------------------------------------------------
    // Recording: attempts are written in batches, in completion order.

    const writeBatch = (batch: ReadonlyArray<Written>) =>
      Effect.gen(function* () {
        const outcomes = batch.map((w) => w.outcome)
        const r = yield* db(() => recordOutcomes(sql, { owner, outcomes, switchOffAfter: o.switchOffAfter })).pipe(
          Effect.retry({ times: 3 }),
          Effect.catchCause((cause) =>
            // Unrecorded attempts keep their lease, which runs out; they are then sent again.
            Effect.logError("delivery results could not be recorded", Cause.pretty(cause)).pipe(Effect.as(null))
          )
        )
        if (r) {
          for (const out of outcomes) {
            if (!r.applied.has(out.id)) continue
            stats.attempts++
            if (out.state === "succeeded") stats.succeeded++
            else if (out.state === "failed") stats.failed++
            else stats.retried++
          }
          stats.switchedOff += r.switchedOff.length
          stats.subscriptionsGone += r.deletedSubscriptions.length
          // Issue 16.7: one greppable line per switch-off, with the reason the activity log has.
          if (r.switchedOff.length > 0) {
            const off = yield* db(() =>
              sql<{ id: string; company_id: string; disabled_reason: string | null }[]>`
                select id::text, company_id::text, disabled_reason from service.webhook_endpoints where id = any(${[...r.switchedOff]}::uuid[])`
            ).pipe(Effect.orElseSucceed(() => []))
            const why = new Map(off.map((e) => [e.id, e]))
            for (const id of r.switchedOff) {
              yield* Effect.logWarning("webhook endpoint switched off", { endpointId: id, companyId: why.get(id)?.company_id ?? null, reason: why.get(id)?.disabled_reason ?? null })
            }
          }
          for (const id of r.deletedSubscriptions) yield* Effect.logInfo("subscription deleted: its receiver answered 410", { subscriptionId: id })
        }
        leasedTotal -= batch.length
        poke(dispatchQ)
      }).pipe(Effect.uninterruptible)

    const writerLoop = Effect.forever(
      Effect.gen(function* () {
        const first = yield* Queue.take(results)
        const rest = yield* Queue.clear(results)
        yield* writeBatch([first, ...rest])
      })
    )

    // -------------------------------------------------------------------------------------
    // Housekeeping: release held deliveries whose destination is back; retention.

    const releaseLoop = Effect.forever(
      Effect.gen(function* () {
        const at = yield* now
        const n = yield* survive("release")(db(() => releaseHeld(sql, at)))
        if (typeof n === "number" && n > 0) poke(dispatchQ)
        yield* waitFor(releaseQ, o.pollMs)
      })
    )

    const purgeLoop = Effect.forever(
      Effect.gen(function* () {
        const at = yield* now
        const r = yield* survive("purge")(db(() => purgeOld(sql, new Date(at.getTime() - o.retentionMs))))
        if (r && typeof r === "object") stats.purged += r.deliveries
        yield* Effect.sleep(o.purgeEveryMs)
      })
    )

    // -------------------------------------------------------------------------------------
    // Wiring: LISTEN wakes fan-out at commit; the polls above are only a safety net.

    const onEvents = () => poke(fanQ)
    const onDeliveries = () => {
      poke(dispatchQ)
      poke(releaseQ)
    }
    yield* Effect.acquireRelease(
      Effect.tryPromise(() =>
        Promise.all([
          sql.listen(EVENTS_CHANNEL, onEvents, onEvents),
          sql.listen(DELIVERIES_CHANNEL, onDeliveries, onDeliveries),
          // On (re)connect too: a change made while the listener was down is not missed.
          sql.listen(DESTINATIONS_CHANNEL, destinationsChanged, destinationsChanged)
        ])
      ).pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning("LISTEN failed; relying on the poll", Cause.pretty(cause)).pipe(Effect.as([] as Array<{ unlisten(): Promise<void> }>))
        )
      ),
      (ls) => Effect.promise(() => Promise.all(ls.map((l) => l.unlisten().catch(() => undefined))))
    )

    const writer = yield* Effect.forkDetach(writerLoop)
    const loops = [
      yield* Effect.forkDetach(fanoutLoop),
      yield* Effect.forkDetach(dispatchLoop),
      yield* Effect.forkDetach(releaseLoop),
      yield* Effect.forkDetach(purgeLoop)
    ]

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interruptAll(loops)
        // Leased but not started: back at once. Attempts in flight get the grace to finish
        // and be recorded; whatever is still out after it is cancelled and handed back
        // unattempted, due at once for the next engine.
        queues.clear()
        if (inFlight.size > 0) {
          const all = [...inFlight.keys()]
          yield* Effect.promise(() => Promise.all(all)).pipe(Effect.timeoutOption(o.shutdownGraceMs))
        }
        const late = [...inFlight]
        for (const [, abort] of late) abort.abort()
        yield* Effect.promise(() => Promise.all(late.map(([p]) => p)))
        const unanswered = [...unsent]
        if (unanswered.length > 0) {
          const at = yield* now
          const n = yield* db(() => handBack(sql, unanswered, owner, at)).pipe(Effect.orElseSucceed(() => 0))
          stats.handedBack += n
        }
        yield* Fiber.interrupt(writer)
        const rest = yield* Queue.clear(results)
        if (rest.length > 0) yield* writeBatch(rest)
      })
    )

    return {
      instanceId: owner,
      wake: Effect.sync(() => {
        poke(fanQ)
        poke(dispatchQ)
        poke(releaseQ)
      }),
      stats: Effect.sync(() => ({ ...stats }))
    } satisfies DeliveryEngineShape
  })

/** What an attempt's result means for the delivery. */
export const decide = (c: Claimed, r: SendResult, startedMs: number, finishedMs: number, schedule: RetrySchedule): Outcome => {
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
  if (r.ok) return { ...common, state: "succeeded", nextAt: null, health: c.endpointId !== null ? "reset" : null, gone: false }
  const gone = c.subscriptionId !== null && r.status === 410
  // Send Again of a finished delivery is one attempt: failing, it is finished again.
  const wait = gone || c.manual ? null : delayAfter(schedule, number)
  if (wait !== null) return { ...common, state: "pending", nextAt: new Date(finishedMs + wait), health: null, gone: false }
  // A Send Again that fails again was counted when the delivery first failed.
  return { ...common, state: "failed", nextAt: null, health: c.endpointId !== null && !c.manual ? "fail" : null, gone }
}

const defined = <T extends object>(o: T): Partial<T> =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
