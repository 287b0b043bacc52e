// Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t." + raw body>, keyed with the
// whole whsec_... string. This is Stripe's scheme byte for byte, so any Stripe-compatible
// verifier (e.g. Stripe.webhooks.constructEvent) accepts our deliveries.
//
// Beside it, the Standard Webhooks headers (standardwebhooks.com; docs/events.md#signing), so that
// receivers built on its libraries (standardwebhooks, Svix and others) verify them too:
// webhook-id (the delivery id), webhook-timestamp (unix seconds) and webhook-signature:
// v1,<base64 HMAC-SHA256 of "<id>.<timestamp>." + raw body>, keyed with the bytes the part of
// the secret after whsec_ encodes in base64. Every secret the service has made is whsec_ +
// base64 of 32 random bytes (newSecret), so the same secret serves both schemes unchanged.
//
// Rotation with overlap (docs/events.md#secret-rotation): until the overlap ends a delivery is signed with the new
// secret and the old one, the new first: two v1= entries in Service-Signature (as Stripe does
// while an old secret is still live) and two space-separated v1,<base64> entries in
// webhook-signature (the Standard Webhooks spec allows several). Verifiers accept a delivery
// when any entry matches, so a receiver holding either secret verifies it.
import { createHmac, createSecretKey, randomBytes, timingSafeEqual, type KeyObject } from "node:crypto"

export const SIGNATURE_TOLERANCE_SECONDS = 300

type Body = string | Uint8Array

/** The secrets a delivery is signed with: one, or the current one and then the previous one. */
export type Secrets = string | ReadonlyArray<string>

const listOf = <S>(secrets: S | ReadonlyArray<S>): ReadonlyArray<S> => {
  const list = Array.isArray(secrets) ? (secrets as ReadonlyArray<S>) : [secrets as S]
  if (list.length === 0) throw new RangeError("a delivery is signed with at least one secret")
  return list
}

const hmacHex = (secret: string | KeyObject, timestampSeconds: number, body: Body): string =>
  createHmac("sha256", secret)
    .update(`${timestampSeconds}.`, "utf8")
    .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
    .digest("hex")

/** The Service-Signature header value for these exact body bytes: one v1= per secret, in order. */
export const sign = (secrets: Secrets, timestampSeconds: number, body: Body): string => {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`signature timestamp must be whole unix seconds, got ${timestampSeconds}`)
  }
  return `t=${timestampSeconds},${listOf(secrets)
    .map((s) => `v1=${hmacHex(s, timestampSeconds, body)}`)
    .join(",")}`
}

/** The key of the Standard Webhooks signature: the base64 after whsec_ (or the whole secret without that prefix). */
export const standardKey = (secret: string): Buffer =>
  Buffer.from(secret.startsWith("whsec_") ? secret.slice(6) : secret, "base64")

/** The Standard Webhooks headers of a delivery, for these exact body bytes: one v1,<base64> per secret, in order. */
export const standardHeaders = (
  secrets: string | Buffer | ReadonlyArray<string | Buffer>,
  id: string,
  timestampSeconds: number,
  body: Body
): { readonly "webhook-id": string; readonly "webhook-timestamp": string; readonly "webhook-signature": string } => {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`signature timestamp must be whole unix seconds, got ${timestampSeconds}`)
  }
  const signature = (secret: string | Buffer) =>
    createHmac("sha256", typeof secret === "string" ? standardKey(secret) : secret)
      .update(`${id}.${timestampSeconds}.`, "utf8")
      .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
      .digest("base64")
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": listOf<string | Buffer>(secrets)
      .map((s) => `v1,${signature(s)}`)
      .join(" ")
  }
}

export type VerifyResult =
  | { readonly ok: true; readonly timestamp: number }
  | { readonly ok: false; readonly reason: string }

/**
 * What a receiver does (docs/events.md#signing): recompute v1 over the raw body,
 * compare in constant time, and accept t only within the tolerance of now (either side).
 * Several v1 entries are allowed, as in Stripe's header, and any match is accepted.
 */
export const verify = (
  header: string,
  body: Body,
  secret: string,
  toleranceSeconds: number = SIGNATURE_TOLERANCE_SECONDS,
  nowSeconds: number = Math.floor(Date.now() / 1000)
): VerifyResult => {
  let timestamp: number | undefined
  const candidates: Array<string> = []
  for (const part of header.split(",")) {
    const eq = part.indexOf("=")
    if (eq === -1) continue
    const key = part.slice(0, eq).trim()
    const value = part.slice(eq + 1).trim()
    if (key === "t" && /^\d{1,15}$/.test(value)) timestamp = Number(value)
    else if (key === "v1") candidates.push(value)
  }
  if (timestamp === undefined) return { ok: false, reason: "no timestamp (t=) in the signature header" }
  if (candidates.length === 0) return { ok: false, reason: "no v1 signature in the signature header" }
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return { ok: false, reason: `timestamp ${timestamp} is outside the ${toleranceSeconds} s tolerance` }
  }
  const expected = Buffer.from(hmacHex(secret, timestamp, body), "utf8")
  // Length is public (always 64 hex digits); only equal-length values are compared.
  const match = candidates.some((c) => {
    const given = Buffer.from(c, "utf8")
    return given.length === expected.length && timingSafeEqual(given, expected)
  })
  return match ? { ok: true, timestamp } : { ok: false, reason: "signature does not match" }
}

/** A new signing secret: whsec_ + base64 of 32 random bytes. */
export const newSecret = (): string => `whsec_${randomBytes(32).toString("base64")}`

/**
 * A secret's two HMAC keys, made once: createHmac imports a raw key on every call, and in
 * Node 24 that cost ~30 µs for a Buffer key (the Standard Webhooks one) and ~5 µs for a
 * string, more than the HMAC itself; a KeyObject is used as it is.
 */
const keyObjects = new Map<string, { readonly stripe: KeyObject; readonly standard: KeyObject }>()
const keysOf = (secret: string) => {
  let k = keyObjects.get(secret)
  if (k === undefined) {
    k = { stripe: createSecretKey(Buffer.from(secret, "utf8")), standard: createSecretKey(standardKey(secret)) }
    if (keyObjects.size >= 10_000) keyObjects.clear()
    keyObjects.set(secret, k)
  }
  return k
}

/**
 * The identifying and signature headers of a delivery with this id and these body bytes: both
 * schemes, each with one signature per secret (the current one, then the previous one while
 * its overlap lasts). The same values as sign and standardHeaders, with cached keys.
 */
export const signedHeaders = (
  secrets: Secrets,
  id: string,
  timestampSeconds: number,
  body: Body
): Record<string, string> => {
  if (!Number.isSafeInteger(timestampSeconds) || timestampSeconds < 0) {
    throw new RangeError(`signature timestamp must be whole unix seconds, got ${timestampSeconds}`)
  }
  const keys = listOf(secrets).map(keysOf)
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body
  const standard = (key: KeyObject) =>
    createHmac("sha256", key).update(`${id}.${timestampSeconds}.`, "utf8").update(bytes).digest("base64")
  return {
    "service-delivery": id,
    "service-signature": `t=${timestampSeconds},${keys.map((k) => `v1=${hmacHex(k.stripe, timestampSeconds, bytes)}`).join(",")}`,
    "webhook-id": id,
    "webhook-timestamp": String(timestampSeconds),
    "webhook-signature": keys.map((k) => `v1,${standard(k.standard)}`).join(" ")
  }
}
