// Signing secrets must be usable (HMAC needs the plaintext), so they are stored encrypted
// with AES-256-GCM under one service key, not hashed. Blob layout:
//   [1 byte version = 1][12 bytes IV][16 bytes auth tag][ciphertext]
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto"
import {
  chmodSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  closeSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync
} from "node:fs"
import { join } from "node:path"

const VERSION = 1
const IV_BYTES = 12
const TAG_BYTES = 16
const KEY_BYTES = 32
const HEADER_BYTES = 1 + IV_BYTES + TAG_BYTES

const checkKey = (key: Uint8Array): void => {
  if (key.length !== KEY_BYTES) throw new Error(`secrets key must be ${KEY_BYTES} bytes, got ${key.length}`)
}

/**
 * Encrypts a secret. `context` (e.g. the endpoint id), when given, is authenticated but not
 * stored: the blob then only decrypts with the same context, so blobs cannot be swapped
 * between rows.
 */
export const encryptSecret = (key: Uint8Array, plaintext: string, context?: string): Buffer => {
  checkKey(key)
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
  if (context !== undefined) cipher.setAAD(Buffer.from(context, "utf8"))
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
  return Buffer.concat([Buffer.of(VERSION), iv, cipher.getAuthTag(), body])
}

/** Decrypts a blob of encryptSecret; throws a clear Error on a wrong key, tampering or a bad format. */
export const decryptSecret = (key: Uint8Array, blob: Uint8Array, context?: string): string => {
  checkKey(key)
  if (blob.length < HEADER_BYTES) throw new Error(`encrypted secret is too short (${blob.length} bytes)`)
  if (blob[0] !== VERSION) throw new Error(`encrypted secret has unknown format version ${blob[0]}`)
  const iv = blob.subarray(1, 1 + IV_BYTES)
  const tag = blob.subarray(1 + IV_BYTES, HEADER_BYTES)
  const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
  decipher.setAuthTag(tag)
  if (context !== undefined) decipher.setAAD(Buffer.from(context, "utf8"))
  try {
    return Buffer.concat([decipher.update(blob.subarray(HEADER_BYTES)), decipher.final()]).toString("utf8")
  } catch {
    throw new Error("encrypted secret does not decrypt: wrong SECRETS_KEY, or the stored value was altered")
  }
}

/** What keyFingerprint authenticates: fixed, so one key always has one fingerprint. */
export const FINGERPRINT_LABEL = "safety-records-service secrets key fingerprint v1"

/**
 * Names a key without revealing it: HMAC-SHA256 under the key of a fixed label, in hex. The
 * database keeps it to tell whether a process has the key its secrets were encrypted under.
 * One-way like a hash, but bound to this label: it is used for nothing else, so it can never
 * equal some other value derived from the key (a plain SHA-256 of it, say).
 */
export const keyFingerprint = (key: Uint8Array): string => {
  checkKey(key)
  return createHmac("sha256", key).update(FINGERPRINT_LABEL, "utf8").digest("hex")
}

export type SecretsKey = {
  readonly key: Buffer
  /** Where it came from, for a startup log line. */
  readonly source: "SECRETS_KEY" | "file" | "created"
  readonly path: string | null
}

export const SECRETS_KEY_FILE = "secrets.key"

/** Strict base64 (standard or URL-safe, padding optional) of exactly 32 bytes. */
export const decodeKey = (text: string, what: string): Buffer => {
  const t = text.trim()
  const hint = "; make one with: openssl rand -base64 32"
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(t)) throw new Error(`${what} is not base64${hint}`)
  const key = Buffer.from(t.replace(/-/g, "+").replace(/_/g, "/"), "base64")
  if (key.length !== KEY_BYTES)
    throw new Error(`${what} must be base64 of ${KEY_BYTES} bytes, got ${key.length} bytes${hint}`)
  return key
}

/**
 * The key that encrypts signing secrets: SECRETS_KEY when configured, else
 * `<dataDir>/secrets.key`, created on first use with mode 0600. Losing it makes stored
 * secrets unreadable, so it lives beside the data it protects. Throws a clear Error.
 */
export const loadSecretsKey = (options: { configured?: string | undefined; dataDir: string }): SecretsKey => {
  if (options.configured !== undefined && options.configured.trim() !== "") {
    return { key: decodeKey(options.configured, "SECRETS_KEY"), source: "SECRETS_KEY", path: null }
  }
  const path = join(options.dataDir, SECRETS_KEY_FILE)
  const existing = readKeyFile(path)
  if (existing) return { key: existing, source: "file", path }
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 })
  const key = randomBytes(KEY_BYTES)
  // Write a private temp file, then link it into place: a concurrent starter either wins
  // or sees EEXIST and reads the complete winner, never a half-written file.
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`
  const fd = openSync(tmp, "wx", 0o600)
  try {
    writeSync(fd, `${key.toString("base64")}\n`)
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
  chmodSync(tmp, 0o600)
  try {
    linkSync(tmp, path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err
    return { key: readKeyFile(path)!, source: "file", path }
  } finally {
    unlinkSync(tmp)
  }
  return { key, source: "created", path }
}

const readKeyFile = (path: string): Buffer | undefined => {
  let mode: number
  try {
    mode = statSync(path).mode
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw err
  }
  // Like ssh with private keys: refuse a key others can read rather than use it silently.
  if ((mode & 0o077) !== 0) {
    throw new Error(
      `${path} is accessible by group or others (mode ${(mode & 0o777).toString(8)}); run: chmod 600 ${path}`
    )
  }
  return decodeKey(readFileSync(path, "utf8"), path)
}
