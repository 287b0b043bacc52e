// Conditional GET (docs/integrators.md#not-downloading-what-you-already-have-etag): every 200
// answer of a GET under /api/ carries a strong ETag, a hash of its exact bytes, and a request
// whose If-None-Match names it gets 304 with no body. The answer is made first (the key is
// checked and the request counted, as for any request), so a 304 saves the transfer, not the
// request: it carries the ETag and the rate-limit fields like the 200 would. Hashing the body
// costs about 25 µs for a 36 kB page: cheaper than anything that would track record versions.
import { hash } from "node:crypto"
import { Headers, HttpServerResponse } from "effect/http"

/** The strong entity tag of these exact bytes (a string is hashed as its UTF-8). */
export const etagOf = (body: string | Uint8Array): string => `"${hash("sha256", body, "base64url").slice(0, 32)}"`

/**
 * Whether If-None-Match names this tag (RFC 9110 13.1.2: "*" names any, and the weak
 * comparison applies, so W/"x" names "x").
 */
export const ifNoneMatchHits = (header: string, etag: string): boolean => {
  for (const part of header.split(",")) {
    const tag = part.trim()
    if (tag === "*" || tag === etag || (tag.startsWith("W/") && tag.slice(2) === etag)) return true
  }
  return false
}

/** The answer with its ETag, or 304 when the client already has it. Other answers pass unchanged. */
export const conditional = (
  method: string,
  ifNoneMatch: string | undefined,
  response: HttpServerResponse.HttpServerResponse
): HttpServerResponse.HttpServerResponse => {
  if ((method !== "GET" && method !== "HEAD") || response.status !== 200 || response.body._tag !== "Uint8Array")
    return response
  const body = response.body
  const etag = etagOf(body.text ?? body.body)
  if (ifNoneMatch !== undefined && ifNoneMatchHits(ifNoneMatch, etag)) {
    return HttpServerResponse.empty({
      status: 304,
      headers: Headers.set(Headers.removeMany(response.headers, ["content-type", "content-length"]), "etag", etag)
    })
  }
  return HttpServerResponse.setHeader(response, "etag", etag)
}
