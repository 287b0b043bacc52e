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
  const b = new Array<number>(16)
  // 48-bit big-endian timestamp
  let t = Math.max(0, Math.floor(ms))
  for (let i = 5; i >= 0; i--) {
    b[i] = t % 256
    t = Math.floor(t / 256)
  }
  for (let i = 6; i < 16; i++) b[i] = random[offset++]!
  b[6] = (b[6]! & 0x0f) | 0x70 // version 7
  b[8] = (b[8]! & 0x3f) | 0x80 // variant 10
  const h = b.map((x) => hex[x]!)
  return `${h[0]}${h[1]}${h[2]}${h[3]}-${h[4]}${h[5]}-${h[6]}${h[7]}-${h[8]}${h[9]}-${h[10]}${h[11]}${h[12]}${h[13]}${h[14]}${h[15]}`
}
