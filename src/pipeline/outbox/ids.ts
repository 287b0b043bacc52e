// Time-ordered event ids (UUID version 7, RFC 9562): new outbox rows land at the right edge
// of the primary key's B-tree instead of on random pages, which keeps capture's inserts
// cheap as the outbox grows. Capture's from each event's place in the WAL (eventId), the
// service's own (alerts) with random bits (uuidv7). Made here rather than by uuidv7() so
// PostgreSQL < 18 works too.
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

/** The random part of the last id made (10 bytes: rand_a's 12 bits in the low nibble of the
 *  first and the second, rand_b's 62 bits in the low 6 bits of the third and the rest), and its ms. */
const last = Buffer.alloc(10)
let lastMs = -1

/**
 * The random part of the next id for `ms`. Within one millisecond, ids grow (RFC 9562's
 * monotonic random method: the previous one's random bits plus a random step of up to 2^24):
 * ids made in random order within one millisecond landed all over the B-tree's right end,
 * splitting pages half full (66% full against 90%; docs/benchmarks.md, "Big tenants"). A new
 * millisecond starts from fresh random bits.
 */
const nextRandom = (ms: number): Buffer => {
  if (offset + 13 > POOL) {
    randomFillSync(random)
    offset = 0
  }
  const r = random
  const o = offset
  offset += 13
  if (ms !== lastMs) {
    lastMs = ms
    r.copy(last, 0, o, o + 10)
    last[0] = last[0]! & 0x0f
    last[2] = last[2]! & 0x3f
    return last
  }
  // Add a step of 1 to 2^24 to the 74-bit number, from its last byte up.
  let carry = 1 + ((r[o + 10]! << 16) | (r[o + 11]! << 8) | r[o + 12]!)
  for (let i = 9; i >= 0 && carry > 0; i--) {
    const width = i === 0 ? 0x10 : i === 2 ? 0x40 : 0x100
    const v = last[i]! + carry
    last[i] = v % width
    carry = Math.floor(v / width)
  }
  // Past 2^74 ids in one millisecond (not reachable): start again from fresh bits.
  if (carry > 0) {
    lastMs = -1
    return nextRandom(ms)
  }
  return last
}

/** A UUIDv7's first 14 characters: its 48-bit big-endian millisecond (12 hex digits, in two halves of 24 bits) and dashes. */
const writeMs = (b: Buffer, at: number, t: number) => {
  hexInto(b, at, Math.floor(t / 0x1000000) % 0x1000000, 6)
  hexInto(b, at + 6, (t % 0x1000000) >>> 16, 2)
  b[at + 8] = DASH
  hexInto(b, at + 9, t % 0x10000, 4)
  b[at + 13] = DASH
}

/** Writes a UUIDv7 for `ms` as its 36 characters at `at` of `b`: digits written straight into bytes. */
const writeUuidv7 = (b: Buffer, at: number, ms: number) => {
  const t = Math.max(0, Math.floor(ms))
  const r = nextRandom(t)
  writeMs(b, at, t)
  hexInto(b, at + 14, r[0]! | 0x70, 2) // version 7
  hexInto(b, at + 16, r[1]!, 2)
  b[at + 18] = DASH
  hexInto(b, at + 19, r[2]! | 0x80, 2) // variant 10
  hexInto(b, at + 21, r[3]!, 2)
  b[at + 23] = DASH
  for (let i = 0; i < 6; i++) hexInto(b, at + 24 + 2 * i, r[4 + i]!, 2)
}

const scratch = Buffer.alloc(36)

/** A UUIDv7 for `ms` (milliseconds since the epoch; now by default). */
export const uuidv7 = (ms: number = Date.now()): string => {
  writeUuidv7(scratch, 0, ms)
  return scratch.toString("latin1", 0, 36)
}

const RAND_B = (1n << 62n) - 1n
const LSN_BITS = (1n << 42n) - 1n

/**
 * An event's id, from its place in the app's WAL: a UUIDv7 whose time is the commit's (ms) and
 * whose 74 other bits are the commit LSN's low 42 and the event's `seq` (32). The same change
 * gives the same id however often capture writes it: a batch the service's database lost in a
 * crash (its commit is asynchronous) is written again with the ids an integrator may have read
 * from the events feed. Unique because (commit LSN, seq) is, and two commits in one millisecond
 * cannot lie 4 TB of WAL apart; within a millisecond ids grow in WAL order, at the B-tree's right edge.
 */
export const eventId = (ms: number, lsn: bigint, seq: number): string => {
  const v = ((lsn & LSN_BITS) << 32n) | BigInt(seq >>> 0)
  const a = Number(v >> 62n) // 12 bits
  const b = v & RAND_B
  const out = scratch // one per event on capture's path: no buffer of its own
  writeMs(out, 0, Math.max(0, Math.floor(ms)))
  hexInto(out, 14, 0x7000 | a, 4) // version 7
  out[18] = DASH
  hexInto(out, 19, 0x8000 | Number(b >> 48n), 4) // variant 10, then rand_b's top 14 bits
  out[23] = DASH
  hexInto(out, 24, Number((b >> 24n) & 0xffffffn), 6)
  hexInto(out, 30, Number(b & 0xffffffn), 6)
  return out.toString("latin1", 0, 36)
}
