// Time-ordered event ids (UUID version 7, RFC 9562): new outbox rows land at the right edge
// of the primary key's B-tree instead of on random pages, which keeps capture's inserts
// cheap as the outbox grows. Made here rather than by uuidv7() so PostgreSQL < 18 works too.
import { randomFillSync } from "node:crypto"

const POOL = 4096
const random = Buffer.alloc(POOL)
let offset = POOL

const HEX = Buffer.from("0123456789abcdef", "latin1")
const DASH = 45

/** Writes `n` hex digits of `v` (below 16^n) at `at`. */
const hexInto = (b: Buffer, at: number, v: number, n: number) => {
  for (let i = n - 1; i >= 0; i--) {
    b[at + i] = HEX[v & 15]!
    v >>>= 4
  }
}

/** Writes a UUIDv7 for `ms` as its 36 characters at `at` of `b`: digits written straight into
 *  bytes, without strings in between (capture makes one per event). */
const writeUuidv7 = (b: Buffer, at: number, ms: number) => {
  if (offset + 10 > POOL) {
    randomFillSync(random)
    offset = 0
  }
  // 48-bit big-endian timestamp: 12 hex digits, in two halves of 24 bits.
  const t = Math.max(0, Math.floor(ms))
  hexInto(b, at, Math.floor(t / 0x1000000) % 0x1000000, 6)
  hexInto(b, at + 6, (t % 0x1000000) >>> 16, 2)
  b[at + 8] = DASH
  hexInto(b, at + 9, t % 0x10000, 4)
  b[at + 13] = DASH
  const r = random
  const o = offset
  offset += 10
  hexInto(b, at + 14, (r[o]! & 0x0f) | 0x70, 2) // version 7
  hexInto(b, at + 16, r[o + 1]!, 2)
  b[at + 18] = DASH
  hexInto(b, at + 19, (r[o + 2]! & 0x3f) | 0x80, 2) // variant 10
  hexInto(b, at + 21, r[o + 3]!, 2)
  b[at + 23] = DASH
  for (let i = 0; i < 6; i++) hexInto(b, at + 24 + 2 * i, r[o + 4 + i]!, 2)
}

const scratch = Buffer.alloc(36)

/** A UUIDv7 for `ms` (milliseconds since the epoch; now by default). */
export const uuidv7 = (ms: number = Date.now()): string => {
  writeUuidv7(scratch, 0, ms)
  return scratch.toString("latin1", 0, 36)
}

/** `count` UUIDv7s for `ms`, joined by `separator` (one ASCII character), made as one string. */
export const uuidv7s = (count: number, ms: number, separator: string): string => {
  if (count <= 0) return ""
  const b = Buffer.allocUnsafe(count * 37 - 1)
  const sep = separator.charCodeAt(0)
  for (let i = 0; i < count; i++) {
    if (i > 0) b[i * 37 - 1] = sep
    writeUuidv7(b, i * 37, ms)
  }
  return b.toString("latin1")
}
