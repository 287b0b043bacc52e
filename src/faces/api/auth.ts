// The middleware on every /api/v1 endpoint: the bearer key (401), the rate limit (429), the
// company, scopes and modules (403), and the IETF RateLimit fields on every answer. The key
// is resolved from memory when it can be (keys.ts); the statement that reads the data then
// confirms it (key-check.ts), so this adds no database round trip to a served request.
import { Effect, Layer, Redacted } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { isResource, type Resource } from "../../domain/resources.ts"
import { noteKeyId } from "../http/request-note.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ApiKeyAuth } from "./definition.ts"
import { errorResponse } from "../http/errors.ts"
import { currentKeyOf, KeyDirectory, type KeyEntry, type Lookup } from "../../access/keys/directory.ts"
import { RateLimiter, type RateDecision } from "../../access/keys/rate-limit.ts"
import { ApiSettings } from "../../platform/api-settings.ts"
import { UsageRecorder } from "../../access/keys/usage.ts"
import { Views } from "../../read/views.ts"

/** The Host header's host name, lower case, without port or trailing dot. */
export const hostOf = (header: string | undefined): string | undefined => {
  if (header === undefined || header === "") return undefined
  let host = header.trim().toLowerCase()
  if (host.startsWith("[")) {
    const end = host.indexOf("]")
    host = end > 0 ? host.slice(0, end + 1) : host
  } else {
    const colon = host.indexOf(":")
    if (colon >= 0) host = host.slice(0, colon)
  }
  if (host.endsWith(".")) host = host.slice(0, -1)
  return host === "" ? undefined : host
}

/** IETF RateLimit-Policy and RateLimit fields (draft-ietf-httpapi-ratelimit-headers). */
export const rateLimitPolicy = (limit: number, windowSeconds: number) => `"default";q=${limit};w=${windowSeconds}`
export const rateLimitField = (rate: RateDecision) => `"default";r=${rate.remaining};t=${rate.reset}`
export const rateLimitHeaders = (rate: RateDecision): Record<string, string> => ({
  "ratelimit-policy": rateLimitPolicy(rate.limit, rate.windowSeconds),
  ratelimit: rateLimitField(rate)
})

/** The first query parameter's name in a request URL, if it has any (an empty `?` has none). */
export const strayParameter = (url: string): string | undefined => {
  const q = url.indexOf("?")
  if (q < 0) return undefined
  for (const part of url.slice(q + 1).split("&")) {
    if (part === "") continue
    const eq = part.indexOf("=")
    const raw = eq < 0 ? part : part.slice(0, eq)
    try {
      return decodeURIComponent(raw.replace(/\+/g, " "))
    } catch {
      return raw
    }
  }
  return undefined
}

export const UNAUTHORIZED_HEADERS: Readonly<Record<string, string>> = { "www-authenticate": 'Bearer realm="api"' }

type Unusable = "revoked" | "expired" | "unknown" | "host"
const UNUSABLE: Readonly<Record<Unusable, string>> = {
  revoked: "this API key was revoked",
  expired: "this API key expired",
  unknown: "unknown API key",
  host: "this API key belongs to another company: use it at your company's own address"
}

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function* () {
    const directory = yield* KeyDirectory
    const limiter = yield* RateLimiter
    const usage = yield* UsageRecorder
    const settings = yield* ApiSettings
    const views = yield* Views
    const policy = rateLimitPolicy(settings.rateLimit, settings.rateWindowSeconds)
    const policyOnly = { "ratelimit-policy": policy }

    // A key over its limit was resolved from memory and no statement will confirm it, so
    // before answering 429 ask the database whether it is still a key at all: revoking one
    // takes effect on its very next request, which gets 401 (spec 5.6), however busy it was.
    // One statement per refused request, as a served request costs.
    const tooMany = (
      entry: KeyEntry,
      host: string | undefined,
      resource: Resource | undefined,
      answer: HttpServerResponse.HttpServerResponse
    ) =>
      Effect.flatMap(views.check(currentKeyOf(entry, host), resource), (now) =>
        now.state !== "revoked" && now.state !== "expired" && now.state !== "unknown" && now.state !== "host"
          ? Effect.succeed(answer)
          : Effect.map(directory.explain(entry.keyId, host, resource), (refusal) =>
              errorResponse(401, refusal?.status === 401 ? refusal.message : UNUSABLE[now.state as Unusable], {
                ...policyOnly,
                ...UNAUTHORIZED_HEADERS
              })
            )
      )

    // Runs on every request: plain combinators rather than a generator, and nothing made
    // per request that can be made once (the policy field, the key as handlers see it).
    const admit = <E, R>(
      httpEffect: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
      lookup: Lookup,
      host: string | undefined,
      resource: Resource | undefined,
      hooks: boolean,
      strayQuery: string | undefined
    ) => {
      if (lookup._tag === "Refused" && lookup.refusal.status === 401) {
        return Effect.succeed(errorResponse(401, lookup.refusal.message, { ...policyOnly, ...UNAUTHORIZED_HEADERS }))
      }
      const entry = lookup.entry!
      usage.record(entry.keyId)
      const answer = Effect.flatMap(limiter.take(entry.keyId), (rate) => {
        const headers = { "ratelimit-policy": policy, ratelimit: rateLimitField(rate) }
        if (!rate.allowed) {
          return tooMany(
            entry,
            host,
            resource,
            errorResponse(
              429,
              `rate limit exceeded: ${rate.limit} requests per ${rate.windowSeconds} seconds; retry in ${rate.reset} seconds`,
              {
                ...headers,
                "retry-after": String(rate.reset)
              }
            )
          )
        }
        if (lookup._tag === "Refused")
          return Effect.succeed(errorResponse(lookup.refusal.status, lookup.refusal.message, headers))
        // Hooks rule 1: without the webhooks permission the answer is 403, whatever the body
        // (checked here, before the handler reads and validates it).
        if (hooks && !entry.webhooks)
          return Effect.succeed(errorResponse(403, "this key does not have the webhooks permission", headers))
        if (strayQuery !== undefined)
          return Effect.succeed(
            errorResponse(400, `unknown query parameter "${strayQuery}"; this path takes none`, headers)
          )
        return HttpEffect.withPreResponseHandler(
          Effect.provideService(httpEffect, CurrentKey, currentKeyOf(entry, host)),
          (_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers))
        )
      })
      // The request's log line and span name the key, by id (never the key), whatever the answer.
      return Effect.andThen(noteKeyId(entry.keyId), answer)
    }

    return ApiKeyAuth.of({
      apiKey: (httpEffect, { credential, group, endpoint }) =>
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          const host = hostOf(request.headers.host)
          const resource = isResource(group.identifier) ? group.identifier : undefined
          // Lists declare their parameters (and refuse others by their schema); the rest take none.
          const stray = endpoint.query === undefined ? strayParameter(request.url) : undefined
          return Effect.flatMap(directory.resolve(Redacted.value(credential), host, resource), (lookup) =>
            admit(httpEffect, lookup, host, resource, group.identifier === "hooks", stray)
          )
        })
    })
  })
)
