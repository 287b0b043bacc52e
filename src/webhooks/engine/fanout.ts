// Fan-out: the next events of this process's partitions, each with its destinations, straight
// to the send queues as deliveries with no row yet (record writes them once answered). A
// delivery whose destination has no more room in this process (a receiver that is slow,
// hangs, or keeps a rate), or that keeps the order of its record, is written as a row due at
// once instead, for claim: what waits in memory stays what can be sent soon, so another
// company's events are always read. It owns the destinations it read (addresses, secrets,
// rate and ordering, by id, dropped when one changes) and how many deliveries an event makes,
// to size its reads.
import { Effect } from "effect"
import { annotateFanout, withFanoutSpan } from "../../platform/tracing.ts"
import { deliveryId } from "./ids.ts"
import { urlOrigin } from "../net/origin.ts"
import { thinData } from "../net/body.ts"
import { matches } from "../../domain/filters/filter.ts"
import { PARTS, comparePos, type Pos } from "./positions.ts"
import { destinationsOf, readFanout, type Destination } from "./fanout-queries.ts"
import type { DeliveryQueryFailed } from "./errors.ts"
import type { Claimed, Item } from "./item.ts"
import type { Partitions } from "./partitions.ts"
import type { Pending } from "./record.ts"
import { db, survive, waitFor, type EngineEnv, type Wake } from "./runtime.ts"
import type { Sends } from "./send.ts"

const NO_SECRET = Buffer.alloc(0)
/** Cursors moved by reads that found nothing are written on their own at most this often. */
const IDLE_CURSOR_MS = 200

export type FanoutStats = { events: number; created: number }

/** A thin destination's data for a record event ('<resource>:<id>'). */
const thinOf = (ev: { readonly record: string; readonly companyId: string }): string => {
  const cut = ev.record.indexOf(":")
  return thinData(ev.record.slice(0, cut), ev.record.slice(cut + 1), ev.companyId)
}

export const makeFanout = (
  env: EngineEnv,
  wakes: { readonly fanout: Wake; readonly record: Wake },
  partitions: Pick<Partitions, "readable" | "current" | "took" | "track" | "passed">,
  sends: Pick<Sends, "enqueue" | "pump" | "openTotal" | "hasRoom" | "dueFor">,
  pending: Pick<Pending, "held" | "admit" | "watch" | "handBack">
) => {
  const { sql, o, maxHeld, tracing, signals } = env
  /**
   * Destinations fan-out sends to, by id: dropped whenever a destination changes (the
   * DESTINATIONS_CHANNEL), like everything read before the change.
   */
  const destinations = new Map<string, Destination & { readonly origin: string }>()
  /** Deliveries per event in the last read, to size the next one. A first read assumes many, so that it does not queue more than can be sent before writeAfterMs. */
  let targetsPerEvent = 8
  const stats: FanoutStats = { events: 0, created: 0 }
  let idleCursorAt = 0
  const origins = new Map<string, string>()
  const originOf = (url: string): string => {
    let origin = origins.get(url)
    if (origin === undefined) {
      origin = urlOrigin(url)
      if (origins.size >= 10_000) origins.clear()
      origins.set(url, origin)
    }
    return origin
  }

  /** One read of every partition owned: "more" when the read was full (read again at once). */
  const once: Effect.Effect<"more" | "done", DeliveryQueryFailed> = Effect.gen(function* () {
    // Read in batches: with half of the queues still to send, the slots stay busy while the
    // next read is under way. Answers waiting to be written count apart, up to as many.
    const queued = sends.openTotal()
    const room = maxHeld - queued
    const parts = partitions.readable()
    if (signals.stopping || parts.length === 0 || room < maxHeld / 2 || pending.held() - queued > maxHeld) return "done"
    if (!(yield* env.writable)) return "done"
    const after: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
    const recheck: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
    for (const p of parts) {
      after[p.part] = p.read
      recheck[p.part] = p.recheck !== null && comparePos(p.recheck, p.read) > 0 ? p.recheck : null
    }
    const limit = Math.max(1, Math.min(o.fanoutBatch, Math.floor(room / targetsPerEvent)))
    const seen = signals.generation
    const { events, head } = yield* db("fan-out", () => readFanout(sql, { after, recheck, limit }))
    // Fewer than asked: every event of these partitions up to the outbox's head is read. Their
    // cursors may move there even when none was theirs (another process's events), so the
    // slowest cursor keeps up with the outbox (ordering by record waits for it).
    const passHead = (): boolean => {
      if (events.length >= limit || head === null) return false
      let moved = false
      for (const p of parts) {
        if (!partitions.current(p) || comparePos(head, p.read) <= 0) continue
        partitions.passed(p, head)
        moved = true
      }
      return moved
    }
    if (events.length === 0) {
      // A write for these cursors alone, at most every IDLE_CURSOR_MS (the heartbeat writes the rest).
      if (passHead() && Date.now() - idleCursorAt >= IDLE_CURSOR_MS) {
        idleCursorAt = Date.now()
        wakes.record.poke()
      }
      return "done"
    }
    // The round from here on is one span when tracing is on (an empty read makes none).
    const round = Effect.gen(function* () {
      const span = tracing ? yield* Effect.currentSpan.pipe(Effect.orElseSucceed(() => null)) : null
      const missing = { endpoints: new Set<string>(), subscriptions: new Set<string>() }
      for (const ev of events) {
        for (const id of ev.endpoints) if (!destinations.has(id)) missing.endpoints.add(id)
        for (const id of ev.subscriptions) if (!destinations.has(id)) missing.subscriptions.add(id)
      }
      if (missing.endpoints.size + missing.subscriptions.size > 0) {
        const found = yield* db("fan-out", () =>
          destinationsOf(sql, [...missing.endpoints], [...missing.subscriptions])
        )
        // Read before a change that arrived meanwhile: not kept (what uses them goes back below).
        if (seen === signals.generation) {
          if (destinations.size >= 10_000) destinations.clear()
          for (const [id, d] of found) destinations.set(id, { ...d, origin: originOf(d.url) })
        }
      }
      // A destination changed while this round read: its events are read again, so that every
      // delivery is made as its destination now stands (a filter, a payload mode).
      if (seen !== signals.generation) return "more" as const
      const at = Date.now()
      // A partition lost or given up meanwhile is another process's now, or read again: its
      // events are not taken (its cursor may be being written as the point to resume from).
      const same = partitions.current
      let targets = 0
      const items: Array<Item> = []
      for (const ev of events) {
        const p = parts.find((x) => x.part === ev.part)
        if (!p || !same(p)) continue
        const entry = partitions.took(p, ev.pos)
        // The data as sent, parsed once per event for the filters that read it.
        let data: unknown
        const dataOf = () => (data ??= JSON.parse(ev.payload) as unknown)
        const add = (endpointId: string | null, subscriptionId: string | null) => {
          const d = destinations.get((endpointId ?? subscriptionId)!)
          // Deleted since the read, or read before a change: it goes back (or nowhere).
          if (d === undefined && seen === signals.generation) return
          // Filtered out: no delivery at all (docs/events.md#content-filters).
          if (d !== undefined && d.filter !== null && !matches(d.filter, dataOf())) return
          entry.remaining++
          targets++
          const rateLimit = d?.rateLimit ?? null
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
            payload: d?.thin ? thinOf(ev) : ev.payload,
            companyId: ev.companyId,
            rateLimit,
            orderingKey: d?.ordering ? ev.record : null
          }
          pending.admit()
          items.push({
            c,
            src: { eventId: ev.id, companyId: ev.companyId, entry },
            persisted: false,
            leaseUntil: Number.POSITIVE_INFINITY,
            fannedAt: at,
            state: "queued",
            outcome: null,
            // Written as a row due now, for claim: read before a change, an order to keep.
            handBack: d === undefined || d.secret === null || seen !== signals.generation || c.orderingKey !== null,
            persist: false,
            dropped: false,
            span,
            probe: false,
            dueAtMs: null
          })
        }
        for (const id of ev.endpoints) add(id, null)
        for (const id of ev.subscriptions) add(null, id)
        if (entry.remaining > 0) partitions.track(entry)
      }
      // The scan covered every event of the partitions read, up to the last one returned.
      const last = events.at(-1)?.pos
      if (last) for (const p of parts) if (same(p)) partitions.passed(p, last)
      passHead()
      stats.events += events.length
      stats.created += targets
      if (events.length > 0) targetsPerEvent = Math.max(1, targets / events.length)
      for (const it of items) {
        if (it.handBack) pending.handBack(it)
        else if (!sends.hasRoom(it.c)) {
          // No room here for its destination (slow, hung, or at its rate): a row, claimed when there is.
          it.dueAtMs = sends.dueFor(it.c)
          pending.handBack(it)
        } else {
          sends.enqueue(it)
          pending.watch(it)
        }
      }
      if (items.length === 0 && events.length > 0) wakes.record.poke() // move the cursors
      sends.pump()
      if (tracing) yield* annotateFanout({ events: events.length, deliveryIds: items.map((it) => it.c.id) })
      return events.length >= limit ? "more" : "done"
    })
    return yield* tracing ? round.pipe(withFanoutSpan({ eventIds: events.map((ev) => ev.id) })) : round
  })

  // Paced in real time, not the engine's Clock: the gap saves work per commit (a read of the
  // outbox and a cursor move each), it schedules nothing. A pass woken by a commit after a
  // quiet spell starts at once; under a stream of commits each takes what its gap brought.
  let lastPass = Number.NEGATIVE_INFINITY
  const loop = Effect.forever(
    Effect.gen(function* () {
      const rest = o.fanoutGapMs - (performance.now() - lastPass)
      if (rest > 0) yield* Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, rest)))
      lastPass = performance.now()
      const step = yield* survive("fan-out")(once)
      if (step === "more") return yield* Effect.yieldNow
      yield* waitFor(wakes.fanout.queue, o.pollMs)
    })
  )
  return {
    once,
    loop,
    stats,
    /** A destination changed: what was read of the destinations is read again. */
    forgetDestinations: () => destinations.clear()
  }
}
