// The delivery engine. Durability is paid once per delivery: fan-out reads new outbox events
// and their destinations, a first attempt goes straight from there, and its outcome is
// written afterwards as the delivery row itself, many per statement, with the fan-out
// cursor. Only a delivery that failed, or that waits too long in memory, becomes a
// scheduled row with a lease; those are claimed in batches, sent, and recorded like before.
// A delivery's id is a function of (event, destination), so a crash between a send and its
// record sends again under the same id.
//
// Several processes share the work by partitions of the outbox (an event belongs to one of
// 12, by its id): each process fans out and sends the events of the partitions it owns under
// a lease, and they divide the partitions evenly (sql/020). Scheduled rows are claimed by
// any process. Time that drives the schedule comes from Effect's Clock, so tests can run it
// on a TestClock; partition leases are on the database's clock (liveness, not schedule).
import { randomUUID } from "node:crypto"
import { Cause, Clock, Context, Effect, Exit, Fiber, Queue, type Tracer } from "effect"
import type { Sql } from "postgres"
import { annotateFanout, TracingEnabled, withDeliverySpan, withFanoutSpan } from "../platform/tracing.ts"
import { EVENTS_CHANNEL } from "../pipeline/outbox/events.ts"
import type { AllowedNetworks, Lookup } from "./address-guard.ts"
import { deliveryBody } from "./body.ts"
import { DELIVERIES_CHANNEL, DESTINATIONS_CHANNEL, PARTITIONS_CHANNEL, endpointSecretContext, keySecretContext, listenScoped } from "../platform/db/channels.ts"
import { deliveryId } from "./ids.ts"
import {
  PARTS,
  claim,
  comparePos,
  destinationsOf,
  heartbeat,
  leaveFanout,
  maxPos,
  nextDue,
  purgeOld,
  readFanout,
  releaseHeld,
  writeBatch,
  type Claimed,
  type CursorMove,
  type Destination,
  type NewRow,
  type Outcome,
  type OwnedPart,
  type Pos
} from "./queries.ts"
import { delayAfter, type RetrySchedule } from "../domain/retry-schedule.ts"
import { decryptSecret } from "../platform/secrets/secrets-key.ts"
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
  /**
   * A fanned-out delivery still unwritten after this long (a slow or hung receiver) is written:
   * waiting for a send slot, as a row due at once (claimed again when its receiver has room);
   * sending, as a row leased to this process.
   */
  readonly writeAfterMs?: number | undefined
  /** Lease of a fan-out partition (the database's clock); a killed process's partitions are taken after it. */
  readonly partitionLeaseMs?: number | undefined
  /** How often the partition leases are renewed and shared out again. */
  readonly heartbeatMs?: number | undefined
}

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
  maxResponseBytes: 16 * 1024,
  writeAfterMs: 2_000,
  partitionLeaseMs: 10_000,
  heartbeatMs: 1_000
} as const

/** A fan-out partition this process owns. */
type Part = {
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
}

/** An event read by fan-out, until every one of its deliveries is written. */
type Entry = { readonly part: Part; readonly pos: Pos; readonly before: Pos; remaining: number }

/** A delivery in memory. From fan-out it has no row until its outcome (or a hand-back) is written. */
type Item = {
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

/** Writes gather answers for up to GATHER_MS while attempts are in flight, until WRITE_BATCH are in. */
const GATHER_MS = 100
const WRITE_BATCH = 128

const ORIGIN = /^https:\/\/([^/?#]+)/
const NO_SECRET = Buffer.alloc(0)

/** Builds the engine in the current scope; closing the scope shuts it down gracefully. */
export const makeEngine = (options: EngineOptions) =>
  Effect.gen(function* () {
    const o = { ...ENGINE_DEFAULTS, ...defined(options) }
    if (o.leaseMs < 2 * o.timeoutMs + 5_000) {
      return yield* Effect.die(new Error(`delivery lease (${o.leaseMs} ms) must be at least two timeouts (${o.timeoutMs} ms) plus 5 s`))
    }
    if (o.heartbeatMs * 3 > o.partitionLeaseMs) {
      return yield* Effect.die(new Error(`partition lease (${o.partitionLeaseMs} ms) must be at least three heartbeats (${o.heartbeatMs} ms)`))
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
      queued: 0,
      handedBack: 0,
      written: 0,
      switchedOff: 0,
      subscriptionsGone: 0,
      purged: 0,
      partitions: 0
    }

    const fanQ = yield* Queue.sliding<void>(1)
    const dispatchQ = yield* Queue.sliding<void>(1)
    const releaseQ = yield* Queue.sliding<void>(1)
    const writeQ = yield* Queue.sliding<void>(1)
    const heartbeatQ = yield* Queue.sliding<void>(1)
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

    /**
     * Real time, whatever the engine's Clock: partition leases and how long a delivery stays
     * unwritten are about processes and memory, not the schedule (a TestClock leaves them be).
     */
    const realSleep = (ms: number) =>
      Effect.callback<void>((resume) => {
        const t = setTimeout(() => resume(Effect.void), ms)
        t.unref()
        return Effect.sync(() => clearTimeout(t))
      })
    const realWaitFor = (q: Queue.Queue<void>, ms: number) => Effect.raceFirst(Queue.take(q), realSleep(ms))

    // The hot path (one call per attempt) is plain promise code; time still comes from the
    // engine's Clock, read synchronously.
    const clock = yield* Clock.Clock
    const nowMs = () => clock.currentTimeMillisUnsafe()
    // Spans (issue 16.3) only where TracingLive installed a tracer: with tracing off, neither
    // fan-out nor an attempt makes one, and the hot path stays plain promise code.
    const tracing = yield* TracingEnabled
    const runTraced = tracing ? Effect.runPromiseWith(yield* Effect.context<never>()) : null

    // -------------------------------------------------------------------------------------
    // What this process holds. An item counts from fan-out or claim until its last write.

    const owned = new Map<number, Part>()
    const open = new Map<string, number>() // per origin: queued + sending
    const queues = new Map<string, Array<Item>>()
    const sending = new Map<string, number>()
    let held = 0 // queued + sending + waiting to be written
    let sendingTotal = 0
    // As many as QUEUE_ROUNDS queues of every send slot: an origin whose receiver hangs holds
    // no more of them than of the send slots, so others keep going.
    const maxHeld = o.concurrency * QUEUE_ROUNDS
    const maxOpenPerOrigin = o.perOrigin * QUEUE_ROUNDS
    const inFlight = new Map<Promise<void>, AbortController>()
    let unwritten: Array<Item> = [] // fan-out's items in fan-out order, from unwrittenHead on
    let unwrittenHead = 0
    const completed: Array<Item> = [] // outcomes to write, in completion order
    const requests = new Set<Item>() // hand-backs and persists to write
    let stopping = false
    let generation = 0 // bumped when a destination changes: what was read before goes back
    let partEpoch = 0 // bumped when partitions are freed: a heartbeat begun before does not take them back
    let claimWaiting = false // the last claim may have left due rows for lack of room

    const add = (m: Map<string, number>, k: string, d: number) => {
      const n = (m.get(k) ?? 0) + d
      if (n <= 0) m.delete(k)
      else m.set(k, n)
    }
    const origins = new Map<string, string>()
    const originOf = (url: string): string => {
      let origin = origins.get(url)
      if (origin === undefined) {
        origin = ORIGIN.exec(url)?.[1] ?? url
        if (origins.size >= 10_000) origins.clear()
        origins.set(url, origin)
      }
      return origin
    }
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
    // Destinations fan-out sends to, by id: dropped whenever a destination changes (the
    // DESTINATIONS_CHANNEL), like everything read before the change.
    const destinations = new Map<string, Destination & { readonly origin: string }>()

    const toWrite = (it: Item) => {
      if (it.dropped) return
      requests.add(it)
      poke(writeQ)
    }
    const enqueue = (it: Item) => {
      add(open, it.c.origin, 1)
      const q = queues.get(it.c.origin)
      if (q) q.push(it)
      else queues.set(it.c.origin, [it])
    }
    /** Takes an item out of its origin's queue (not started). */
    const dequeue = (it: Item) => {
      const q = queues.get(it.c.origin)
      const i = q?.indexOf(it) ?? -1
      if (i < 0) return
      q!.splice(i, 1)
      if (q!.length === 0) queues.delete(it.c.origin)
      add(open, it.c.origin, -1)
    }

    // -------------------------------------------------------------------------------------
    // Sending

    const attempt = async (it: Item, signal: AbortSignal, span?: Tracer.Span): Promise<void> => {
      const c = it.c
      const started = nowMs()
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
      it.state = "done"
      // Cancelled by shutdown: not an attempt to record; the delivery is handed back.
      if (signal.aborted) {
        it.handBack = true
        return toWrite(it)
      }
      observeAttempt({ ok: result.ok, durationMs: result.durationMs, errorKind: result.errorKind })
      if (it.dropped) return
      it.outcome = decide(c, result, started, nowMs(), options.schedule)
      if (span) {
        span.attribute("delivery.outcome", it.outcome.state)
        if (result.status !== null) span.attribute("http.response.status_code", result.status)
        if (result.errorKind !== null) span.attribute("error.type", result.errorKind)
      }
      completed.push(it)
      poke(writeQ)
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
      return runTraced!(it.span ? Effect.withParentSpan(traced, it.span) : traced)
    }

    /** Starts sends from the origin queues while slots are free. */
    const pump = (): void => {
      if (stopping) return
      const at = nowMs()
      for (const [origin, queue] of queues) {
        while (queue.length > 0 && sendingTotal < o.concurrency && (sending.get(origin) ?? 0) < o.perOrigin) {
          const it = queue.shift()!
          // Never start an attempt that might outlive its lease: give it back instead.
          if (it.persisted && at > it.leaseUntil - o.timeoutMs - 5_000) {
            add(open, origin, -1)
            it.state = "done"
            it.handBack = true
            toWrite(it)
            continue
          }
          it.state = "sending"
          add(sending, origin, 1)
          sendingTotal++
          const abort = new AbortController()
          const running = (runTraced === null ? attempt(it, abort.signal) : tracedAttempt(it, abort.signal)).finally(() => {
            add(sending, origin, -1)
            add(open, origin, -1)
            sendingTotal--
            inFlight.delete(running)
            stats.inFlight = sendingTotal
            if (claimWaiting) poke(dispatchQ) // room in this origin's queue
            pump()
          })
          inFlight.set(running, abort)
        }
        if (queue.length === 0) queues.delete(origin)
      }
      stats.inFlight = sendingTotal
    }

    // A destination changed (DESTINATIONS_CHANNEL): what waits for a send slot was read before
    // the change, with the old address, secret, payload or eligibility. It goes back as rows
    // due at once, and the next claim reads them as the destination now stands (or holds
    // them). A claim or fan-out that was running when the change arrived hands its rows back too.
    const destinationsChanged = () => {
      generation++
      destinations.clear()
      for (const queue of queues.values()) {
        for (const it of queue) {
          add(open, it.c.origin, -1)
          it.state = "done"
          it.handBack = true
          toWrite(it)
        }
      }
      queues.clear()
    }

    // -------------------------------------------------------------------------------------
    // Partitions: taken and renewed by the heartbeat; given up when the share shrinks.

    const newPart = (p: OwnedPart): Part => ({
      part: p.part,
      read: p.cursor,
      durable: p.cursor,
      recheck: comparePos(p.recorded, p.cursor) > 0 ? p.recorded : null,
      recorded: p.recorded,
      outstanding: [],
      draining: false
    })

    /** Another process owns the partition now: it reads its unwritten events again. */
    const lose = (p: Part) => {
      if (owned.get(p.part) !== p) return
      owned.delete(p.part)
      for (const queue of queues.values()) {
        for (const it of [...queue]) {
          if (it.src?.entry.part !== p || it.persisted) continue
          dequeue(it)
          it.state = "done"
          it.dropped = true
          held--
        }
      }
      stats.partitions = owned.size
    }

    const heartbeatOnce = Effect.gen(function* () {
      if (stopping) return
      const epoch = partEpoch
      const r = yield* db(() => heartbeat(sql, owner, o.partitionLeaseMs))
      const mine = new Set(r.owned.map((p) => p.part))
      for (const p of [...owned.values()]) if (!mine.has(p.part)) lose(p)
      let taken = false
      for (const p of r.owned) {
        // Freed by a write meanwhile: the database no longer says so.
        if (!owned.has(p.part) && epoch === partEpoch) {
          owned.set(p.part, newPart(p))
          taken = true
        }
      }
      // Keep `share` partitions: give up the highest-numbered extras, or keep ones being given up.
      const parts = [...owned.values()].sort((a, b) => a.part - b.part)
      parts.forEach((p, i) => {
        const extra = i >= r.share
        if (extra && !p.draining) poke(writeQ)
        p.draining = extra
      })
      stats.partitions = owned.size
      if (taken) poke(fanQ)
    })
    const heartbeatLoop = Effect.forever(
      Effect.gen(function* () {
        yield* survive("heartbeat")(heartbeatOnce)
        yield* realWaitFor(heartbeatQ, o.heartbeatMs)
      })
    )

    // -------------------------------------------------------------------------------------
    // Fan-out: the next events of this process's partitions, straight to the send queues.

    // Deliveries per event in the last read, to size the next one; a first read assumes many,
    // so that it does not queue more than can be sent before writeAfterMs.
    let targetsPerEvent = 8
    const fanoutOnce: Effect.Effect<"more" | "done", Error> = Effect.gen(function* () {
      // Read in batches: with half of the queues still to send, the slots stay busy while the
      // next read is under way. Answers waiting to be written count apart, up to as many.
      let queued = 0
      for (const n of open.values()) queued += n
      const room = maxHeld - queued
      const parts = [...owned.values()].filter((p) => !p.draining)
      if (stopping || parts.length === 0 || room < maxHeld / 2 || held - queued > maxHeld) return "done"
      const after: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
      const recheck: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
      for (const p of parts) {
        after[p.part] = p.read
        recheck[p.part] = p.recheck !== null && comparePos(p.recheck, p.read) > 0 ? p.recheck : null
      }
      const limit = Math.max(1, Math.min(o.fanoutBatch, Math.floor(room / targetsPerEvent)))
      const seen = generation
      const events = yield* db(() => readFanout(sql, { after, recheck, limit }))
      if (events.length === 0) return "done"
      // The round from here on is one span when tracing is on (an empty read makes none).
      const round = Effect.gen(function* () {
        const span = tracing ? yield* Effect.currentSpan.pipe(Effect.orElseSucceed(() => null)) : null
        const missing = { endpoints: new Set<string>(), subscriptions: new Set<string>() }
        for (const ev of events) {
          for (const id of ev.endpoints) if (!destinations.has(id)) missing.endpoints.add(id)
          for (const id of ev.subscriptions) if (!destinations.has(id)) missing.subscriptions.add(id)
        }
        if (missing.endpoints.size + missing.subscriptions.size > 0) {
          const found = yield* db(() => destinationsOf(sql, [...missing.endpoints], [...missing.subscriptions]))
          // Read before a change that arrived meanwhile: not kept (what uses them goes back below).
          if (seen === generation) {
            if (destinations.size >= 10_000) destinations.clear()
            for (const [id, d] of found) destinations.set(id, { ...d, origin: originOf(d.url) })
          }
        }
        const at = Date.now()
        // A partition lost or given up meanwhile is another process's now, or read again.
        const same = (p: Part) => owned.get(p.part) === p
        let targets = 0
        const items: Array<Item> = []
        for (const ev of events) {
          const p = parts.find((x) => x.part === ev.part)
          if (!p || !same(p)) continue
          const entry: Entry = { part: p, pos: ev.pos, before: p.read, remaining: 0 }
          p.read = ev.pos
          const add = (endpointId: string | null, subscriptionId: string | null) => {
            const d = destinations.get((endpointId ?? subscriptionId)!)
            // Deleted since the read, or read before a change: it goes back (or nowhere).
            if (d === undefined && seen === generation) return
            entry.remaining++
            targets++
            const c: Claimed = {
              id: deliveryId(ev.id, endpointId, subscriptionId),
              eventId: ev.id,
              attempts: 0,
              manual: false,
              event: ev.event,
              endpointId,
              subscriptionId,
              keyId: d?.keyId ?? null,
              url: d?.url ?? "",
              secret: d?.secret ?? NO_SECRET,
              previousSecret: d?.previousSecret != null && d.previousSecretUntil > at ? d.previousSecret : null,
              origin: d?.origin ?? "",
              eventCreatedAt: ev.createdAt,
              payload: ev.payload
            }
            held++
            items.push({
              c,
              src: { eventId: ev.id, companyId: ev.companyId, entry },
              persisted: false,
              leaseUntil: Number.POSITIVE_INFINITY,
              fannedAt: at,
              state: "queued",
              outcome: null,
              handBack: d === undefined || d.secret === null || seen !== generation,
              persist: false,
              dropped: false,
              span
            })
          }
          for (const id of ev.endpoints) add(id, null)
          for (const id of ev.subscriptions) add(null, id)
          if (entry.remaining > 0) p.outstanding.push(entry)
        }
        // The scan covered every event of the partitions read, up to the last one returned.
        const last = events.at(-1)?.pos
        if (last) for (const p of parts) if (same(p)) p.read = maxPos(p.read, last)
        stats.events += events.length
        stats.created += targets
        if (events.length > 0) targetsPerEvent = Math.max(1, targets / events.length)
        for (const it of items) {
          if (it.handBack) {
            it.state = "done"
            toWrite(it)
          } else {
            enqueue(it)
            unwritten.push(it)
          }
        }
        if (items.length === 0 && events.length > 0) poke(writeQ) // move the cursors
        pump()
        if (tracing) yield* annotateFanout({ events: events.length, deliveryIds: items.map((it) => it.c.id) })
        return events.length >= limit ? "more" : "done"
      })
      return yield* tracing ? round.pipe(withFanoutSpan({ eventIds: events.map((ev) => ev.id) })) : round
    })
    const fanoutLoop = Effect.forever(
      Effect.gen(function* () {
        const step = yield* survive("fan-out")(fanoutOnce)
        if (step === "more") return yield* Effect.yieldNow
        yield* waitFor(fanQ, o.pollMs)
      })
    )

    // A delivery fanned out and still unwritten after writeAfterMs (a slow or hung receiver)
    // is written, so the cursor can pass its event: still waiting for a slot, it goes back as
    // a row due now (memory is freed for other receivers; a claim takes it again when its
    // receiver has room, as for any scheduled row); already sending, it is written leased to
    // this process, and its outcome updates the row.
    const persistLoop = Effect.forever(
      Effect.gen(function* () {
        yield* realSleep(Math.max(50, o.writeAfterMs / 4))
        const before = Date.now() - o.writeAfterMs
        let any = false
        while (unwrittenHead < unwritten.length && unwritten[unwrittenHead]!.fannedAt <= before) {
          const it = unwritten[unwrittenHead++]!
          if (it.persisted || it.outcome !== null || it.handBack || it.dropped || it.state === "done") continue
          if (it.state === "queued") {
            dequeue(it)
            it.state = "done"
            it.handBack = true
          } else it.persist = true
          requests.add(it)
          any = true
        }
        if (unwrittenHead > 1_024 && unwrittenHead * 2 > unwritten.length) {
          unwritten = unwritten.slice(unwrittenHead)
          unwrittenHead = 0
        }
        if (any) poke(writeQ)
      })
    )

    // -------------------------------------------------------------------------------------
    // Dispatch. A claim leases a batch of due rows (retries, hand-backs, Send Again); each
    // waits in its origin's queue for a send slot, and starts only if its attempt can end
    // within its lease (else it is handed back).

    type Step = "more" | "full" | "idle"
    const dispatchOnce: Effect.Effect<Step, Error> = Effect.gen(function* () {
      const free = maxHeld - held
      // Claim in batches, not for a slot or two.
      claimWaiting = true
      if (stopping || free < Math.min(32, maxHeld / 8)) return "full"
      const at = yield* now
      const saturated = [...open].filter(([, n]) => n >= maxOpenPerOrigin).map(([origin]) => origin)
      // Enough rows to fill what is free; one origin's share stops at its limit, and a
      // saturated origin is not scanned at all, so the next claim moves on to the others.
      const scan = Math.min(free, 256)
      const seen = generation
      const { claimed, scanned } = yield* db(() =>
        claim(sql, { now: at, free, scan, perOrigin: maxOpenPerOrigin, saturated, busy: open, leaseUntil: new Date(at.getTime() + o.leaseMs), owner })
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
          handBack: seen !== generation,
          persist: false,
          dropped: false,
          span: null
        }
        held++
        if (it.handBack) {
          it.state = "done"
          toWrite(it)
        } else enqueue(it)
      }
      pump()
      // Rows may be left for later: room freed by a finished attempt is worth another claim.
      claimWaiting = claimed.length >= free || saturated.length > 0
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
    // Writing: outcomes in completion order, hand-backs, leased rows, and the cursors, in
    // one statement when nothing failed.

    /** Where the partition's cursor can be: before its first event with unwritten deliveries (null: none). */
    const firstUnwritten = (p: Part): Entry | null => p.outstanding.find((e) => e.remaining > 0) ?? null
    /** Drops the events whose deliveries are all written, once that is stored. */
    const prune = (p: Part) => {
      while (p.outstanding.length > 0 && p.outstanding[0]!.remaining <= 0) p.outstanding.shift()
    }

    const writeOnce = (final: boolean) =>
      Effect.gen(function* () {
        const done = completed.splice(0)
        const asked = [...requests]
        requests.clear()
        const at = nowMs()
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
        for (const p of owned.values()) prune(p)
        const written = rowItems.filter((it) => owned.get(it.src!.entry.part.part) === it.src!.entry.part)
        for (const it of written) it.src!.entry.remaining--
        const recorded = new Map<Part, Pos>()
        for (const it of written) {
          const e = it.src!.entry
          recorded.set(e.part, maxPos(recorded.get(e.part) ?? e.part.recorded, e.pos))
        }
        const moves: Array<CursorMove & { readonly p: Part }> = []
        for (const p of owned.values()) {
          const first = firstUnwritten(p)
          const cursor = first?.before ?? p.read
          const release = final || (p.draining && first === null)
          const rec = recorded.get(p) ?? p.recorded
          if (comparePos(cursor, p.durable) > 0 || release || comparePos(rec, p.recorded) > 0) {
            moves.push({ p, part: p.part, cursor, recorded: rec, release })
          }
        }
        const order = done.map((it) => it.outcome!)
        if (rows.length === 0 && leased.length === 0 && handBackIds.length === 0 && moves.length === 0 && order.length === 0) return true
        const result = yield* db(() =>
          writeBatch(sql, { owner, rows, leased, handBack: handBackIds, cursors: moves, order, switchOffAfter: o.switchOffAfter, now: new Date(at) })
        ).pipe(Effect.exit)
        if (Exit.isFailure(result)) {
          for (const it of written) it.src!.entry.remaining++
          completed.unshift(...done)
          for (const it of asked) requests.add(it)
          yield* Effect.logError("delivery results could not be written; retrying", Cause.pretty(result.cause))
          return false
        }
        const r = result.value
        for (const m of moves) {
          if (owned.get(m.part) !== m.p) continue
          if (!r.parts.has(m.part)) {
            lose(m.p) // another process took it meanwhile
            continue
          }
          m.p.durable = m.cursor
          m.p.recorded = m.recorded
          if (m.release) {
            owned.delete(m.part)
            partEpoch++
          }
        }
        stats.partitions = owned.size
        // What is written is no longer this process's to hold, except rows leased to it.
        const finish = (it: Item) => {
          if (it.dropped) return
          it.dropped = true
          held--
        }
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
              dequeue(it)
              it.state = "done"
            }
            finish(it)
          }
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
        // Room for more; rows handed back are due now, and a retry may be due before the claim
        // loop's next look.
        poke(fanQ)
        if (claimWaiting || handBackItems.length > 0 || order.some((x) => x.state === "pending")) poke(dispatchQ)
        return true
      })

    const writerLoop = Effect.forever(
      Effect.gen(function* () {
        yield* Queue.take(writeQ)
        // While answers keep coming, gather them: one statement writes them together (a
        // statement's own cost is that of tens of rows). Nobody waits for the write: the
        // receiver has the delivery already.
        const gatherUntil = Date.now() + GATHER_MS
        while (!stopping && sendingTotal > 0 && completed.length < WRITE_BATCH && Date.now() < gatherUntil) yield* realSleep(5)
        // A write, once begun, finishes: its outcome decides what is held and what is freed.
        const ok = yield* Effect.uninterruptible(writeOnce(false))
        if (!ok) {
          yield* Effect.sleep(1_000)
          poke(writeQ)
        } else if (completed.length > 0 || requests.size > 0) poke(writeQ)
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

    // The first purge comes at a random point of the first period: processes started together
    // do not all scan the tables at once, and a start is not slowed by it.
    const purgeLoop = Effect.sleep(Math.floor(Math.random() * o.purgeEveryMs)).pipe(
      Effect.andThen(
        Effect.forever(
          Effect.gen(function* () {
            const at = yield* now
            const r = yield* survive("purge")(db(() => purgeOld(sql, new Date(at.getTime() - o.retentionMs))))
            if (r && typeof r === "object") stats.purged += r.deliveries
            yield* Effect.sleep(o.purgeEveryMs)
          })
        )
      )
    )

    // -------------------------------------------------------------------------------------
    // Wiring: LISTEN wakes fan-out at commit; the polls above are only a safety net.

    const onEvents = () => poke(fanQ)
    const onDeliveries = () => {
      poke(dispatchQ)
      poke(releaseQ)
    }
    const onPartitions = () => poke(heartbeatQ)
    yield* listenScoped(sql, "", [
      [EVENTS_CHANNEL, onEvents],
      [DELIVERIES_CHANNEL, onDeliveries],
      [DESTINATIONS_CHANNEL, destinationsChanged],
      [PARTITIONS_CHANNEL, onPartitions]
    ])

    const writer = yield* Effect.forkDetach(writerLoop)
    const loops = [
      yield* Effect.forkDetach(heartbeatLoop),
      yield* Effect.forkDetach(fanoutLoop),
      yield* Effect.forkDetach(persistLoop),
      yield* Effect.forkDetach(dispatchLoop),
      yield* Effect.forkDetach(releaseLoop),
      yield* Effect.forkDetach(purgeLoop)
    ]

    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interruptAll(loops)
        // Waiting for a slot: back at once. Attempts in flight get the grace to finish and be
        // written; whatever is still out after it is cancelled and handed back unattempted,
        // due at once for the next engine.
        for (const queue of queues.values()) {
          for (const it of queue) {
            it.state = "done"
            it.handBack = true
            toWrite(it)
          }
        }
        queues.clear()
        open.clear()
        if (inFlight.size > 0) {
          const all = [...inFlight.keys()]
          yield* Effect.promise(() => Promise.all(all)).pipe(Effect.timeoutOption(o.shutdownGraceMs))
        }
        const late = [...inFlight]
        for (const [, abort] of late) abort.abort()
        yield* Effect.promise(() => Promise.all(late.map(([p]) => p)))
        yield* Fiber.interrupt(writer)
        // The last writes free every partition with its cursor where everything is written.
        for (let tries = 0; tries < 3; tries++) {
          if (yield* writeOnce(true)) {
            if (completed.length === 0 && requests.size === 0) break
            tries--
          }
        }
        yield* db(() => leaveFanout(sql, owner)).pipe(Effect.ignore)
      })
    )

    return {
      instanceId: owner,
      wake: Effect.sync(() => {
        poke(fanQ)
        poke(dispatchQ)
        poke(releaseQ)
      }),
      stats: Effect.sync(() => {
        let queued = 0
        for (const q of queues.values()) queued += q.length
        return { ...stats, queued }
      })
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
