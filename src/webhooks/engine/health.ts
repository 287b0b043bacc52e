// Receivers' health as this process sees it, per origin (host:port): whether the origin has
// answered since its last timeout or connection failure, and how long its attempts take.
// An origin that has not (new, or failing) gets one attempt at a time, as a probe of sorts:
// a receiver that hangs then holds one send slot, not eight, and a name that never resolves
// costs one slot and its deadline. Its first answer opens it to the full per-origin limit.
// How many of a destination's deliveries this process keeps in memory follows from the same
// figures: about what it can send before `writeAfterMs`; the rest is written as rows at once.
import type { SendErrorKind } from "../net/sender.ts"

/** Failures that hold a slot until they end and say nothing came back: what the circuits count too. */
export const isUnanswered = (kind: SendErrorKind | string | null): boolean =>
  kind === "timeout" || kind === "connection"

type OriginHealth = { answered: boolean; avgMs: number }

export type HealthLimits = {
  readonly perOrigin: number
  readonly maxHeld: number
  readonly writeAfterMs: number
  readonly queueRounds: number
}

const MAX_ORIGINS = 10_000

/**
 * Deliveries of a destination held in memory while its origin has not answered yet: a
 * receiver that turns out to hang keeps two, not a queue's worth, out of everyone's memory.
 * For its first UNKNOWN_GRACE_MS it may keep a queue's worth (a fresh engine's first read of a
 * backlog goes to healthy receivers in memory, as before, not through rows).
 */
export const UNKNOWN_CAP = 2
export const UNKNOWN_GRACE_MS = 200

export const makeHealth = (limits: HealthLimits, nowMs: () => number = () => performance.now()) => {
  const origins = new Map<string, OriginHealth>()
  /** Origins not heard from yet: when their first attempt started. */
  const firstStart = new Map<string, number>()

  /** Attempts to the origin on the wire at most, now. */
  const limit = (origin: string): number => (origins.get(origin)?.answered ? limits.perOrigin : 1)

  return {
    limit,

    /** An attempt starts. */
    started: (origin: string) => {
      if (origins.has(origin) || firstStart.has(origin)) return
      if (firstStart.size >= MAX_ORIGINS) firstStart.clear()
      firstStart.set(origin, nowMs())
    },

    /** An attempt ended: `status` when the receiver answered at all. */
    observe: (origin: string, status: number | null, kind: SendErrorKind | string | null, durationMs: number) => {
      let h = origins.get(origin)
      if (!h) {
        firstStart.delete(origin)
        if (origins.size >= MAX_ORIGINS) origins.clear()
        origins.set(origin, (h = { answered: false, avgMs: durationMs }))
      }
      h.avgMs = h.avgMs * 0.8 + durationMs * 0.2
      if (status !== null) h.answered = true
      else if (isUnanswered(kind)) {
        h.answered = false
        // A timeout says at least this much about the next attempt.
        h.avgMs = Math.max(h.avgMs, durationMs)
      }
    },

    /**
     * How many of a destination's deliveries this process holds (queued or sending): what its
     * origin's limit lets it send within `writeAfterMs` at the origin's pace, at least that
     * limit; an origin not heard from yet, UNKNOWN_CAP (the one sending and the next) once its
     * first attempt is older than UNKNOWN_GRACE_MS, a queue's worth before (`grace`: fan-out's
     * reads; claim takes no more than UNKNOWN_CAP of a receiver it has not heard from). A rate
     * (this process's share, per second) bounds it too.
     */
    capOf: (origin: string, ratePerSecond: number | null, grace = true): number => {
      const h = origins.get(origin)
      const l = limit(origin)
      let cap: number
      if (h) cap = Math.max(l, Math.min(limits.maxHeld, Math.ceil((limits.writeAfterMs * l) / Math.max(1, h.avgMs))))
      else {
        const first = firstStart.get(origin)
        cap =
          grace && (first === undefined || nowMs() - first < UNKNOWN_GRACE_MS)
            ? limits.queueRounds * limits.perOrigin
            : UNKNOWN_CAP
      }
      if (ratePerSecond !== null)
        cap = Math.min(cap, Math.max(1, Math.ceil((ratePerSecond * limits.writeAfterMs) / 1000)))
      return cap
    },

    /** Not heard from yet. */
    unknown: (origin: string): boolean => !origins.has(origin),

    /** Heard from, and its last attempt got no answer (timed out or refused). */
    failing: (origin: string): boolean => {
      const h = origins.get(origin)
      return h !== undefined && !h.answered
    },

    /** Tests: what is known of an origin. */
    of: (origin: string): Readonly<OriginHealth> | undefined => origins.get(origin)
  }
}

export type Health = ReturnType<typeof makeHealth>
