// The middleware on every /api/v1 endpoint: it decodes the bearer key and the Host, asks the
// keys service whether the request may go on (src/access/keys/service.ts: the key, its
// rate limit, its company, scopes and modules), and answers what that decides: the key's
// refusal (401, 403, 429) or the handler, with the IETF RateLimit fields on every answer and
// the Bearer challenge on every 401. The key is resolved from memory when it can be; the
// statement that reads the data then confirms it, so this adds no database round trip to a
// served request.
import { isIPv6 } from "node:net"
import { Effect, Layer, Option, Redacted, type Types } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { invalid, type Forbidden, type Invalid, type RateLimited, type Unauthorized } from "../../domain/errors.ts"
import { isResource } from "../../domain/resources.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import type { RateDecision } from "../../access/keys/rate-limit.ts"
import { ApiKeys } from "../../access/keys/service.ts"
import { ApiSettings } from "../../platform/api-settings.ts"
import { TrustProxySetting } from "../../platform/config.ts"
import { clientAddress, type TrustProxy } from "../../platform/http/client-address.ts"
import { noteKeyId } from "../http/request-note.ts"
import { ApiKeyAuth } from "./definition.ts"

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

/** The longest host name DNS allows, in characters (without a trailing dot). */
export const MAX_HOST_LENGTH = 253

// Labels of letters, digits, hyphens and underscores (container names have them), 1 to 63 each;
// an IPv4 address is such a name too. A trailing dot is allowed; a port of up to 5 digits.
const HOST_NAME = /^(?:[a-z0-9_-]{1,63}\.)*[a-z0-9_-]{1,63}\.?(?::\d{1,5})?$/i
const IPV6_HOST = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/i

/**
 * Whether a Host header is a host name or an IP address (an IPv6 one in brackets), with an
 * optional port, and the name at most MAX_HOST_LENGTH characters. None sent is fine (it names
 * no company). Checked before the Host is looked at, so that no other Host costs anything.
 */
export const isHostHeader = (header: string | undefined): boolean => {
  if (header === undefined || header === "") return true
  if (header.length > MAX_HOST_LENGTH + 7) return false // the name, a trailing dot, ":65535"
  const v6 = IPV6_HOST.exec(header)
  const ok = v6 !== null ? isIPv6(v6[1]!) : HOST_NAME.test(header)
  if (!ok) return false
  const colon = header.lastIndexOf(":")
  const port = v6 === null ? (colon < 0 ? undefined : header.slice(colon + 1)) : header.slice(v6[0].indexOf("]") + 2)
  if (port !== undefined && port !== "" && Number(port) > 65535) return false
  const name = v6 !== null ? header : colon < 0 ? header : header.slice(0, colon)
  return (name.endsWith(".") ? name.length - 1 : name.length) <= MAX_HOST_LENGTH
}

const BAD_HOST = invalid(
  `the Host header is not a host name: send a name of at most ${MAX_HOST_LENGTH} letters, digits, hyphens and dots, or an IP address, with an optional :port`
)

/** The refusal of a Host that is not one (400): one error, made once (a flood's answers cost no stack trace each). */
export const badHost = () => BAD_HOST

/**
 * What both authentications read (API keys here, admin tokens in the admin API): the keys
 * service, which counts a client's failed attempts; TRUST_PROXY, which says who the client is
 * (clientOf); and the API's settings.
 */
export const authenticationServices = Effect.gen(function* () {
  return { keys: yield* ApiKeys, trust: yield* TrustProxySetting, settings: yield* ApiSettings }
})

/** The request's client address, as TRUST_PROXY says to read it. */
export const clientOf = (request: HttpServerRequest.HttpServerRequest, trust: TrustProxy): string | undefined =>
  clientAddress(Option.getOrUndefined(request.remoteAddress), request.headers["x-forwarded-for"], trust)

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

/** The request's answer: the handler's (what it fails with is answered further in), or the key's refusal. */
type Answer = Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  Types.unhandled | Unauthorized | Forbidden | RateLimited | Invalid,
  HttpServerRequest.HttpServerRequest
>

/** What every 401 of the read API carries besides its body. */
const CHALLENGE: Readonly<Record<string, string>> = { "www-authenticate": 'Bearer realm="api"' }

/** Sets an answer's headers, whatever answers the request (handler or refusal); a 401 also gets the challenge. */
const withHeaders =
  (headers: Readonly<Record<string, string>>) =>
  (_request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
    Effect.succeed(
      HttpServerResponse.setHeaders(response, response.status === 401 ? { ...headers, ...CHALLENGE } : headers)
    )

export const ApiKeyAuthLive = Layer.effect(
  ApiKeyAuth,
  Effect.gen(function* () {
    const { keys, trust, settings } = yield* authenticationServices
    const policy = rateLimitPolicy(settings.rateLimit, settings.rateWindowSeconds)
    // Without a usable key there is no allowance to report, only the policy.
    const policyOnly = { "ratelimit-policy": policy }

    /** The request ends with this refusal; HttpApi answers it as the middleware declares it. */
    const refuse = (
      error: Unauthorized | Forbidden | RateLimited | Invalid,
      headers: Readonly<Record<string, string>>
    ) => Effect.andThen(HttpEffect.appendPreResponseHandler(withHeaders(headers)), Effect.fail(error))

    return ApiKeyAuth.of({
      // Runs on every request: plain combinators rather than a generator, and nothing made
      // per request that can be made once (the policy field, the key as handlers see it).
      apiKey: (httpEffect, { credential, group, endpoint }) =>
        Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) => {
          if (!isHostHeader(request.headers.host)) return refuse(badHost(), policyOnly)
          const host = hostOf(request.headers.host)
          const admission = keys.admit({
            credential: Redacted.value(credential),
            host,
            resource: isResource(group.identifier) ? group.identifier : undefined,
            webhooks: group.identifier === "hooks",
            client: clientOf(request, trust)
          })
          return Effect.flatMap(admission, (a): Answer => {
            const rate = a.rate
            const headers: Readonly<Record<string, string>> =
              a._tag === "Refused" && a.retryAfter !== undefined
                ? rate === undefined
                  ? { ...policyOnly, "retry-after": String(a.retryAfter) }
                  : { "ratelimit-policy": policy, ratelimit: rateLimitField(rate), "retry-after": String(a.retryAfter) }
                : rate === undefined
                  ? policyOnly
                  : { "ratelimit-policy": policy, ratelimit: rateLimitField(rate) }
            if (a._tag === "Refused") {
              const refused = refuse(a.error, headers)
              // The request's log line and span name the key, by id (never the key), whatever the answer.
              return a.keyId === undefined ? refused : Effect.andThen(noteKeyId(a.keyId), refused)
            }
            // Lists declare their parameters (and refuse others by their schema); the rest take none.
            const stray = endpoint.query === undefined ? strayParameter(request.url) : undefined
            const answer: Answer =
              stray === undefined
                ? HttpEffect.withPreResponseHandler(
                    Effect.provideService(httpEffect, CurrentKey, a.key),
                    withHeaders(headers)
                  )
                : refuse(invalid(`unknown query parameter "${stray}"; this path takes none`), headers)
            return Effect.andThen(noteKeyId(a.key.keyId), answer)
          })
        })
    })
  })
)
