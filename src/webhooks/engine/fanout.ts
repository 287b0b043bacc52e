// Fan-out: the next events of this process's partitions, each with its destinations, straight
// to the send queues as deliveries with no row yet (record writes them once answered).
import { Effect } from "effect"
import { annotateFanout, withFanoutSpan } from "../../platform/tracing.ts"
import { deliveryId } from "./ids.ts"
import { urlOrigin } from "../net/origin.ts"
import { PARTS, comparePos, maxPos, type Pos } from "./positions.ts"
import { destinationsOf, readFanout } from "./fanout-queries.ts"
import type { Claimed } from "./item.ts"
import type { DeliveryQueryFailed } from "./errors.ts"
import { db, survive, waitFor, type EngineEnv } from "./runtime.ts"
import type { Pump } from "./send.ts"
import { enqueue, handBack, poke, type EngineState, type Entry, type Item, type Part } from "./state.ts"

const NO_SECRET = Buffer.alloc(0)

export const makeFanout = (env: EngineEnv, s: EngineState, pump: Pump) => {
  const { sql, o, maxHeld, tracing } = env
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
    let queued = 0
    for (const n of s.open.values()) queued += n
    const room = maxHeld - queued
    const parts = [...s.owned.values()].filter((p) => !p.draining)
    if (s.stopping || parts.length === 0 || room < maxHeld / 2 || s.held - queued > maxHeld) return "done"
    const after: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
    const recheck: Array<Pos | null> = Array.from({ length: PARTS }, () => null)
    for (const p of parts) {
      after[p.part] = p.read
      recheck[p.part] = p.recheck !== null && comparePos(p.recheck, p.read) > 0 ? p.recheck : null
    }
    const limit = Math.max(1, Math.min(o.fanoutBatch, Math.floor(room / s.targetsPerEvent)))
    const seen = s.generation
    const events = yield* db("fan-out", () => readFanout(sql, { after, recheck, limit }))
    if (events.length === 0) return "done"
    // The round from here on is one span when tracing is on (an empty read makes none).
    const round = Effect.gen(function* () {
      const span = tracing ? yield* Effect.currentSpan.pipe(Effect.orElseSucceed(() => null)) : null
      const missing = { endpoints: new Set<string>(), subscriptions: new Set<string>() }
      for (const ev of events) {
        for (const id of ev.endpoints) if (!s.destinations.has(id)) missing.endpoints.add(id)
        for (const id of ev.subscriptions) if (!s.destinations.has(id)) missing.subscriptions.add(id)
      }
      if (missing.endpoints.size + missing.subscriptions.size > 0) {
        const found = yield* db("fan-out", () =>
          destinationsOf(sql, [...missing.endpoints], [...missing.subscriptions])
        )
        // Read before a change that arrived meanwhile: not kept (what uses them goes back below).
        if (seen === s.generation) {
          if (s.destinations.size >= 10_000) s.destinations.clear()
          for (const [id, d] of found) s.destinations.set(id, { ...d, origin: originOf(d.url) })
        }
      }
      const at = Date.now()
      // A partition lost or given up meanwhile is another process's now, or read again: its
      // events are not taken (its cursor may be being written as the point to resume from).
      const same = (p: Part) => s.owned.get(p.part) === p && !p.draining
      let targets = 0
      const items: Array<Item> = []
      for (const ev of events) {
        const p = parts.find((x) => x.part === ev.part)
        if (!p || !same(p)) continue
        const entry: Entry = { part: p, pos: ev.pos, before: p.read, remaining: 0 }
        p.read = ev.pos
        const add = (endpointId: string | null, subscriptionId: string | null) => {
          const d = s.destinations.get((endpointId ?? subscriptionId)!)
          // Deleted since the read, or read before a change: it goes back (or nowhere).
          if (d === undefined && seen === s.generation) return
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
          s.held++
          items.push({
            c,
            src: { eventId: ev.id, companyId: ev.companyId, entry },
            persisted: false,
            leaseUntil: Number.POSITIVE_INFINITY,
            fannedAt: at,
            state: "queued",
            outcome: null,
            handBack: d === undefined || d.secret === null || seen !== s.generation,
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
      s.stats.events += events.length
      s.stats.created += targets
      if (events.length > 0) s.targetsPerEvent = Math.max(1, targets / events.length)
      for (const it of items) {
        if (it.handBack) handBack(s, it)
        else {
          enqueue(s, it)
          s.unwritten.push(it)
        }
      }
      if (items.length === 0 && events.length > 0) poke(s.wake.record) // move the cursors
      pump()
      if (tracing) yield* annotateFanout({ events: events.length, deliveryIds: items.map((it) => it.c.id) })
      return events.length >= limit ? "more" : "done"
    })
    return yield* tracing ? round.pipe(withFanoutSpan({ eventIds: events.map((ev) => ev.id) })) : round
  })

  const loop = Effect.forever(
    Effect.gen(function* () {
      const step = yield* survive("fan-out")(once)
      if (step === "more") return yield* Effect.yieldNow
      yield* waitFor(s.wake.fanout, o.pollMs)
    })
  )
  return { once, loop }
}
