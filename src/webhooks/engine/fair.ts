// Fair sending: which waiting delivery gets the next send slot. Deliveries wait in flows, one
// per destination (endpoint or subscription), grouped by company. Slots go round robin: a
// company at a time, and within it a flow at a time (deficit round robin with a quantum of
// one delivery, every delivery costing the same), skipping a flow that may not start now:
// its destination at its limit, its receiver origin at its limit (one at a time while the
// origin is unproven or failing, see health.ts), or its rate not yet due. A company above
// `minimum` slots may only take one while `reserve` slots stay free for the others, so a
// company whose receivers hang cannot hold every slot, and a company arriving finds one at
// once. docs/design.md, "Fair sending", says why.
//
// Plain data and synchronous calls: this is the send path's hot loop (one call per attempt).

export type FairLimits = {
  /** Send slots of the process. */
  readonly concurrency: number
  /** At most this many of a destination's deliveries on the wire. */
  readonly perFlow: number
  /** Slots a company above `minimum` leaves free for the others. */
  readonly reserve: number
  /** Slots any company may take, reserve or not. */
  readonly minimum: number
}

/** Where a delivery waits: its company, its destination (the flow) and its receiver origin. */
export type Lane = { readonly company: string; readonly flow: string; readonly origin: string }

type Origin = { inFlight: number }

type Flow<T> = {
  readonly key: string
  readonly company: Company<T>
  readonly origin: string
  readonly queue: Array<T>
  inFlight: number
  /** ms between starts (its rate, this process's share of it); 0: no rate. */
  intervalMs: number
  /** The next start may not be before this (the engine's clock). */
  nextStartMs: number
  /** In its company's ring (it has deliveries waiting). */
  ringed: boolean
}

type Company<T> = {
  readonly key: string
  /** Flows with deliveries waiting, served round robin from `cursor`. */
  readonly flows: Array<Flow<T>>
  cursor: number
  inFlight: number
  queued: number
  ringed: boolean
  /** Flows remembered for it: it is forgotten with the last. */
  members: number
}

/** Slots a company above its minimum leaves free: an eighth of them (8 of 64), at least one. */
export const fairLimits = (concurrency: number, perFlow: number): FairLimits => {
  const reserve = Math.max(1, Math.floor(concurrency / 8))
  return { concurrency, perFlow, reserve, minimum: Math.max(1, Math.floor(reserve / 2)) }
}

export type Scheduler<T> = ReturnType<typeof makeScheduler<T>>

/**
 * `originLimit`: deliveries to a receiver origin on the wire at most, now (it may change
 * between calls: health).
 */
export const makeScheduler = <T>(limits: FairLimits, originLimit: (origin: string) => number) => {
  const companies = new Map<string, Company<T>>()
  const flows = new Map<string, Flow<T>>()
  const origins = new Map<string, Origin>()
  /** Companies with deliveries waiting, served round robin from `cursor`. */
  const ring: Array<Company<T>> = []
  let cursor = 0
  /** Each waiting or sending item's flow. */
  const flowOf = new Map<T, Flow<T>>()
  let sending = 0
  let queued = 0
  /** The earliest time a flow held back by its rate may start (for the caller's timer). */
  let wakeAtMs = Number.POSITIVE_INFINITY

  const companyOf = (key: string): Company<T> => {
    let c = companies.get(key)
    if (!c) companies.set(key, (c = { key, flows: [], cursor: 0, inFlight: 0, queued: 0, ringed: false, members: 0 }))
    return c
  }
  const flowFor = (lane: Lane): Flow<T> => {
    let f = flows.get(lane.flow)
    if (!f) {
      f = {
        key: lane.flow,
        company: companyOf(lane.company),
        origin: lane.origin,
        queue: [],
        inFlight: 0,
        intervalMs: 0,
        nextStartMs: Number.NEGATIVE_INFINITY,
        ringed: false
      }
      flows.set(lane.flow, f)
      f.company.members++
    }
    return f
  }
  const originOf = (key: string): Origin => {
    let o = origins.get(key)
    if (!o) origins.set(key, (o = { inFlight: 0 }))
    return o
  }

  const ringFlow = (f: Flow<T>) => {
    if (!f.ringed) {
      f.ringed = true
      f.company.flows.push(f)
    }
    const c = f.company
    if (!c.ringed) {
      c.ringed = true
      ring.push(c)
    }
  }
  const unringFlow = (f: Flow<T>) => {
    if (!f.ringed) return
    f.ringed = false
    const c = f.company
    const i = c.flows.indexOf(f)
    c.flows.splice(i, 1)
    if (c.cursor > i) c.cursor--
    if (c.flows.length === 0 && c.ringed) {
      c.ringed = false
      const j = ring.indexOf(c)
      ring.splice(j, 1)
      if (cursor > j) cursor--
    }
  }
  /** Forgets a flow, its company and its origin once nothing of them is left to remember. */
  const tidy = (f: Flow<T>, nowMs: number) => {
    if (f.queue.length > 0 || f.inFlight > 0 || f.nextStartMs > nowMs) return
    flows.delete(f.key)
    const c = f.company
    if (--c.members === 0) companies.delete(c.key)
    const o = origins.get(f.origin)
    if (o && o.inFlight === 0) origins.delete(f.origin)
  }

  const add = (item: T, lane: Lane, front: boolean, intervalMs: number) => {
    const f = flowFor(lane)
    f.intervalMs = intervalMs
    if (front) f.queue.unshift(item)
    else f.queue.push(item)
    flowOf.set(item, f)
    f.company.queued++
    queued++
    ringFlow(f)
  }

  /** A flow may start a delivery now: room for its destination, its origin, and its rate due. */
  const startable = (f: Flow<T>, nowMs: number): boolean => {
    if (f.inFlight >= limits.perFlow) return false
    if ((origins.get(f.origin)?.inFlight ?? 0) >= originLimit(f.origin)) return false
    if (f.nextStartMs > nowMs) {
      if (f.nextStartMs < wakeAtMs) wakeAtMs = f.nextStartMs
      return false
    }
    return true
  }

  const companyMay = (c: Company<T>): boolean =>
    c.inFlight < limits.minimum || sending < limits.concurrency - limits.reserve

  /** The company's next flow that may start, round robin from its cursor. */
  const pickFlow = (c: Company<T>, nowMs: number): Flow<T> | null => {
    const n = c.flows.length
    for (let k = 0; k < n; k++) {
      const i = (c.cursor + k) % n
      const f = c.flows[i]!
      if (startable(f, nowMs)) {
        c.cursor = i + 1
        return f
      }
    }
    return null
  }

  const remove = (item: T): Flow<T> | undefined => {
    const f = flowOf.get(item)
    if (!f) return undefined
    const i = f.queue.indexOf(item)
    if (i < 0) return undefined
    f.queue.splice(i, 1)
    flowOf.delete(item)
    f.company.queued--
    queued--
    if (f.queue.length === 0) unringFlow(f)
    return f
  }

  /** Forgets what is idle and remembers nothing (a rate's next start passed). */
  const sweep = (nowMs: number) => {
    for (const f of [...flows.values()]) tidy(f, nowMs)
  }

  return {
    /** Queues an item at the back of its flow; `intervalMs`: its destination's ms between starts (0: none). */
    enqueue: (item: T, lane: Lane, intervalMs = 0) => add(item, lane, false, intervalMs),
    /** Queues an item at the front of its flow (a probe, or one put back). */
    enqueueFront: (item: T, lane: Lane, intervalMs = 0) => add(item, lane, true, intervalMs),

    /**
     * The next item to start now, its slot taken; null when no slot is free or nothing may
     * start. Companies take turns, and flows within each.
     */
    next: (nowMs: number): T | null => {
      if (sending >= limits.concurrency) return null
      for (let visited = 0, n = ring.length; visited < n && ring.length > 0; visited++) {
        if (cursor >= ring.length) cursor = 0
        const c = ring[cursor]!
        const f = companyMay(c) ? pickFlow(c, nowMs) : null
        if (f === null) {
          cursor++
          continue
        }
        const item = f.queue.shift()!
        f.company.queued--
        queued--
        f.inFlight++
        c.inFlight++
        originOf(f.origin).inFlight++
        sending++
        if (f.intervalMs > 0) f.nextStartMs = Math.max(nowMs, f.nextStartMs) + f.intervalMs
        if (f.queue.length === 0) unringFlow(f)
        // The next turn is the next company's (unless this one left the ring: it is already there).
        if (ring[cursor] === c) cursor++
        return item
      }
      return null
    },

    /** An item started by `next` is off the wire: its slot is free. */
    done: (item: T, nowMs: number) => {
      const f = flowOf.get(item)
      if (!f) return
      flowOf.delete(item)
      f.inFlight--
      f.company.inFlight--
      const o = origins.get(f.origin)
      if (o) o.inFlight--
      sending--
      tidy(f, nowMs)
    },

    /** Takes a waiting item out of its queue; false if it was not waiting. */
    remove: (item: T, nowMs: number): boolean => {
      const f = remove(item)
      if (f) tidy(f, nowMs)
      return f !== undefined
    },
    sweep,

    /** Takes every waiting item `which` picks out of the queues. */
    take: (which: (item: T) => boolean): Array<T> => {
      const taken: Array<T> = []
      for (const f of [...flows.values()]) for (const it of f.queue) if (which(it)) taken.push(it)
      for (const it of taken) remove(it)
      return taken
    },

    /** A waiting item is in the queue (not started). */
    waiting: (item: T): boolean => {
      return flowOf.get(item)?.queue.includes(item) === true
    },

    /** Deliveries of a destination queued or sending here. */
    openOf: (flow: string): number => {
      const f = flows.get(flow)
      return f ? f.queue.length + f.inFlight : 0
    },
    /** Deliveries of a company queued or sending here. */
    openOfCompany: (company: string): number => {
      const c = companies.get(company)
      return c ? c.queued + c.inFlight : 0
    },
    /** Per destination with any: deliveries queued or sending. */
    openByFlow: (): Map<string, number> => {
      const out = new Map<string, number>()
      for (const f of flows.values()) {
        const n = f.queue.length + f.inFlight
        if (n > 0) out.set(f.key, n)
      }
      return out
    },
    /** Per origin with any: deliveries queued or sending. */
    openByOrigin: (): Map<string, number> => {
      const out = new Map<string, number>()
      for (const f of flows.values()) {
        const n = f.queue.length + f.inFlight
        if (n > 0) out.set(f.origin, (out.get(f.origin) ?? 0) + n)
      }
      return out
    },
    sending: () => sending,
    queued: () => queued,
    /** Slots a company holds. */
    inFlightOf: (company: string): number => companies.get(company)?.inFlight ?? 0,
    /** When a flow held back by its rate may start next (Infinity: none is); reset by each call. */
    takeWakeAt: (): number => {
      const w = wakeAtMs
      wakeAtMs = Number.POSITIVE_INFINITY
      return w
    },
    /** Flows remembered (tests: nothing grows without bound). */
    size: () => ({ flows: flows.size, companies: companies.size, origins: origins.size })
  }
}
