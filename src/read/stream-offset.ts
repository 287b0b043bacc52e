// Offsets in the stream of record changes (GET /api/v1/stream: docs/integrators.md). An offset
// is opaque to clients and signed (the lists' cursor key): it names a place in commit order,
// (commit LSN, order of the transaction in its batch, resource, id), which is exactly the order
// service.record_changes is read in, with what the stream was bound to when it was issued:
// - `bind`, the stream it belongs to (its company, and the resources the request named, or the
//   consumer): an offset used on another stream is the client's mistake (400);
// - `fp`, the resources the key could read then: when that set changes, the changes the client
//   did not get cannot be told from those it need not get (409, mustRefetch);
// - `at`, the commit time of that place (ms), which a 409 gives as `since`.
// Places that are no change: the start (nothing yet), and an epoch's start (all that lies at or
// before an epoch's checkpoint, where changes were not written one by one).
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import type { CursorKey } from "./cursor.ts"
import { isUuid } from "../domain/ids.ts"

export interface Place {
  readonly lsn: bigint
  readonly ord: number
  readonly resource: string
  readonly id: string
}

export interface Offset extends Place {
  readonly bind: string
  readonly fp: string
  /** Commit time of the place, ms since the epoch (0: none). */
  readonly at: number
}

const NIL = "00000000-0000-0000-0000-000000000000"
/** After every change of its LSN: an epoch's start, or the place after=now gives at it. */
export const LAST_ORD = 2147483647
export const START: Place = { lsn: 0n, ord: -1, resource: "", id: NIL }
export const epochPlace = (lsn: bigint): Place => ({ lsn, ord: LAST_ORD, resource: "", id: NIL })

/** Commit order: negative when a comes first. Resource names compare byte-wise (collate "C" in SQL). */
export const comparePlaces = (a: Place, b: Place): number =>
  a.lsn !== b.lsn
    ? a.lsn < b.lsn
      ? -1
      : 1
    : a.ord !== b.ord
      ? a.ord - b.ord
      : a.resource !== b.resource
        ? a.resource < b.resource
          ? -1
          : 1
        : a.id === b.id
          ? 0
          : a.id < b.id
            ? -1
            : 1

const short = (text: string) => createHash("sha256").update(text).digest("base64url").slice(0, 10)

/** What a stream is bound to: its company and the resources named (sorted) or the consumer. */
export const bindingOf = (companyId: string, spec: string) => short(`${companyId}|${spec}`)

/** The resources a key could read, as a short digest. */
export const readableDigest = (readable: ReadonlyArray<string>) => short([...readable].sort().join(","))

const VERSION = "s1"
const MAC_BYTES = 12
const mac = (key: CursorKey, payload: string) =>
  createHmac("sha256", key).update(payload).digest().subarray(0, MAC_BYTES)

export const encodeOffset = (key: CursorKey, o: Offset): string => {
  const payload = `${VERSION}|${o.bind}|${o.fp}|${o.lsn.toString(16).padStart(16, "0")}|${o.ord}|${o.resource}|${o.id}|${o.at}`
  return `${Buffer.from(payload).toString("base64url")}.${mac(key, payload).toString("base64url")}`
}

export type OffsetError = "malformed" | "other-stream"

export const decodeOffset = (key: CursorKey, bind: string, text: string): Offset | { readonly error: OffsetError } => {
  const dot = text.indexOf(".")
  if (dot <= 0 || text.length > 400 || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(text)) return { error: "malformed" }
  const payload = Buffer.from(text.slice(0, dot), "base64url").toString("utf8")
  const given = Buffer.from(text.slice(dot + 1), "base64url")
  const expected = mac(key, payload)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { error: "malformed" }
  const [version, b, fp, lsn, ord, resource, id, at, ...rest] = payload.split("|")
  if (version !== VERSION || rest.length > 0 || at === undefined || !/^[0-9a-f]{16}$/.test(lsn!) || !isUuid(id!))
    return { error: "malformed" }
  if (b !== bind) return { error: "other-stream" }
  return { bind: b, fp: fp!, lsn: BigInt(`0x${lsn}`), ord: Number(ord), resource: resource!, id: id!, at: Number(at) }
}

export const OFFSET_ERROR_MESSAGES: Readonly<Record<OffsetError, string>> = {
  malformed: "after is not an offset this API issued; pass an offset or nextOffset it gave, unchanged, or now",
  "other-stream":
    "after is an offset of another stream: use it with the same resources (or the same consumer) as the answer it came from"
}

/** An LSN as PostgreSQL's pg_lsn text. */
export const lsnText = (lsn: bigint) =>
  `${(lsn >> 32n).toString(16).toUpperCase()}/${(lsn & 0xffffffffn).toString(16).toUpperCase()}`
