// Failed authentications per client, so that requests with made-up keys cost the database
// little however many come: a token bucket per client (its address, an IPv6 client by its /64:
// platform/http/client-address.ts) of FAILURE_BURST, refilled at FAILURE_PER_MINUTE. A request
// whose credential this process does not know as a key takes a token before it is looked up and
// gives it back if it turns out to be a usable key; without a token it is refused (429) with no
// lookup at all. Taking first, rather than counting failures as they come back, bounds the
// lookups even while many of one client's requests are in flight. Buckets live in a bounded LRU
// (src/platform/lru.ts): a client pushed out starts again with a full bucket, which is what it
// would have had after a minute anyway. Per process, in memory.
import { Lru, stringBytes, type LruStats } from "../../platform/lru.ts"

export interface FailureLimit {
  /** Failures a client may make at once. */
  readonly burst: number
  /** Failures a client may make per minute, once its burst is spent. */
  readonly perMinute: number
}

export const DEFAULT_FAILURE_LIMIT: FailureLimit = { burst: 30, perMinute: 30 }

const MAX_CLIENTS = 20_000
const MAX_BYTES = 4 * 1024 * 1024

interface Bucket {
  tokens: number
  at: number
}

export interface AuthFailures {
  /** Takes a token for a lookup: 0 when the client may go on, else the seconds until it may try again. */
  readonly take: (client: string, now: number) => number
  /** The seconds until the client may try again (0: it may now), taking nothing. */
  readonly wait: (client: string, now: number) => number
  /** Gives back the token a lookup took: the credential was a usable key after all. */
  readonly giveBack: (client: string, now: number) => void
  readonly stats: () => LruStats
}

export const makeAuthFailures = (limit: FailureLimit = DEFAULT_FAILURE_LIMIT): AuthFailures => {
  const perMs = limit.perMinute / 60_000
  const buckets = new Lru<string, Bucket>({
    maxEntries: MAX_CLIENTS,
    maxBytes: MAX_BYTES,
    sizeOf: (client) => stringBytes(client) + 120 // the entry, the bucket, the Map's slot
  })

  const refilled = (bucket: Bucket, now: number) => {
    bucket.tokens = Math.min(limit.burst, bucket.tokens + Math.max(0, now - bucket.at) * perMs)
    bucket.at = now
  }

  const take = (client: string, now: number): number => {
    let bucket = buckets.get(client, now)
    if (bucket === undefined) {
      bucket = { tokens: limit.burst, at: now }
      buckets.set(client, bucket, now)
    } else refilled(bucket, now)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return waitFor(bucket.tokens)
  }

  const waitFor = (tokens: number) => Math.max(1, Math.ceil((1 - tokens) / perMs / 1000))

  const wait = (client: string, now: number): number => {
    const bucket = buckets.peek(client, now)
    if (bucket === undefined) return 0
    const tokens = Math.min(limit.burst, bucket.tokens + Math.max(0, now - bucket.at) * perMs)
    return tokens >= 1 ? 0 : waitFor(tokens)
  }

  const giveBack = (client: string, now: number) => {
    const bucket = buckets.peek(client, now)
    if (bucket === undefined) return
    refilled(bucket, now)
    bucket.tokens = Math.min(limit.burst, bucket.tokens + 1)
  }

  return { take, wait, giveBack, stats: () => buckets.stats() }
}

/**
 * Lookups of credentials this process does not know, in all, whatever their address: each
 * address has its own bucket above, but a flood from many addresses (an IPv6 /48 holds 65,536
 * /64s) would still cost a statement per made-up credential. A token bucket of `perSecond`,
 * holding two seconds' worth; a lookup that found a usable key gives its token back. Addresses
 * that presented a usable key lately are not held to it (`ApiKeys`), so their clients keep
 * working through such a flood; everyone else waits their turn (429, Retry-After).
 */
export interface LookupBudget {
  /** Takes a token: 0 when the lookup may go, else the seconds until one is free. */
  readonly take: (now: number) => number
  /** The seconds until a token is free (0: now), taking nothing; a refusal (not 0) is counted. */
  readonly wait: (now: number) => number
  readonly giveBack: (now: number) => void
  /** Lookups refused for want of a token since the start. */
  readonly refused: () => number
}

export const makeLookupBudget = (perSecond: number): LookupBudget => {
  const burst = perSecond * 2
  const perMs = perSecond / 1000
  const bucket: Bucket = { tokens: burst, at: 0 }
  let refused = 0
  const tokensAt = (now: number) => Math.min(burst, bucket.tokens + Math.max(0, now - bucket.at) * perMs)
  const waitFor = (tokens: number) => Math.max(1, Math.ceil((1 - tokens) / perMs / 1000))
  return {
    take: (now) => {
      bucket.tokens = tokensAt(now)
      bucket.at = now
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1
        return 0
      }
      refused++
      return waitFor(bucket.tokens)
    },
    wait: (now) => {
      const tokens = tokensAt(now)
      if (tokens >= 1) return 0
      refused++
      return waitFor(tokens)
    },
    giveBack: (now) => {
      bucket.tokens = Math.min(burst, tokensAt(now) + 1)
      bucket.at = now
    },
    refused: () => refused
  }
}
