// Verifying a delivery: either of the two signatures every delivery carries, both made with the
// same whsec_... secret over the exact body bytes.
//   Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature "v1,<base64>" (several
//     may be given, space-separated): HMAC-SHA256 of "<id>.<timestamp>.<body>", keyed with the
//     base64 decoding of what follows whsec_.
//   Service-Signature: "t=<unix seconds>,v1=<hex>": HMAC-SHA256 of "<t>.<body>", keyed with the
//     whole whsec_... string (Stripe's scheme).
import { createHmac, timingSafeEqual } from "node:crypto"
import { WebhookVerificationError } from "./errors.ts"
import type { PingDelivery, WebhookDelivery } from "./types.ts"

export interface VerifyOptions {
  /** How far the signature's timestamp may be from now, either way (300: five minutes). */
  readonly toleranceSeconds?: number
  /** Now, in unix seconds (for tests). */
  readonly nowSeconds?: number
}

/** Headers as a fetch Request, node:http (IncomingHttpHeaders) or a plain object has them. */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const header = (headers: WebhookHeaders, name: string): string | undefined => {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined
  }
  const record = headers as Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  for (const [k, v] of Object.entries(record)) {
    if (k.toLowerCase() === name && v !== undefined) return typeof v === "string" ? v : v.join(" ")
  }
  return undefined
}

const bytesOf = (body: string | Uint8Array): Buffer =>
  typeof body === "string" ? Buffer.from(body, "utf8") : Buffer.from(body.buffer, body.byteOffset, body.byteLength)

/** Constant time over equal lengths; a length differs only for a malformed value, which is no secret. */
const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a, "utf8")
  const y = Buffer.from(b, "utf8")
  return x.length === y.length && timingSafeEqual(x, y)
}

const hmac = (key: string | Buffer, parts: ReadonlyArray<string | Buffer>) => {
  const h = createHmac("sha256", key)
  for (const p of parts) h.update(p)
  return h
}

const timely = (timestamp: number, tolerance: number, now: number): string | undefined =>
  Math.abs(now - timestamp) <= tolerance
    ? undefined
    : `the signature's timestamp ${timestamp} is more than ${tolerance} seconds from now`

/** The Standard Webhooks signature: undefined when it verifies, else why not. */
const standard = (
  headers: WebhookHeaders,
  body: Buffer,
  secret: string,
  tolerance: number,
  now: number
): string | undefined => {
  const id = header(headers, "webhook-id")
  const timestamp = header(headers, "webhook-timestamp")
  const signatures = header(headers, "webhook-signature") ?? ""
  if (id === undefined || timestamp === undefined) return "webhook-signature without webhook-id and webhook-timestamp"
  if (!/^\d{1,15}$/.test(timestamp)) return "webhook-timestamp is not unix seconds"
  const late = timely(Number(timestamp), tolerance, now)
  if (late !== undefined) return late
  const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64")
  const expected = hmac(key, [`${id}.${timestamp}.`, body]).digest("base64")
  const match = signatures
    .split(" ")
    .filter((s) => s.startsWith("v1,"))
    .some((s) => same(s.slice(3), expected))
  return match ? undefined : "webhook-signature does not match"
}

/** The Service-Signature: undefined when it verifies, else why not. */
const service = (value: string, body: Buffer, secret: string, tolerance: number, now: number): string | undefined => {
  let timestamp: number | undefined
  const candidates: Array<string> = []
  for (const part of value.split(",")) {
    const eq = part.indexOf("=")
    const [k, v] = eq < 0 ? [part, ""] : [part.slice(0, eq).trim(), part.slice(eq + 1).trim()]
    if (k === "t" && /^\d{1,15}$/.test(v)) timestamp = Number(v)
    else if (k === "v1") candidates.push(v)
  }
  if (timestamp === undefined || candidates.length === 0) return "Service-Signature is not t=<seconds>,v1=<hex>"
  const late = timely(timestamp, tolerance, now)
  if (late !== undefined) return late
  const expected = hmac(secret, [`${timestamp}.`, body]).digest("hex")
  return candidates.some((c) => same(c, expected)) ? undefined : "Service-Signature does not match"
}

/**
 * Verifies a delivery and returns its parsed body; throws WebhookVerificationError (answer
 * 400) when no signature verifies. Give the raw body exactly as received (parsing and
 * serialising it again can change its bytes). Both schemes are accepted: the Standard
 * Webhooks headers, Service-Signature, or both (one that verifies is enough).
 */
export const verifyWebhook = (
  rawBody: string | Uint8Array,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyOptions = {}
): WebhookDelivery | PingDelivery => {
  const tolerance = options.toleranceSeconds ?? 300
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000)
  const body = bytesOf(rawBody)
  const problems: Array<string> = []
  if (header(headers, "webhook-signature") !== undefined) {
    const problem = standard(headers, body, secret, tolerance, now)
    if (problem === undefined) return parse(body)
    problems.push(problem)
  }
  const serviceSignature = header(headers, "service-signature")
  if (serviceSignature !== undefined) {
    const problem = service(serviceSignature, body, secret, tolerance, now)
    if (problem === undefined) return parse(body)
    problems.push(problem)
  }
  throw new WebhookVerificationError(
    problems.length === 0 ? "no webhook-signature or Service-Signature header" : problems.join("; ")
  )
}

const parse = (body: Buffer): WebhookDelivery | PingDelivery => {
  try {
    return JSON.parse(body.toString("utf8")) as WebhookDelivery | PingDelivery
  } catch {
    throw new WebhookVerificationError("the signed body is not JSON")
  }
}
