// One delivery attempt: vet the address, connect to exactly the vetted IP (TLS still checks
// the real host name), POST the signed body, and report what happened as a value.
//
// Trust: production trusts Node's default CAs plus NODE_EXTRA_CA_CERTS (read at process
// start). `ca` adds certificates on top of those, for tests that make a CA at run time.
import { createHash } from "node:crypto"
import type { Readable } from "node:stream"
import { createSecureContext, getCACertificates, type SecureContext } from "node:tls"
import { Data } from "effect"
import { Pool, buildConnector } from "undici"
import {
  forgetResolutions,
  parseAllowedNetworks,
  parseAllowedNetworksOrThrow,
  resolveAndCheck,
  type AllowedNetworks,
  type Lookup,
  type ResolvedAddress,
  type WebhookUrl
} from "./address-guard.ts"
import { signedHeaders } from "./signature.ts"

export { parseAllowedNetworks, parseAllowedNetworksOrThrow, type AllowedNetworks, type Lookup }

export const USER_AGENT = "Service-Webhooks/1"
export const DEFAULT_TIMEOUT_MS = 10_000
export const DEFAULT_MAX_RESPONSE_BYTES = 16 * 1024

export type SendTarget = {
  readonly url: string
  readonly secret: string
  /** The secret a rotation replaced: it signs beside `secret` during the overlap (docs/events.md#secret-rotation). */
  readonly previousSecret?: string | null | undefined
}

export type SendMessage = {
  readonly deliveryId: string
  readonly event: string
  /** The exact bytes to POST (a string is sent as UTF-8); the signature covers these bytes. */
  readonly body: string | Uint8Array
}

export type SendOptions = {
  /** Parsed WEBHOOK_ALLOWED_NETWORKS; empty (the default) allows public unicast only. */
  readonly allowed?: AllowedNetworks
  /** One deadline for DNS, connect, TLS, headers and the bounded body read. */
  readonly timeoutMs?: number
  /** At most this many bytes of the answer are read; the rest is never downloaded. */
  readonly maxResponseBytes?: number
  /** Unix milliseconds, for the signature timestamp. */
  readonly now?: () => number
  readonly lookup?: Lookup
  /** Extra trusted CA certificates (PEM), added to the defaults. Tests only; see file header. */
  readonly ca?: string | Uint8Array | ReadonlyArray<string | Uint8Array>
  /** Cancels the attempt (e.g. the fiber running it was interrupted). */
  readonly signal?: AbortSignal
}

export type SendErrorKind =
  | "invalid-url" // not an https URL with a host
  | "refused" // private network, http://, credentials in the URL
  | "dns" // the host does not resolve
  | "timeout" // no complete answer in time (DNS that never answered included)
  | "connection" // refused, reset, closed, unreachable
  | "tls"
  | "redirect" // 3xx, never followed
  | "http" // any other non-2xx status
  | "aborted" // the caller's signal
  | "internal"
  | "circuit" // not sent: the destination's circuit is open (the engine's, never send's)

export type SendResult = {
  readonly ok: boolean
  /** The receiver's status, when it answered at all. */
  readonly status: number | null
  /** "<kind>: <detail>" or e.g. "http 500"; null on success. */
  readonly error: string | null
  readonly errorKind: SendErrorKind | null
  readonly durationMs: number
  /** The first maxResponseBytes of the answer, cut on a UTF-8 character boundary. */
  readonly responseSnippet: string
  /** The vetted addresses the connection was allowed to use. */
  readonly addresses: ReadonlyArray<string>
}

/** The attempt's deadline passed: the reason its signal is aborted with (a timeout, not a cancel). */
class DeadlineError extends Data.TaggedError("DeadlineError")<{ readonly message: string }> {}

export const send = async (
  target: SendTarget,
  message: SendMessage,
  options: SendOptions = {}
): Promise<SendResult> => {
  const started = performance.now()
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const maxBytes = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
  const deadline = new AbortController()
  const timer = setTimeout(
    () => deadline.abort(new DeadlineError({ message: `no complete answer within ${timeoutMs} ms` })),
    timeoutMs
  )
  // One signal for the attempt: the caller's cancel feeds the deadline's controller (cheaper
  // per attempt than AbortSignal.any, which the profile showed on the hot path).
  const cancel = options.signal
  const onCancel = () => deadline.abort(cancel!.reason)
  if (cancel) {
    if (cancel.aborted) onCancel()
    else cancel.addEventListener("abort", onCancel, { once: true })
  }
  const signal = deadline.signal

  let status: number | null = null
  let addresses: ReadonlyArray<string> = []
  const result = (fields: Partial<SendResult> & Pick<SendResult, "ok">): SendResult => ({
    status,
    error: null,
    errorKind: null,
    responseSnippet: "",
    addresses,
    ...fields,
    durationMs: Math.round(performance.now() - started)
  })
  const fail = (errorKind: SendErrorKind, error: string, snippet = ""): SendResult =>
    result({ ok: false, errorKind, error, responseSnippet: snippet })

  try {
    // The host's vetted answer is reused for its TTL (at most 30 s); see address-guard.ts.
    const checked = await resolveAndCheck(target.url, {
      ...(options.allowed ? { allowed: options.allowed } : {}),
      ...(options.lookup ? { lookup: options.lookup } : {}),
      signal,
      reuse: true
    })
    if (!checked.ok) return fail(checked.kind, checked.error)
    addresses = addressTexts(checked.addresses).list

    const body = typeof message.body === "string" ? Buffer.from(message.body, "utf8") : Buffer.from(message.body)
    const seconds = Math.floor((options.now ?? Date.now)() / 1000)
    const url = checked.target.url
    const pool = poolFor(checked.target, checked.addresses, options.ca)

    const response = await pool.request({
      path: `${url.pathname}${url.search}`,
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "service-event": message.event,
        ...signedHeaders(
          target.previousSecret ? [target.secret, target.previousSecret] : target.secret,
          message.deliveryId,
          seconds,
          body
        )
      },
      body,
      signal,
      // Backstops only: the deadline above is the real limit.
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs
    })
    status = response.statusCode
    const snippet = utf8Prefix(await readBounded(response.body, maxBytes), maxBytes)

    // The status decides: once a 2xx has arrived in time the receiver has answered; a body
    // cut by the deadline or the byte bound only shortens the snippet.
    if (status >= 200 && status < 300) return result({ ok: true, responseSnippet: snippet })
    if (status >= 300 && status < 400) {
      const location = headerText(response.headers["location"])
      return fail(
        "redirect",
        `redirect ${status}${location ? ` to ${location}` : " without a Location"} (not followed)`,
        snippet
      )
    }
    return fail("http", `http ${status}`, snippet)
  } catch (err) {
    if (cancel?.aborted) return fail("aborted", "aborted: the attempt was cancelled")
    if (deadline.signal.aborted) {
      return fail(
        "timeout",
        `timeout: ${(deadline.signal.reason as Error).message}${status === null ? "" : ` (status ${status} seen)`}`
      )
    }
    const [kind, text] = classifyError(err)
    return fail(kind, text)
  } finally {
    clearTimeout(timer)
    cancel?.removeEventListener("abort", onCancel)
  }
}

// ---------------------------------------------------------------------------------------
// Errors

const TLS_CODE =
  /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE)/

const classifyError = (err: unknown): [SendErrorKind, string] => {
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown }
  const code = typeof e?.code === "string" ? e.code : ""
  const message = typeof e?.message === "string" ? e.message : String(err)
  const cause = e?.cause as { code?: unknown } | undefined
  const causeCode = typeof cause?.code === "string" ? cause.code : ""
  if (TLS_CODE.test(code) || TLS_CODE.test(causeCode) || (e as { library?: unknown }).library === "SSL routines") {
    return ["tls", `tls: ${message} (${code || causeCode})`]
  }
  if (code === "UND_ERR_CONNECT_TIMEOUT" || code === "UND_ERR_HEADERS_TIMEOUT" || code === "UND_ERR_BODY_TIMEOUT") {
    return ["timeout", `timeout: ${message}`]
  }
  if (code === "ECONNREFUSED") return ["connection", `connection refused: ${message}`]
  if (code === "ECONNRESET") return ["connection", `connection reset: ${message}`]
  if (code === "UND_ERR_SOCKET") return ["connection", `connection closed: ${message}`]
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH") return ["connection", `unreachable: ${message}`]
  if (code === "ETIMEDOUT") return ["timeout", `timeout: ${message}`]
  if (code.startsWith("E")) return ["connection", `connection error: ${message} (${code})`]
  return ["internal", `internal: ${message}${code ? ` (${code})` : ""}`]
}

const headerText = (value: string | Array<string> | undefined): string => {
  const v = Array.isArray(value) ? value[0] : value
  // Keep log lines single-line and short whatever the receiver sent.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
  return (v ?? "").replace(/[\u0000-\u001f\u007f]/g, "").slice(0, 300)
}

// ---------------------------------------------------------------------------------------
// Bounded body

// Plain 'data' events: an async iterator per answer cost more than the rest of the read.
const readBounded = (body: Readable, max: number): Promise<Buffer> =>
  new Promise((resolve) => {
    const chunks: Array<Buffer> = []
    let size = 0
    let finished = false
    const done = () => {
      if (finished) return
      finished = true
      body.off("data", onData)
      // Not draining the rest drops the connection, which is what a bound is for. The
      // 'error' listener stays: destroying an unfinished body emits one.
      body.destroy()
      resolve(Buffer.concat(chunks, size))
    }
    const onData = (chunk: Buffer) => {
      chunks.push(chunk)
      size += chunk.length
      if (size >= max) done()
    }
    // Cut by the deadline or a dropped connection ('error', 'close'): keep what arrived.
    body.on("data", onData).on("error", done).once("end", done).once("close", done)
    // Already cut before the read began: 'close' has been and gone.
    if (body.destroyed) done()
  })

/** The longest prefix of at most `max` bytes that does not split a UTF-8 character. */
export const utf8Prefix = (bytes: Uint8Array, max: number): string => {
  let end = Math.min(bytes.length, max)
  if (end < bytes.length) {
    // Step back over continuation bytes to the lead byte, and drop it if its character
    // would not fit.
    let lead = end
    while (lead > 0 && lead > end - 4 && (bytes[lead]! & 0xc0) === 0x80) lead--
    end = lead
  }
  return Buffer.from(bytes.buffer, bytes.byteOffset, end).toString("utf8")
}

// ---------------------------------------------------------------------------------------
// Connections pinned to vetted addresses

// Keep-alive pools keyed by origin AND vetted address set: a pool's sockets only ever go to
// the addresses it was created for, so a reused connection is always to a vetted address.
const pools = new Map<string, Pool>()
const MAX_POOLS = 256
const CONNECT_TIMEOUT_MS = DEFAULT_TIMEOUT_MS
// Only failures that mean "nobody there" move on to the next vetted address.
const NEXT_ADDRESS_CODES = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ETIMEDOUT"])

type CaInput = SendOptions["ca"]

const caList = (ca: CaInput): Array<string | Uint8Array> =>
  ca === undefined ? [] : typeof ca === "string" || ca instanceof Uint8Array ? [ca] : [...ca]

/**
 * Extra trusted CAs as one TLS context, made once per CA set: each tls.connect given a `ca`
 * list would otherwise parse the default roots plus the extras again, and hashing the list
 * for the pool key on every attempt cost more than signing the body.
 */
type Trust = { readonly key: string; readonly context: SecureContext | null }
const NO_EXTRA: Trust = { key: "", context: null }
const trustByInput = new Map<unknown, Trust>()
const trustByKey = new Map<string, Trust>()

const trustFor = (ca: CaInput): Trust => {
  if (ca === undefined) return NO_EXTRA
  const known = trustByInput.get(ca)
  if (known) return known
  const extra = caList(ca)
  let trust = NO_EXTRA
  if (extra.length > 0) {
    const key = createHash("sha256")
      .update(extra.map((c) => Buffer.from(c).toString("base64")).join(","))
      .digest("hex")
    trust = trustByKey.get(key) ?? {
      key,
      context: createSecureContext({
        ca: [...getCACertificates("default"), ...extra.map((c) => (typeof c === "string" ? c : Buffer.from(c)))]
      })
    }
    trustByKey.set(key, trust)
  }
  if (trustByInput.size >= 64) trustByInput.clear()
  trustByInput.set(ca, trust)
  return trust
}

// A reused vetted answer is the same array every time: its texts are made once.
type AddressTexts = { readonly list: ReadonlyArray<string>; readonly key: string }
const textsByAnswer = new WeakMap<ReadonlyArray<ResolvedAddress>, AddressTexts>()

const addressTexts = (addresses: ReadonlyArray<ResolvedAddress>): AddressTexts => {
  let texts = textsByAnswer.get(addresses)
  if (!texts) {
    const list = addresses.map((a) => a.address)
    texts = { list, key: list.join(",") }
    textsByAnswer.set(addresses, texts)
  }
  return texts
}

// The pool last used for a reused parsed URL, with the vetted answer and trust it was for:
// while those are the same objects, the pool is found without building its key again.
type PoolUse = {
  readonly addresses: ReadonlyArray<ResolvedAddress>
  readonly trust: Trust
  readonly key: string
  readonly pool: Pool
}
const poolByTarget = new WeakMap<WebhookUrl, PoolUse>()

const poolFor = (target: WebhookUrl, addresses: ReadonlyArray<ResolvedAddress>, ca: CaInput): Pool => {
  const trust = trustFor(ca)
  const used = poolByTarget.get(target)
  const same =
    used !== undefined && used.addresses === addresses && used.trust === trust && pools.get(used.key) === used.pool
  const key = same ? used.key : `${target.url.origin}|${addressTexts(addresses).key}|${trust.key}`
  const existing = same ? used.pool : pools.get(key)
  if (existing && !existing.closed && !existing.destroyed) {
    pools.delete(key) // refresh its place: the map is kept in least-recently-used order
    pools.set(key, existing)
    if (!same) poolByTarget.set(target, { addresses, trust, key, pool: existing })
    return existing
  }
  const origin = target.url.origin
  const servername = target.ipLiteral ? null : target.host
  const base = buildConnector({
    timeout: CONNECT_TIMEOUT_MS,
    allowH2: false,
    // Explicit, so NODE_TLS_REJECT_UNAUTHORIZED=0 can never switch verification off here.
    rejectUnauthorized: true,
    ...(trust.context ? { secureContext: trust.context } : {})
  })
  // SNI and certificate checks use the real host name; the TCP connection goes to a vetted IP.
  const sni = servername === null ? undefined : servername.replace(/\.$/, "")
  const connect: buildConnector.connector = (opts, callback) => {
    const attempt = (i: number): void => {
      base({ ...opts, hostname: addresses[i]!.address, ...(sni ? { servername: sni } : {}) }, (...args) => {
        const [err] = args
        const code = (err as { code?: string } | null)?.code ?? ""
        if (err && i + 1 < addresses.length && NEXT_ADDRESS_CODES.has(code)) return attempt(i + 1)
        callback(...args)
      })
    }
    attempt(0)
  }
  const pool = new Pool(origin, {
    connect,
    connections: 8,
    pipelining: 1,
    allowH2: false,
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 30_000
  })
  pools.set(key, pool)
  poolByTarget.set(target, { addresses, trust, key, pool })
  while (pools.size > MAX_POOLS) {
    const [oldKey, oldPool] = pools.entries().next().value!
    pools.delete(oldKey)
    void oldPool.close().catch(() => undefined)
  }
  return pool
}

/** Drops every kept-alive connection (shutdown, tests). In-flight attempts fail. */
export const closeSenderConnections = async (): Promise<void> => {
  const all = [...pools.values()]
  pools.clear()
  forgetResolutions()
  await Promise.all(all.map((p) => p.destroy().catch(() => undefined)))
}
