// The stream of record changes (GET /api/v1/stream, and consumers' streams: docs/integrators.md#following-the-stream).
// service.record_changes holds each record's latest change, placed in commit order (capture
// writes it with the view, in the batch's transaction); a read takes the company's changes after
// an offset, of the resources the key may read, in that order, each with the record's view: the
// exact JSON GET /api/v1/<resource>/<id> answers (shaped and redacted at capture), or null for a
// delete. One statement also checks the key (key-check.ts) and reads what decides whether the
// offset can be continued: the latest epoch (sql/052), what retention removed (sql/080) and the
// company's newest change (a standby that has not reached the offset sends the read to the
// primary: answers never go back in time).
import { Context, Effect, Layer } from "effect"
import type postgres from "postgres"
import { invalid, type Invalid } from "../domain/errors.ts"
import { isResource, type Resource } from "../domain/resources.ts"
import type { KeyState, RefusedState } from "../access/keys/key-check.ts"
import { keyStateRelation } from "../access/keys/key-check.ts"
import { keyRefused } from "../access/keys/rules.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import { ApiSettings } from "../platform/api-settings.ts"
import { Lru, stringBytes } from "../platform/lru.ts"
import type { CursorKey } from "./cursor.ts"
import { readSetup, ISO_MILLIS, type RefusalOf } from "./served.ts"
import type { ReadRouter } from "./routing.ts"
import {
  bindingOf,
  comparePlaces,
  decodeOffset,
  encodeOffset,
  epochPlace,
  lsnText,
  OFFSET_ERROR_MESSAGES,
  type Offset,
  type Place,
  readableDigest,
  START
} from "./stream-offset.ts"
import { makeStreamWake, type StreamWake } from "./stream-wake.ts"
import type { Forbidden, Unauthorized } from "../domain/errors.ts"

/** Items per answer when the request gives no limit, and the most it may ask. */
export const STREAM_DEFAULT_LIMIT = 100
export const STREAM_MAX_LIMIT = 1000
/** How far back the stream goes (retention: src/pipeline/projection/record-changes.ts). */
export const STREAM_WINDOW_DAYS = 30
/** The longest long-poll, in seconds. */
export const STREAM_MAX_WAIT = 60

export interface StreamKey {
  readonly keyId: string
  readonly host: string | undefined
  readonly companyId: string
}

/** What a read asks for, its parameters checked. */
export interface StreamAsk {
  /** The resources named; undefined: every one the key may read. */
  readonly resources: ReadonlyArray<Resource> | undefined
  /** What offsets of this stream are bound to besides the company: the resources named, or a consumer. */
  readonly spec: string
  /** An offset; "now"; undefined: from the oldest change kept. */
  readonly after: string | undefined
  readonly limit: number
}

/** One answer of the stream. */
export type StreamRead =
  | {
      readonly _tag: "Page"
      /** The items' JSON, comma-separated (no brackets). */
      readonly items: string
      readonly count: number
      readonly nextOffset: string
      readonly next: Place
      /** Every item's offset (for event streams' ids) in order. */
      readonly offsets: ReadonlyArray<string>
      readonly itemJson: ReadonlyArray<string>
      /** The key's readable resources that this stream reads. */
      readonly reads: ReadonlySet<string>
      /** The company's newest change that the read saw. */
      readonly head: bigint
      /** More changes wait past this answer. */
      readonly more: boolean
    }
  | { readonly _tag: "Refused"; readonly state: RefusedState }
  | { readonly _tag: "Invalid"; readonly error: Invalid }
  | { readonly _tag: "Forbidden"; readonly error: Forbidden | Unauthorized }
  | { readonly _tag: "Refetch"; readonly error: string; readonly since: string }

/** An answer with items (or none, and where the next read starts). */
export type StreamPage = Extract<StreamRead, { _tag: "Page" }>
/** The stream cannot go on from the offset asked: copy again. */
export type StreamRefetch = Extract<StreamRead, { _tag: "Refetch" }>

interface Row {
  readonly state: KeyState
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_modules: ReadonlyArray<string> | null
  readonly e_lsn: string | null
  readonly e_at: string | null
  readonly p_lsn: string | null
  readonly p_ord: number | null
  readonly p_resource: string | null
  readonly p_id: string | null
  readonly h_lsn: string | null
  readonly h_ord: number | null
  readonly h_resource: string | null
  readonly h_id: string | null
  readonly h_ms: string | null
  readonly lsn: string | null
  readonly ord: number | null
  readonly resource: string | null
  readonly id: string | null
  readonly op: string | null
  readonly ms: string | null
  readonly committed: string | null
  readonly body: string | null
}

const lsnOf = (text: string): bigint => {
  const [hi, lo] = text.split("/")
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}

const place = (lsn: string, ord: number, resource: string, id: string): Place => ({
  lsn: lsnOf(lsn),
  ord,
  resource,
  id
})

const maxPlace = (...ps: ReadonlyArray<Place | undefined>): Place =>
  ps.reduce<Place>((a, b) => (b !== undefined && comparePlaces(b, a) > 0 ? b : a), START)

/** The one statement: the key, the epoch, what retention cut, the head, and up to `limit` + 1 changes after `from`. */
const readRows = (
  sql: postgres.Sql,
  key: StreamKey,
  resources: ReadonlyArray<string> | undefined,
  from: Place | "epoch",
  limit: number
) => {
  const f = from === "epoch" ? START : from
  // Without an offset the read starts at the latest epoch's start: what lies before it was not
  // all written one by one.
  const start =
    from === "epoch"
      ? sql`coalesce(e.lsn, '0/0'::pg_lsn), case when e.lsn is null then -1 else 2147483647 end, ''::text collate "C", '00000000-0000-0000-0000-000000000000'::uuid`
      : sql`${lsnText(f.lsn)}::pg_lsn, ${f.ord}::int, ${f.resource}::text collate "C", ${f.id}::uuid`
  const startLsn = from === "epoch" ? sql`coalesce(e.lsn, '0/0'::pg_lsn)` : sql`${lsnText(f.lsn)}::pg_lsn`
  return sql<Row[]>`
    select s.state, s.k_scopes, s.c_modules, e.lsn::text as e_lsn, e.at as e_at,
           p.commit_lsn::text as p_lsn, p.ord as p_ord, p.resource as p_resource, p.id::text as p_id,
           h.commit_lsn::text as h_lsn, h.ord as h_ord, h.resource as h_resource, h.id::text as h_id,
           (extract(epoch from h.committed_at) * 1000)::bigint::text as h_ms,
           w.lsn, w.ord, w.resource, w.id, w.op, w.ms, w.committed, w.body
      from ${keyStateRelation(sql, key.keyId, key.host, undefined)}
      left join lateral (
        select checkpoint_lsn as lsn, to_char(at at time zone 'UTC', ${sql.unsafe(ISO_MILLIS)}) as at
          from service.stream_epochs order by checkpoint_lsn desc limit 1
      ) e on true
      left join service.stream_pruned p on p.company_id = ${key.companyId}
      left join lateral (
        select r.commit_lsn, r.ord, r.resource, r.id, r.committed_at from service.record_changes r
         where r.company_id = ${key.companyId}
         order by r.commit_lsn desc, r.ord desc, r.resource collate "C" desc, r.id desc limit 1
      ) h on true
      left join lateral (
        select r.commit_lsn::text as lsn, r.ord, r.resource, r.id::text as id, r.op,
               (extract(epoch from r.committed_at) * 1000)::bigint::text as ms,
               to_char(r.committed_at at time zone 'UTC', ${sql.unsafe(ISO_MILLIS)}) as committed,
               v.body
          from service.record_changes r
          left join service.views v on r.op = 'upsert' and v.resource = r.resource and v.id = r.id
         where s.state = 'ok' and r.company_id = ${key.companyId}
           and r.resource = any(s.k_scopes) and r.resource = any(s.c_modules)
           ${resources === undefined ? sql`` : sql`and r.resource = any(${resources as string[]}::text[])`}
           and r.commit_lsn >= ${startLsn}
           and (r.commit_lsn, r.ord, r.resource collate "C", r.id) > (${start})
         order by r.commit_lsn, r.ord, r.resource collate "C", r.id
         limit ${limit + 1}
      ) w on true`
}

export interface StreamCore {
  /** One read: from `after` (or the stored position), at most `limit` items; on `primaryOnly`, never a standby. */
  readonly read: (key: StreamKey, ask: StreamAsk, primaryOnly?: boolean) => Promise<StreamRead>
  readonly wake: StreamWake
  readonly cursorKey: CursorKey
  /** Decodes an offset of this stream (consumers' acks). */
  readonly decode: (key: StreamKey, spec: string, offset: string) => Offset | { readonly error: string }
}

export const makeStreamCore = (
  primary: postgres.Sql,
  router: ReadRouter,
  cursorKey: CursorKey,
  wake: StreamWake
): StreamCore => {
  const decode = (key: StreamKey, spec: string, text: string) => {
    const o = decodeOffset(cursorKey, bindingOf(key.companyId, spec), text)
    return "error" in o ? { error: OFFSET_ERROR_MESSAGES[o.error] } : o
  }

  const read = async (key: StreamKey, ask: StreamAsk, primaryOnly = false): Promise<StreamRead> => {
    const bind = bindingOf(key.companyId, ask.spec)
    let offset: Offset | undefined
    if (ask.after !== undefined && ask.after !== "now") {
      const o = decodeOffset(cursorKey, bind, ask.after)
      if ("error" in o) return { _tag: "Invalid", error: invalid(OFFSET_ERROR_MESSAGES[o.error], { field: "after" }) }
      offset = o
    }
    const now = ask.after === "now"
    const from: Place | "epoch" = offset ?? "epoch"
    const limit = now ? -1 : ask.limit
    const once = async (
      db: postgres.Sql,
      seen?: (k: { k_scopes: ReadonlyArray<string> | null; c_modules: ReadonlyArray<string> | null }) => void
    ): Promise<StreamRead | "behind"> => {
      const rows = await readRows(db, key, ask.resources, from, limit)
      const first = rows[0]
      if (first === undefined) return { _tag: "Refused", state: "unknown" }
      if (first.state !== "ok") return { _tag: "Refused", state: first.state }
      seen?.(first)
      const scopes = new Set(first.k_scopes ?? [])
      const modules = new Set(first.c_modules ?? [])
      if (ask.resources !== undefined) {
        for (const r of ask.resources) {
          if (!scopes.has(r)) return { _tag: "Forbidden", error: keyRefused({ _tag: "Scope", resource: r }) }
          if (!modules.has(r)) return { _tag: "Forbidden", error: keyRefused({ _tag: "Module", resource: r }) }
        }
      }
      const reads = new Set(
        [...scopes].filter(
          (r) =>
            modules.has(r) &&
            (ask.resources === undefined || (ask.resources as ReadonlyArray<string>).includes(r)) &&
            isResource(r)
        )
      )
      const fp = readableDigest([...reads])
      const epoch = first.e_lsn === null ? undefined : epochPlace(lsnOf(first.e_lsn))
      const pruned = first.p_lsn === null ? undefined : place(first.p_lsn, first.p_ord!, first.p_resource!, first.p_id!)
      const head = first.h_lsn === null ? undefined : place(first.h_lsn, first.h_ord!, first.h_resource!, first.h_id!)
      const headLsn = head?.lsn ?? 0n
      if (offset !== undefined) {
        // A standby that has not reached the offset would answer from before it.
        if (db !== primary && comparePlaces(offset, maxPlace(head, epoch, pruned)) > 0) return "behind"
        const since = new Date(offset.at).toISOString()
        if (epoch !== undefined && comparePlaces(offset, epoch) < 0)
          return {
            _tag: "Refetch",
            since,
            error: `the stream cannot be continued from this offset: the service's views were rebuilt at ${first.e_at} (a first start, a lost replication slot, a fresh snapshot or rebuild-views), and changes up to then were not kept one by one; copy the records again from the lists, then follow from after=now`
          }
        if (pruned !== undefined && comparePlaces(offset, pruned) < 0)
          return {
            _tag: "Refetch",
            since,
            error: `the stream cannot be continued from this offset: it is older than the ${STREAM_WINDOW_DAYS} days of changes kept; copy the records again from the lists, then follow from after=now`
          }
        if (offset.fp !== fp)
          return {
            _tag: "Refetch",
            since,
            error:
              "the stream cannot be continued from this offset: the resources this key may read changed since it was issued (its scopes, or the company's modules); copy the records again from the lists, then follow from after=now"
          }
      }
      const atOf = (p: Place | undefined, ms: string | null) => (p === undefined || ms === null ? 0 : Number(ms))
      if (now) {
        // The present: past every change of the company and the latest epoch's start.
        const at = maxPlace(head, epoch)
        const ms = at === head ? atOf(head, first.h_ms) : first.e_at === null ? 0 : Date.parse(first.e_at)
        const o: Offset = { ...at, bind, fp, at: ms }
        const nextOffset = encodeOffset(cursorKey, o)
        return {
          _tag: "Page",
          items: "",
          count: 0,
          nextOffset,
          next: at,
          offsets: [],
          itemJson: [],
          reads,
          head: headLsn,
          more: false
        }
      }
      const n = first.id === null ? 0 : rows.length
      const more = n > ask.limit
      const count = more ? ask.limit : n
      const offsets: Array<string> = []
      const itemJson: Array<string> = []
      let last: Offset | undefined
      for (let i = 0; i < count; i++) {
        const r = rows[i]!
        last = { lsn: lsnOf(r.lsn!), ord: r.ord!, resource: r.resource!, id: r.id!, bind, fp, at: Number(r.ms) }
        const off = encodeOffset(cursorKey, last)
        offsets.push(off)
        // Resource names, ids, offsets and times need no escaping; the body is the view's JSON.
        itemJson.push(
          `{"offset":"${off}","resource":"${r.resource}","id":"${r.id}","op":"${r.op}","record":${r.op === "delete" || r.body === null ? "null" : r.body},"committedAt":"${r.committed}"}`
        )
      }
      // Nothing new: the same offset (an epoch's start when none was given).
      const start =
        offset ??
        (epoch === undefined ? undefined : { ...epoch, bind, fp, at: first.e_at === null ? 0 : Date.parse(first.e_at) })
      const nextOffset =
        last !== undefined
          ? offsets[offsets.length - 1]!
          : ask.after !== undefined
            ? ask.after
            : encodeOffset(cursorKey, start ?? { ...START, bind, fp, at: 0 })
      return {
        _tag: "Page",
        items: itemJson.join(","),
        count,
        nextOffset,
        next: last ?? start ?? START,
        offsets,
        itemJson,
        reads,
        head: headLsn,
        more
      }
    }
    if (primaryOnly || now) return (await once(primary)) as StreamRead
    let behind = false
    const served = await router.run(key, undefined, async (db, seen) => {
      const r = await once(db.sql, seen)
      if (r === "behind") {
        behind = true
        return { _tag: "Failed", error: "behind" as const }
      }
      return { _tag: "Body", body: JSON.stringify(null), result: r } as never
    })
    void served
    return behind ? ((await once(primary)) as StreamRead) : lastResult(served)
  }

  return { read, wake, cursorKey, decode }
}

// The router answers a Served; the stream's own result rides along on it.
const lastResult = (served: unknown): StreamRead => {
  const s = served as { _tag: string; result?: StreamRead; state?: RefusedState }
  if (s._tag === "Refused") return { _tag: "Refused", state: s.state! }
  return s.result!
}

export class StreamFeed extends Context.Service<
  StreamFeed,
  {
    readonly core: StreamCore
    readonly refusal: RefusalOf
    readonly primary: postgres.Sql
  }
>()("service/read/StreamFeed") {
  static readonly layer = Layer.effect(
    StreamFeed,
    Effect.gen(function* () {
      const { sql, keys, cursorKey, router } = yield* readSetup
      const settings = yield* ApiSettings
      const wake = yield* Effect.acquireRelease(
        Effect.promise(() =>
          makeStreamWake(sql, { perKey: settings.streamWaitersPerKey, total: settings.streamWaiters })
        ),
        (w) => Effect.promise(() => w.close())
      )
      return StreamFeed.of({ core: makeStreamCore(sql, router, cursorKey, wake), refusal: keys.refusal, primary: sql })
    })
  )
}

export type { CurrentKeyShape }

/**
 * A waiting request's client gone: what its wait listens to. An AbortSignal's listener costs a
 * map, a listener record and a wrapper per waiting request; this costs one field.
 */
export class Hangup {
  aborted = false
  private listener: (() => void) | null = null
  /** Called once when the client goes (at once if it has), unless `off` came first. */
  on(f: () => void): void {
    if (this.aborted) f()
    else this.listener = f
  }
  off(): void {
    this.listener = null
  }
  abort(): void {
    if (this.aborted) return
    this.aborted = true
    const f = this.listener
    this.listener = null
    f?.()
  }
}

/**
 * Until a change the read may show is committed after its read (woken), or `deadline` (ms) passes,
 * or `signal` aborts. "again": a notification came in while it read, so read again at once.
 */
export const changeAfter = (
  wake: StreamWake,
  key: StreamKey,
  page: StreamPage,
  ticket: number,
  deadline: number,
  signal: Hangup
): Promise<"woken" | "again" | "timeout" | "aborted"> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve("aborted")
    let timer: ReturnType<typeof setTimeout> | undefined
    let reg: ReturnType<StreamWake["register"]> | undefined
    const done = (why: "woken" | "timeout" | "aborted") => {
      if (timer !== undefined) clearTimeout(timer)
      signal.off()
      if (reg?._tag === "Waiting") reg.cancel()
      resolve(why)
    }
    reg = wake.register(
      { keyId: key.keyId, companyId: key.companyId, resources: page.reads, head: page.head, wake: () => done("woken") },
      ticket
    )
    if (reg._tag === "ReadAgain") return resolve("again")
    signal.on(() => done("aborted"))
    if (Number.isFinite(deadline)) timer = setTimeout(() => done("timeout"), Math.max(0, deadline - Date.now()))
  })

/** How long a read that reached the end answers for the next read from its end, at most (ms). */
const FRONTIER_MS = 1000
/** Streams whose end is remembered at once, at most (one entry per key, stream and limit), and their bytes. */
const FRONTIER_MAX = 10_000
const FRONTIER_BYTES = 16 * 1024 * 1024

/**
 * Requests that arrive or are woken together often ask the same (the same key, stream and offset:
 * clients that follow from the same place): one statement, in flight, answers them all. Reads
 * woken by a commit go to the primary, which has it. Only requests that took the same ticket
 * (no notification between them) share a read: one that began before a commit's notification
 * may not see that commit, and a request that took its ticket after the notification would then
 * wait for a change it was never woken for (the wake has announced it already).
 *
 * A follower's next request starts where its last answer ended. When that answer was read on the
 * primary, reached the end (no `more`) and no notification came in since its ticket, a read from
 * there would find nothing the wake has not yet to announce: it is answered from memory, no
 * items, and the request goes on to wait (a commit whose notification is still on its way wakes
 * it when it lands, as it would have after a read). Only empty answers come from memory, for a
 * second at most; every answer with items is read, with the key's and the stream's checks.
 */
export const sharedReads = (core: StreamCore, now: () => number = () => performance.now()) => {
  const inflight = new Map<string, Promise<StreamRead>>()
  // Each stream's end, with the ticket it was read at: a notification since makes it old.
  const front = new Lru<string, { readonly ticket: number; readonly offset: string; readonly page: StreamPage }>({
    maxEntries: FRONTIER_MAX,
    maxBytes: FRONTIER_BYTES,
    sizeOf: (stream, f) => stringBytes(stream) + 2 * stringBytes(f.offset) + 64 * (f.page.reads.size + 4),
    ttlMs: FRONTIER_MS
  })
  const remember = (stream: string, ticket: number, r: StreamRead) => {
    if (r._tag !== "Page" || r.more || ticket !== core.wake.ticket()) return
    front.set(
      stream,
      {
        ticket,
        offset: r.nextOffset,
        page: r.count === 0 ? r : { ...r, items: "", count: 0, offsets: [], itemJson: [] }
      },
      now()
    )
  }
  return (key: StreamKey, ask: StreamAsk, ticket: number, primaryOnly = true): Promise<StreamRead> => {
    const stream = `${key.keyId}|${key.host ?? ""}|${ask.spec}|${ask.limit}`
    if (ask.after !== undefined) {
      const f = front.get(stream, now())
      if (f !== undefined && f.ticket === ticket && f.offset === ask.after) return Promise.resolve(f.page)
    }
    const id = `${ticket}|${primaryOnly ? "p" : "r"}|${stream}|${ask.after ?? ""}`
    let p = inflight.get(id)
    if (p === undefined) {
      p = core.read(key, ask, primaryOnly).finally(() => inflight.delete(id))
      inflight.set(id, p)
      // A standby's read may lag what the wake announced: only the primary's ends are remembered.
      if (primaryOnly)
        p.then(
          (r) => remember(stream, ticket, r),
          () => {}
        )
    }
    return p
  }
}

/**
 * A long-poll's wait, after a first read that found nothing new (`first`, read after `ticket` was
 * taken): until a change the key may read is committed (then read again on the primary, which has
 * it), or `waitSeconds` pass. What it then answers: the new page, or `first` (no items, the same
 * nextOffset) when the wait ended, and also when the read again was refused (the client's next
 * request gets the refusal with its status); the 409 when an epoch passed the offset meanwhile.
 */
export const waitForChanges = async (
  core: StreamCore,
  shared: ReturnType<typeof sharedReads>,
  key: StreamKey,
  ask: StreamAsk,
  first: StreamPage,
  ticket: number,
  waitSeconds: number,
  signal: Hangup
): Promise<StreamPage | StreamRefetch> => {
  const deadline = Date.now() + waitSeconds * 1000
  let r = first
  for (;;) {
    const why = await changeAfter(core.wake, key, r, ticket, deadline, signal)
    if (why === "timeout" || why === "aborted") return first
    ticket = core.wake.ticket()
    const again = await shared(key, ask, ticket)
    if (again._tag === "Refetch") return again
    if (again._tag !== "Page") return first
    if (again.count > 0) return again
    r = again
  }
}
