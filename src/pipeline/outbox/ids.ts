// Time-ordered event ids (UUID version 7, RFC 9562): new outbox rows land at the right edge
// of the primary key's B-tree instead of on random pages, which keeps capture's inserts
// cheap as the outbox grows. Made here rather than by uuidv7() so PostgreSQL < 18 works too.
import { randomFillSync } from "node:crypto"

const POOL = 4096
const random = Buffer.alloc(POOL)
let offset = POOL

const hex = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"))

/** A UUIDv7 for `ms` (milliseconds since the epoch; now by default). */
export const uuidv7 = (ms: number = Date.now()): string => {
  if (offset + 10 > POOL) {
    randomFillSync(random)
    offset = 0
  }
  // 48-bit big-endian timestamp: 12 hex digits. Built as one string, without byte arrays:
  // capture makes one per event.
  const t = Math.max(0, Math.floor(ms))
  const time = (Math.floor(t / 0x1000000).toString(16).padStart(6, "0") + (t % 0x1000000).toString(16).padStart(6, "0")).slice(-12)
  const r = random
  const o = offset
  offset += 10
  return (
    time.slice(0, 8) + "-" + time.slice(8) + "-" +
    hex[(r[o]! & 0x0f) | 0x70]! + hex[r[o + 1]!]! + "-" + // version 7
    hex[(r[o + 2]! & 0x3f) | 0x80]! + hex[r[o + 3]!]! + "-" + // variant 10
    hex[r[o + 4]!]! + hex[r[o + 5]!]! + hex[r[o + 6]!]! + hex[r[o + 7]!]! + hex[r[o + 8]!]! + hex[r[o + 9]!]!
  )
}
