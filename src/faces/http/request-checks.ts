// What every request to the JSON APIs (/api and /admin/v1) must pass before a handler reads
// it: one set of credentials, a bounded body, and no NUL characters in its body (PostgreSQL
// text cannot hold one, so it would fail deep inside as a 500; the path and query are
// checked for every path, pages included, by src/faces/fallback.ts with nulParameter). A
// refusal is an error value, so the caller answers it in the API's error shape.
import { ByteSize, Effect } from "effect"
import { HttpIncomingMessage, type HttpServerRequest } from "effect/http"
import { invalid, type Invalid } from "../../domain/errors.ts"
import { PayloadTooLarge } from "./errors.ts"

/** The largest JSON body the APIs read: their bodies are a few fields (a URL, a name, events). */
export const MAX_JSON_BODY_BYTES = 64 * 1024

export type Refusal = Invalid | PayloadTooLarge

const tooLarge = () =>
  new PayloadTooLarge({ message: `the request body is too large: at most ${MAX_JSON_BODY_BYTES / 1024} KiB` })

/** Paths whose answers are JSON: the read API and the admin API. */
export const isJsonApiPath = (path: string): boolean =>
  path.startsWith("/api/") || path === "/api" || path.startsWith("/admin/v1/") || path === "/admin/v1"

/** Whether a JSON value holds a NUL character in any string or key, walked without recursion (bodies may nest deeply). */
export const containsNul = (value: unknown): boolean => {
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === "string") {
      if (v.includes("\u0000")) return true
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x)
    } else if (v !== null && typeof v === "object") {
      for (const [k, x] of Object.entries(v)) {
        if (k.includes("\u0000")) return true
        stack.push(x)
      }
    }
  }
  return false
}

/** The first query parameter (by name) whose name or value holds a NUL character. */
export const nulParameter = (url: string): string | undefined => {
  const q = url.indexOf("?")
  if (q < 0) return undefined
  let params: URLSearchParams
  try {
    params = new URLSearchParams(url.slice(q + 1))
  } catch {
    return undefined
  }
  for (const [name, value] of params) {
    if (name.includes("\u0000") || value.includes("\u0000")) return name.replaceAll("\u0000", "%00")
  }
  return undefined
}

/** How many times a header appears in the raw request (Node keeps only the first Authorization). */
const headerCount = (request: HttpServerRequest.HttpServerRequest, name: string): number => {
  const raw = (request.source as { rawHeaders?: ReadonlyArray<string> } | undefined)?.rawHeaders
  if (raw === undefined) return request.headers[name] === undefined ? 0 : 1
  let n = 0
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) n++
  return n
}

const isJsonType = (contentType: string | undefined) => {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase()
  return type === "application/json" || type.endsWith("+json")
}

/**
 * The first field of a JSON object body that `known` lacks: a field no version of the API
 * knows is refused rather than dropped, so a caller never believes it asked for something
 * (docs/api.md#requests-refused-before-they-are-read).
 */
export const unknownField = (body: unknown, known: ReadonlyArray<string>): string | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  return Object.keys(body).find((k) => !known.includes(k))
}

const unknownFieldRefusal = (field: string, known: ReadonlyArray<string>) =>
  invalid(
    `unknown field "${field.slice(0, 80)}" in the request body: ${known.length === 0 ? "this request takes no body fields" : `it takes ${known.join(", ")}`}`,
    { field: field.slice(0, 80) }
  )

/**
 * Why the request must be refused before any handler runs, or undefined when it may go on.
 * `bodyFields`: the fields its route's body may have (undefined: not checked).
 */
export const checkRequest = (
  request: HttpServerRequest.HttpServerRequest,
  bodyFields?: ReadonlyArray<string>
): Effect.Effect<Refusal | undefined> => {
  if (headerCount(request, "authorization") > 1) {
    return Effect.succeed(invalid("more than one Authorization header: send exactly one"))
  }
  const length = request.headers["content-length"]
  if (length !== undefined && Number(length) > MAX_JSON_BODY_BYTES) return Effect.succeed(tooLarge())
  const chunked = /chunked/i.test(request.headers["transfer-encoding"] ?? "")
  if (!isJsonType(request.headers["content-type"]) || (length === undefined && !chunked))
    return Effect.succeed(undefined)
  // Read once, bounded; the handler reads the same (cached) bytes afterwards.
  return request.text.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MAX_JSON_BODY_BYTES)),
    Effect.map((text): Refusal | undefined => {
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        return undefined // not JSON: the handler's own answer (400 invalid request body)
      }
      if (containsNul(body)) return invalid("invalid request body: text may not contain NUL characters (\\u0000)")
      const unknown = bodyFields === undefined ? undefined : unknownField(body, bodyFields)
      return unknown === undefined ? undefined : unknownFieldRefusal(unknown, bodyFields!)
    }),
    Effect.catch(() => Effect.succeed<Refusal>(tooLarge()))
  )
}
