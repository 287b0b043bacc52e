// The read API's door: the refusals a flood makes by the thousand, answered as the Node server
// receives the request (platform/http/node-server.ts), before the router, its middleware and
// HttpApi see it; through them a refusal costs about 60 µs of the one event loop, here about 25
// (docs/benchmarks.md, bench:flood). Two, both decided from memory, neither taking anything:
// - a Host that is not a host name, under /api/: 400, as the fallback answers it (fallback.ts);
// - a bearer credential that is no key this process knows, from a client with no failed
//   authentication left (src/access/keys/auth-failures.ts): 429 with Retry-After, as the key
//   middleware answers it (api/auth.ts).
// The answers are the same bytes those give (status, JSON body, RateLimit-Policy, Retry-After,
// X-Request-Id), counted in the same request metrics; they write no log line, so that a flood
// cannot make one per request. Anything else goes on to the router, which decides as before.
import type { IncomingMessage, ServerResponse } from "node:http"
import { Effect, Layer, Option } from "effect"
import type { Invalid, RateLimited } from "../domain/errors.ts"
import { ApiKeys } from "../access/keys/service.ts"
import { ApiSettings } from "../platform/api-settings.ts"
import { TrustProxySetting } from "../platform/config.ts"
import { clientAddress } from "../platform/http/client-address.ts"
import { ServerDoor, type Door } from "../platform/http/node-server.ts"
import { badHost, isHostHeader, rateLimitPolicy } from "./api/auth.ts"
import { OPENAPI_PATH } from "./api/definition.ts"
import { httpMessage, httpStatus } from "./http/errors.ts"
import { methodLabel, REQUEST_ID_HEADER, requestIdOf, requestRecorder } from "./http/requests.ts"
import { routeTable, type KnownRoute } from "./http/routes.ts"
import { Metrics } from "./ops/metrics.ts"

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** Installs the door on the server's slot while the API runs (nothing where the server has no slot). */
export const doorLayer = (known: ReadonlyArray<KnownRoute>) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const slot = yield* ServerDoor
      if (slot === undefined) return
      const keys = yield* ApiKeys
      const settings = yield* ApiSettings
      const trust = yield* TrustProxySetting
      const metrics = yield* Effect.serviceOption(Metrics)
      const record = Option.isSome(metrics) ? requestRecorder(metrics.value) : undefined
      const routes = routeTable(known)
      const policy = rateLimitPolicy(settings.rateLimit, settings.rateWindowSeconds)
      // The errors are made once each (api/auth.ts, access/keys/service.ts), so their bodies are too.
      const bodies = new Map<Invalid | RateLimited, string>()

      const answer = (
        request: IncomingMessage,
        response: ServerResponse,
        started: number,
        error: Invalid | RateLimited,
        retryAfter: number | undefined
      ): true => {
        let body = bodies.get(error)
        if (body === undefined) {
          body = JSON.stringify({ error: httpMessage(error) })
          if (bodies.size < 200) bodies.set(error, body)
        }
        const status = httpStatus(error)
        const headers: Record<string, string | number> = {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          "ratelimit-policy": policy,
          [REQUEST_ID_HEADER]: requestIdOf(request.headers[REQUEST_ID_HEADER] as string | undefined)
        }
        if (retryAfter !== undefined) headers["retry-after"] = String(retryAfter)
        response.writeHead(status, headers).end(body)
        if (record !== undefined) {
          const method = request.method ?? "GET"
          record(
            methodLabel(method),
            routes.routeOf(method, request.url!),
            status,
            (performance.now() - started) / 1000
          )
        }
        return true
      }

      const door: Door = (request, response) => {
        const url = request.url
        if (url === undefined || !url.startsWith("/api/")) return false
        const started = performance.now()
        if (!isHostHeader(request.headers.host)) return answer(request, response, started, badHost(), undefined)
        const credential = BEARER.exec(request.headers.authorization ?? "")?.[1]
        if (credential === undefined) return false
        // The one path under /api/ that takes no key.
        if (
          url.startsWith(OPENAPI_PATH) &&
          (url.length === OPENAPI_PATH.length || /[?#]/.test(url[OPENAPI_PATH.length]!))
        )
          return false
        const forwarded = request.headers["x-forwarded-for"]
        const client = clientAddress(
          request.socket.remoteAddress,
          Array.isArray(forwarded) ? forwarded.join(",") : forwarded,
          trust
        )
        const refused = keys.atTheDoor(credential, client)
        return refused === undefined ? false : answer(request, response, started, refused.error, refused.retryAfter)
      }

      slot.current = door
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (slot.current === door) slot.current = undefined
        })
      )
    })
  )
