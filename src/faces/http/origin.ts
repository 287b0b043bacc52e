// Where the browser reached us: the scheme (X-Forwarded-Proto, from a proxy TRUST_PROXY trusts;
// the service itself speaks plain HTTP) and the Host it addressed (a proxy passes it through, as
// the read API needs). For links the service hands out and for cookies' Secure. Pure.
import type { HttpServerRequest } from "effect/http"
import type { TrustProxy } from "../../platform/http/client-address.ts"

/** Whether the browser came over TLS to a proxy we trust. */
export const cameOverTls = (request: HttpServerRequest.HttpServerRequest, trust: TrustProxy): boolean =>
  trust._tag !== "None" && (request.headers["x-forwarded-proto"] ?? "").split(",")[0]!.trim().toLowerCase() === "https"

/** "https://host" or "http://host", as the browser addressed us. */
export const originOf = (request: HttpServerRequest.HttpServerRequest, trust: TrustProxy): string =>
  `${cameOverTls(request, trust) ? "https" : "http"}://${request.headers["host"] ?? "127.0.0.1"}`
