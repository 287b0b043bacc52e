// Bearer secrets: API keys (mk_...) and admin tokens (mat_...). Only a SHA-256 fingerprint
// is stored; the secret itself is shown once. Pure except for the random bytes.
import { createHash, hash, randomBytes } from "node:crypto"

export const API_KEY_PREFIX = "mk_"
export const ADMIN_TOKEN_PREFIX = "mat_"

const BODY = /^[A-Za-z0-9_-]{43}$/

export interface NewSecret {
  readonly secret: string
  readonly fingerprint: Buffer
  /** The first characters, shown in lists to recognise a secret without revealing it. */
  readonly prefix: string
}

export const fingerprintOf = (secret: string): Buffer => hash("sha256", secret, "buffer")

export const newSecret = (kind: typeof API_KEY_PREFIX | typeof ADMIN_TOKEN_PREFIX): NewSecret => {
  const secret = kind + randomBytes(32).toString("base64url")
  return { secret, fingerprint: fingerprintOf(secret), prefix: secret.slice(0, kind.length + 6) }
}

/** Whether a bearer credential has the shape of one of our secrets (cheap, before any lookup). */
export const looksLike = (kind: typeof API_KEY_PREFIX | typeof ADMIN_TOKEN_PREFIX, credential: string): boolean =>
  credential.startsWith(kind) && BODY.test(credential.slice(kind.length))

// Session ids and CSRF tokens of the admin pages (src/access/sessions.ts).
const TOKEN = /^[A-Za-z0-9_-]{16,128}$/

/** A new random token (session id, CSRF token): 32 bytes, base64url. */
export const randomToken = (): string => randomBytes(32).toString("base64url")

/** Whether text has the shape of one of our tokens (checked before any lookup or comparison). */
export const isToken = (text: string | undefined): text is string => text !== undefined && TOKEN.test(text)

export const sha256 = (text: string): Buffer => createHash("sha256").update(text, "utf8").digest()
