// The keys service the read API's edges call: who a bearer credential is and whether it may
// make this request now (the key, its allowance spent, its use counted), the key as the
// database has it now, and why a statement's own check refused a key. The HTTP middleware
// (faces/api/auth.ts) only decodes the request and answers what this decides, so everything
// done about a credential before the data is read happens here: the lookup and what it
// remembers (directory.ts), failed authentications per client (auth-failures.ts), the rate
// limit (rate-limit.ts), usage (usage.ts).
import { Context, Effect, Layer } from "effect"
import { rateLimited, type Forbidden, type RateLimited, type Unauthorized } from "../../domain/errors.ts"
import { isResource, type Resource } from "../../domain/resources.ts"
import { ApiSettings } from "../../platform/api-settings.ts"
import { ApiPool } from "../../platform/db/api-pool.ts"
import { Database } from "../../platform/db/Database.ts"
import { clientKey } from "../../platform/http/client-address.ts"
import { Lru, stringBytes, type LruStats } from "../../platform/lru.ts"
import { fingerprintOf } from "./bearer-secrets.ts"
import { makeAuthFailures, makeLookupBudget } from "./auth-failures.ts"
import { currentKeyOf, type CurrentKeyShape } from "./current-key.ts"
import { makeKeyDirectory, type DirectoryStats, type Lookup } from "./directory.ts"
import { checkKey, type RefusedState } from "./key-check.ts"
import { makeRateLimiter, overLimit, type RateDecision } from "./rate-limit.ts"
import { keyRefused, readableBy, refusesCredential, stateRefusal, type KeyEntry, type KeyRefusal } from "./rules.ts"
import { makeUsageRecorder } from "./usage.ts"

/** A request as the edge decoded it: the bearer credential ("" when none was sent), its Host and what it asks for. */
export interface KeyRequest {
  readonly credential: string
  readonly host: string | undefined
  /** The resource it reads, if any. */
  readonly resource: Resource | undefined
  /** It needs the webhooks permission (a key subscribing itself to events). */
  readonly webhooks: boolean
  /** The client's address (platform/http/client-address.ts), for the limit of failed authentications. */
  readonly client: string | undefined
}

/**
 * What may happen to a request: admitted as the key, or refused. `rate` is the key's
 * allowance after this request, for the answer's RateLimit fields: absent when the credential
 * itself was refused (nothing was counted).
 */
export type Admission =
  | { readonly _tag: "Admitted"; readonly key: CurrentKeyShape; readonly rate: RateDecision }
  | {
      readonly _tag: "Refused"
      readonly error: Unauthorized | Forbidden | RateLimited
      /** The key, when the credential was one (the request's log line names it). */
      readonly keyId: string | undefined
      readonly rate: RateDecision | undefined
      /** Seconds to wait, for a 429's Retry-After. */
      readonly retryAfter: number | undefined
    }

/** What the keys service holds in memory and has cost, for tests and operators. */
export interface KeysStats extends DirectoryStats {
  /** Clients with a bucket of failed authentications. */
  readonly clients: LruStats
  /** Admin tokens and sessions accepted lately (their fingerprints). */
  readonly accepted: LruStats
  /** Addresses that presented a usable credential lately (not held to the process's lookup budget). */
  readonly trusted: LruStats
  /** Lookups refused since the start because the process's budget of them was spent. */
  readonly lookupsRefused: number
}

/** A key as the database has it at this moment. */
export interface KeyStanding {
  readonly keyName: string
  readonly expiresAt: Date | null
  readonly webhooks: boolean
  readonly companyName: string
  /** Its scopes whose module is on, in RESOURCES order. */
  readonly readable: ReadonlyArray<Resource>
}

const NO_WEBHOOKS: KeyRefusal = { _tag: "NoWebhooks" }

/** Every client held back while this process looks up its most unknown credentials a second. */
export const tooManyLookups = (perSecond: number, seconds: number): RateLimited =>
  rateLimited(
    `too many requests with credentials this service does not know, from many addresses; it looks up at most ${perSecond} a second; retry in ${seconds} second${seconds === 1 ? "" : "s"}`
  )

/** A client over its limit of failed authentications, in the one wording. */
export const tooManyFailures = (perMinute: number, seconds: number): RateLimited =>
  rateLimited(
    `too many requests with an unknown, revoked or expired API key from this address (at most ${perMinute} a minute); retry in ${seconds} second${seconds === 1 ? "" : "s"}`
  )

export class ApiKeys extends Context.Service<
  ApiKeys,
  {
    /** Who the credential is and whether it may make this request now; counts it against the key's limit. */
    readonly admit: (request: KeyRequest) => Effect.Effect<Admission>
    /** The key as it stands in the database now (one statement), or why it is refused now. */
    readonly standing: (
      key: CurrentKeyShape,
      resource: Resource | undefined
    ) => Effect.Effect<KeyStanding, Unauthorized | Forbidden>
    /** Why a statement's key check refused the key, as it stands now (its state's wording if it is fine again). */
    readonly refusal: (
      key: CurrentKeyShape,
      resource: Resource | undefined,
      state: RefusedState
    ) => Effect.Effect<Unauthorized | Forbidden>
    /**
     * The 429 a request with this credential from this client gets before any lookup, when its
     * client has no failed authentication left and the credential is no key this process knows;
     * decided from memory, taking nothing (the server's door answers it: faces/door.ts).
     */
    readonly atTheDoor: (
      credential: string,
      client: string | undefined
    ) => { readonly error: RateLimited; readonly retryAfter: number } | undefined
    /**
     * Another credential (an admin token, a session cookie) checked for this client, bounded as
     * unknown keys are: `check` runs only when the client has a failed authentication left (it
     * takes one, given back when `accepted` says the credential was good); else nothing runs and
     * the answer is the seconds until the client may try again. A credential accepted in the
     * last 10 minutes is checked whatever its client's allowance, as a remembered key is served:
     * an admin behind the same address as a flood keeps working. `error`: set when the process's
     * budget of lookups held it back rather than the client's own allowance.
     */
    readonly guard: <A, E, R>(
      client: string | undefined,
      credential: string,
      check: Effect.Effect<A, E, R>,
      accepted: (a: A) => boolean
    ) => Effect.Effect<{ readonly checked: A } | { readonly retryAfter: number; readonly error?: RateLimited }, E, R>
    readonly stats: () => KeysStats
  }
>()("service/access/ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function* () {
      const { sql } = yield* ApiPool
      const { sql: main } = yield* Database
      const settings = yield* ApiSettings
      const directory = makeKeyDirectory(sql)
      const limiter = makeRateLimiter(sql, settings.rateLimit, settings.rateWindowSeconds)
      const usage = yield* makeUsageRecorder(main, settings.usageFlushMillis)
      const failureLimit = settings.authFailuresPerMinute
      const failures = makeAuthFailures({ burst: failureLimit, perMinute: failureLimit })
      const lookups = makeLookupBudget(settings.authLookupsPerSecond)
      // Addresses that presented a usable credential in the last 10 minutes: the process's
      // budget of lookups does not hold them back (their own allowance still does).
      const trusted = new Lru<string, true>({
        maxEntries: 20_000,
        maxBytes: 2 * 1024 * 1024,
        sizeOf: (client) => stringBytes(client) + 80,
        ttlMs: 10 * 60_000
      })
      /**
       * A lookup of a credential this process does not know: a token from the client's failed
       * authentications and, unless the client is trusted, one from the process's budget. Held:
       * the seconds to wait (and, when the budget held it, its refusal). Else `usable` gives both
       * tokens back and trusts the client, once the credential turned out good.
       */
      const takeLookup = (
        client: string,
        now: number
      ):
        | { readonly held: { readonly retryAfter: number; readonly error?: RateLimited } }
        | { readonly usable: () => void } => {
        const wait = failures.take(client, now)
        if (wait > 0) return { held: { retryAfter: wait } }
        const wasTrusted = trusted.get(client, now) !== undefined
        const busy = wasTrusted ? 0 : lookups.take(now)
        if (busy > 0) {
          failures.giveBack(client, now)
          return { held: { retryAfter: busy, error: tooManyLookups(settings.authLookupsPerSecond, busy) } }
        }
        return {
          usable: () => {
            const at = Date.now()
            failures.giveBack(client, at)
            if (!wasTrusted) lookups.giveBack(at)
            trusted.set(client, true, at)
          }
        }
      }
      // A flood's answers are made once, not per request (an error captures a stack trace as
      // it is made, the largest cost of a refusal): no key, an unknown one, and the 429 for
      // each wait in seconds (a minute's worth at most, as the bucket refills within it).
      const MISSING_KEY = keyRefused({ _tag: "Missing" })
      const UNKNOWN_KEY = keyRefused({ _tag: "Unknown" })
      const waits = new Map<number, RateLimited>()
      const tooMany = (seconds: number): RateLimited => {
        let e = waits.get(seconds)
        if (e === undefined) {
          e = tooManyFailures(failureLimit, seconds)
          if (waits.size < 120) waits.set(seconds, e)
        }
        return e
      }

      const explained = (keyId: string, host: string | undefined, resource: Resource | undefined) =>
        Effect.promise(() => directory.explain(keyId, host, resource))

      const refusal = (key: CurrentKeyShape, resource: Resource | undefined, state: RefusedState) =>
        Effect.map(explained(key.keyId, key.host, resource), (r) => keyRefused(r ?? stateRefusal(state)))

      const refused = (
        error: Unauthorized | Forbidden | RateLimited,
        keyId: string | undefined,
        rate: RateDecision | undefined
      ): Admission => ({
        _tag: "Refused",
        error,
        keyId,
        rate,
        retryAfter: rate === undefined || rate.allowed ? undefined : rate.reset
      })

      // A key over its limit was resolved from memory and no statement will confirm it, so
      // before answering 429 ask the database whether it is still a key at all: revoking one
      // takes effect on its very next request, which gets 401, however busy it was. One
      // statement per refused request, as a served request costs.
      const overLimitOrGone = (request: KeyRequest, entry: KeyEntry, rate: RateDecision) =>
        Effect.flatMap(
          Effect.promise(() => checkKey(sql, entry.keyId, request.host, request.resource)),
          (now): Effect.Effect<Admission> => {
            if (now.state === "ok" || now.state === "company" || now.state === "module")
              return Effect.succeed(refused(overLimit(rate), entry.keyId, rate))
            const state = now.state
            return Effect.map(explained(entry.keyId, request.host, request.resource), (r) =>
              refused(
                keyRefused(r !== undefined && refusesCredential(r) ? r : stateRefusal(state)),
                entry.keyId,
                undefined
              )
            )
          }
        )

      const decide = (request: KeyRequest, lookup: Lookup, entry: KeyEntry, rate: RateDecision) => {
        if (!rate.allowed) return overLimitOrGone(request, entry, rate)
        if (lookup._tag === "Refused") return Effect.succeed(refused(keyRefused(lookup.refusal), entry.keyId, rate))
        if (request.webhooks && !entry.webhooks)
          return Effect.succeed(refused(keyRefused(NO_WEBHOOKS), entry.keyId, rate))
        return Effect.succeed<Admission>({ _tag: "Admitted", key: currentKeyOf(entry, request.host), rate })
      }

      const held = (error: RateLimited, retryAfter: number): Admission => ({
        _tag: "Refused",
        error,
        keyId: undefined,
        rate: undefined,
        retryAfter
      })

      // Runs on every request: plain combinators, and no statement for a remembered key with a lease in hand.
      const looked = (request: KeyRequest, lookup: Lookup): Effect.Effect<Admission> => {
        if (lookup._tag === "Refused" && refusesCredential(lookup.refusal)) {
          const tag = lookup.refusal._tag
          const error = tag === "Unknown" ? UNKNOWN_KEY : tag === "Missing" ? MISSING_KEY : keyRefused(lookup.refusal)
          return Effect.succeed(refused(error, undefined, undefined))
        }
        const entry = lookup.entry!
        usage.record(entry.keyId)
        const rate = limiter.spend(entry.keyId)
        return rate !== undefined
          ? decide(request, lookup, entry, rate)
          : Effect.flatMap(
              Effect.promise(() => limiter.take(entry.keyId)),
              (rate) => decide(request, lookup, entry, rate)
            )
      }

      // Work before a key is known is bounded (docs/design.md): a remembered key that may be
      // served, or no credential at all, is decided from memory; any other credential first
      // takes a token from its client's bucket of failed authentications (none left: 429, no
      // lookup), which it gives back once it turns out to be a usable key. A key this process
      // remembers never waits on its client's bucket: a real client behind the same address
      // as a flood keeps working, and a revoked or expired key keeps its own 401.
      const admit = (request: KeyRequest): Effect.Effect<Admission> => {
        const known = directory.remembered(request.credential, request.host, request.resource)
        if (known !== undefined && (known._tag === "Ok" || known.refusal._tag === "Missing"))
          return looked(request, known)
        if (directory.knows(request.credential))
          return known !== undefined
            ? looked(request, known)
            : Effect.flatMap(
                Effect.promise(() => directory.resolve(request.credential, request.host, request.resource)),
                (lookup) => looked(request, lookup)
              )
        const taken = takeLookup(clientKey(request.client), Date.now())
        if ("held" in taken) {
          const { retryAfter, error } = taken.held
          return Effect.succeed(held(error ?? tooMany(retryAfter), retryAfter))
        }
        const settle = (a: Admission): Admission => {
          if (!(a._tag === "Refused" && a.error._tag === "Unauthorized")) taken.usable()
          return a
        }
        return known !== undefined
          ? Effect.map(looked(request, known), settle)
          : Effect.flatMap(
              Effect.promise(() => directory.resolve(request.credential, request.host, request.resource)),
              (lookup) => Effect.map(looked(request, lookup), settle)
            )
      }

      const standing = (key: CurrentKeyShape, resource: Resource | undefined) =>
        Effect.flatMap(
          Effect.promise(() => checkKey(sql, key.keyId, key.host, resource)),
          (now): Effect.Effect<KeyStanding, Unauthorized | Forbidden> =>
            now.state !== "ok"
              ? Effect.flatMap(refusal(key, resource, now.state), Effect.fail)
              : Effect.succeed({
                  keyName: now.k_name ?? key.keyName,
                  expiresAt: now.k_expires_at,
                  webhooks: now.k_webhooks === true,
                  companyName: now.c_name ?? key.companyName,
                  readable: readableBy(new Set((now.k_scopes ?? []).filter(isResource)), new Set(now.c_modules ?? []))
                })
        )

      const atTheDoor = (credential: string, client: string | undefined) => {
        if (credential === "" || directory.knows(credential)) return undefined
        const key = clientKey(client)
        const now = Date.now()
        const wait = failures.wait(key, now)
        if (wait > 0) return { error: tooMany(wait), retryAfter: wait }
        if (trusted.peek(key, now) !== undefined) return undefined
        const busy = lookups.wait(now)
        return busy === 0 ? undefined : { error: tooManyLookups(settings.authLookupsPerSecond, busy), retryAfter: busy }
      }

      // Fingerprints (never the credential) of admin tokens and sessions accepted lately.
      const acceptedLately = new Lru<string, true>({
        maxEntries: 10_000,
        maxBytes: 2 * 1024 * 1024,
        sizeOf: (f) => stringBytes(f) + 80,
        ttlMs: 10 * 60_000
      })
      const guard = <A, E, R>(
        client: string | undefined,
        credential: string,
        check: Effect.Effect<A, E, R>,
        accepted: (a: A) => boolean
      ): Effect.Effect<{ readonly checked: A } | { readonly retryAfter: number; readonly error?: RateLimited }, E, R> =>
        Effect.suspend(
          (): Effect.Effect<
            { readonly checked: A } | { readonly retryAfter: number; readonly error?: RateLimited },
            E,
            R
          > => {
            const fingerprint = fingerprintOf(credential).toString("base64")
            const now = Date.now()
            const known = acceptedLately.get(fingerprint, now) !== undefined
            const taken = known ? undefined : takeLookup(clientKey(client), now)
            if (taken !== undefined && "held" in taken) return Effect.succeed(taken.held)
            return Effect.map(check, (checked) => {
              if (accepted(checked)) {
                taken?.usable()
                acceptedLately.set(fingerprint, true, Date.now())
              } else if (known) acceptedLately.delete(fingerprint)
              return { checked }
            })
          }
        )

      const stats = (): KeysStats => ({
        ...directory.stats(),
        clients: failures.stats(),
        accepted: acceptedLately.stats(),
        trusted: trusted.stats(),
        lookupsRefused: lookups.refused()
      })

      return ApiKeys.of({ admit, standing, refusal, atTheDoor, guard, stats })
    })
  )
}
