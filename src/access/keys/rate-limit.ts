// The per-key rate limit (120 requests a minute by default: docs/api.md#rate-limit), held across every API process on
// one database. A key's window starts with its first request and lasts the window length;
// PostgreSQL grants the window's requests in small leases (service.rate_limit_lease) that
// a process spends from memory, so most requests cost no database write, and the total
// granted in a window never exceeds the limit. Leases shrink as the window runs low, so at
// most a request or two per process can be left unused at the end of a busy window.
import type postgres from "postgres"
import { rateLimited, type RateLimited } from "../../domain/errors.ts"

export interface RateDecision {
  readonly allowed: boolean
  readonly limit: number
  readonly windowSeconds: number
  /** Requests left in the window (this one counted). */
  readonly remaining: number
  /** Seconds until the window ends (and, when refused, the Retry-After). */
  readonly reset: number
}

interface LeaseState {
  /** Requests this process may still admit in the window. */
  units: number
  /** What the window had left after the last lease (all processes). */
  remaining: number
  /** When the window ends, on this process's clock. */
  windowEnds: number
  pending: Promise<void> | undefined
}

const MAX_LEASE = 1000

/** How many requests to ask for: an eighth of what the window has left, at least one. */
export const leaseSize = (remaining: number) => Math.max(1, Math.min(MAX_LEASE, Math.floor(remaining / 8)))

/** The refusal of a request over the limit, in its one wording. */
export const overLimit = (rate: RateDecision): RateLimited =>
  rateLimited(
    `rate limit exceeded: ${rate.limit} requests per ${rate.windowSeconds} seconds; retry in ${rate.reset} seconds`
  )

export interface RateLimiter {
  /** The decision when this process's lease decides it (the common case), else undefined: ask `take`. */
  readonly spend: (keyId: string) => RateDecision | undefined
  /** The decision, asking the database for a lease when needed. */
  readonly take: (keyId: string) => Promise<RateDecision>
}

/** Leases of `limit` requests per `windowSeconds`, from service.rate_limit_lease on this pool. */
export const makeRateLimiter = (sql: postgres.Sql, limit: number, windowSeconds: number): RateLimiter => {
  const leases = new Map<string, LeaseState>()

  const claim = async (keyId: string, state: LeaseState): Promise<void> => {
    const [row] = await sql<{ granted: number; remaining: number; window_ms: number }[]>`
      select * from service.rate_limit_lease(${keyId}, ${limit}, ${windowSeconds}, ${leaseSize(state.remaining)})`
    const now = Date.now()
    state.units = row!.granted
    state.remaining = row!.remaining
    state.windowEnds = now + row!.window_ms
  }

  const decide = (state: LeaseState, now: number): RateDecision | undefined => {
    if (now >= state.windowEnds) return undefined
    const reset = Math.max(1, Math.ceil((state.windowEnds - now) / 1000))
    if (state.units > 0) {
      state.units--
      return { allowed: true, limit, windowSeconds, remaining: state.remaining + state.units, reset }
    }
    if (state.remaining === 0) return { allowed: false, limit, windowSeconds, remaining: 0, reset }
    return undefined
  }

  const take = async (keyId: string): Promise<RateDecision> => {
    let state = leases.get(keyId)
    if (state === undefined) {
      state = { units: 0, remaining: limit, windowEnds: 0, pending: undefined }
      if (leases.size > 100_000) leases.clear()
      leases.set(keyId, state)
    }
    for (;;) {
      const now = Date.now()
      if (now >= state.windowEnds && state.pending === undefined) {
        // a new window (or none yet): what this process knew no longer holds
        state.units = 0
        state.remaining = limit
      }
      const decision = decide(state, now)
      if (decision !== undefined) return decision
      if (state.pending === undefined) {
        const s = state
        s.pending = claim(keyId, s).finally(() => {
          s.pending = undefined
        })
      }
      await state.pending
      const after = decide(state, Date.now())
      if (after !== undefined) return after
      // granted nothing new but the window has more (another process holds it): ask again
    }
  }

  const spend = (keyId: string): RateDecision | undefined => {
    const state = leases.get(keyId)
    return state === undefined || state.pending !== undefined ? undefined : decide(state, Date.now())
  }

  return { spend, take }
}
