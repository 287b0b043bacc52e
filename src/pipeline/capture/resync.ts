// Re-reading app rows that capture could not follow (docs/design.md, "Quarantine"): a table
// whose contract holds again after a break (its changes meanwhile were held, or never
// streamed at all when it left the publication), and the row a retry needs whole (a value of
// it the decoder rejected, so the mirror lacks it).
//
// The app table is ahead of the stream, so a row read now cannot simply be written: a change
// the stream has not delivered yet would then be applied on top of a newer row (its events
// compared against the wrong state). Debezium's incremental snapshot (DBLog's watermarks)
// solves it, and this does the same, a chunk of keys at a time:
//   1. a low watermark is written into the WAL (a transactional logical message);
//   2. the chunk's rows are read from the app table (after the watermark committed);
//   3. a high watermark is written, carrying the rows read (so that a replay of the stream
//      applies them at the same place, whichever run read them).
// Capture meets both in stream order. Between them it notes every key of the chunk's range
// that the stream changes: for those the stream's own row is as new as the one read, so they
// are dropped from the chunk. At the high watermark the rest become row changes of that
// transaction (an upsert for each row read, a delete for each mirrored key of the range the
// app no longer has), applied as any other: in one database transaction with the checkpoint,
// firing what the comparison of the mirror's row with the app's row calls for, once. Each
// chunk's progress is stored with it, so a killed run goes on from the last chunk applied.
// The windows open at a batch's end (and the keys noted in them) are stored with its
// checkpoint, so a replay that starts between a chunk's watermarks (the batch applying the high
// one lost with a crash of the service's database) still applies its rows at their place.
import type { Sql } from "postgres"
import { APP_COLUMNS } from "../../domain/records/columns.ts"
import type { Row } from "../../domain/records/types.ts"
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { formatLsn, parseLsn, type Lsn } from "../../platform/db/lsn.ts"
import { rowKey } from "../projection/tables.ts"
import { ident } from "./publication.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"
import type { CaptureQuarantine } from "./quarantine/state.ts"
import type { RowChange } from "./txn.ts"

/** Prefix of the watermark messages. */
export const RESYNC_PREFIX = "safety-records-resync"

/** Keys re-read per chunk (one chunk's rows are in memory at a time). */
export const RESYNC_CHUNK = 1000

/**
 * A watermark's content: the low one names the chunk's range (from excluded, to included; null:
 * the table's end) or keys; the high one carries the rows read (key and row), so that a replay
 * of the stream (a run killed, or a crash of the service's database that took the batch
 * applying them) applies the same rows at the same place, whichever run wrote them.
 */
interface Watermark {
  readonly id: string
  readonly phase: "lo" | "hi"
  /** The slot of the capture that wrote it: another service following the same app database ignores it. */
  readonly slot?: string
  readonly table?: string
  readonly from?: string
  readonly to?: string | null
  readonly keys?: ReadonlyArray<string>
  readonly rows?: ReadonlyArray<{ readonly k: string; readonly d: Row }>
}

interface Chunk {
  readonly table: string
  /** A range of the table (from excluded, to included, null: its end), or these keys. */
  readonly from: string
  readonly to: string | null
  readonly keys: ReadonlySet<string> | null
}

interface Window extends Chunk {
  /** Keys of the chunk the stream changed between the watermarks. */
  readonly changed: Set<string>
  /** The table was truncated between them: the chunk is read again. */
  void: boolean
}

const inChunk = (c: Chunk, key: string) =>
  c.keys !== null ? c.keys.has(key) : key > c.from && (c.to === null || key <= c.to)

/** The key as the mirror has it, as SQL (compared byte-wise: "C", as JavaScript compares strings). */
const keyExpr = (table: string) =>
  table === "company_modules" ? `((company_id::text || ':' || module) collate "C")` : `(id::text collate "C")`

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms)
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(t)
        resolve()
      },
      { once: true }
    )
  })

/** Reads app rows in the mirror's normal form (the snapshot's, as bootstrap reads them): published columns only. */
export const readAppRows = async (
  sql: Sql,
  table: string,
  chunk: { readonly from: string; readonly to: string | null } | { readonly keys: ReadonlyArray<string> }
): Promise<RowChange[]> => {
  const columns = APP_COLUMNS[table]!
  const names = Object.keys(columns)
  const k = keyExpr(table)
  const select = `select json_build_object(${names.map((c) => `'${ident(c)}', ${ident(c)}`).join(", ")}) as row from app.${ident(table)}`
  const rows: Array<{ row: Record<string, unknown> }> =
    "keys" in chunk
      ? await sql.unsafe(`${select} where ${k} = any($1::text[])`, [chunk.keys as string[]])
      : chunk.to === null
        ? await sql.unsafe(`${select} where ${k} > $1 order by ${k}`, [chunk.from])
        : await sql.unsafe(`${select} where ${k} > $1 and ${k} <= $2 order by ${k}`, [chunk.from, chunk.to])
  const stamps = names.filter((c) => columns[c] === "timestamptz")
  return rows.map(({ row }) => {
    for (const c of stamps) if (typeof row[c] === "string") row[c] = toIsoUtcOrNull(row[c])
    return { table, key: rowKey(table, row as Row), data: row as Row }
  })
}

/** The windows open at a checkpoint, as stored with it (service.capture_state.open_windows). */
interface StoredWindows {
  readonly at: string
  readonly windows: ReadonlyArray<{
    readonly id: string
    readonly table: string
    readonly from: string
    readonly to: string | null
    readonly keys: ReadonlyArray<string> | null
    readonly changed: ReadonlyArray<string>
    readonly void: boolean
  }>
}

const strings = (xs: unknown): xs is ReadonlyArray<string> =>
  Array.isArray(xs) && xs.every((x) => typeof x === "string")

/** Stored windows that are what this release writes, or null (they are then not used). */
const storedWindowsOf = (v: unknown): StoredWindows | null => {
  if (typeof v !== "object" || v === null) return null
  const s = v as { at?: unknown; windows?: unknown }
  if (typeof s.at !== "string" || !Array.isArray(s.windows)) return null
  for (const w of s.windows as Array<Record<string, unknown>>) {
    if (typeof w !== "object" || w === null) return null
    if (typeof w.id !== "string" || typeof w.table !== "string" || !(w.table in APP_COLUMNS)) return null
    if (typeof w.from !== "string" || (w.to !== null && typeof w.to !== "string")) return null
    if ((w.keys !== null && !strings(w.keys)) || !strings(w.changed) || typeof w.void !== "boolean") return null
  }
  return s as StoredWindows
}

/**
 * A high watermark's rows, or null when they are not rows (anyone who writes the app's database
 * can write such a message): the chunk is then read again, and capture never stops on it.
 */
const rowsOf = (rows: unknown): ReadonlyArray<{ readonly k: string; readonly d: Row }> | null => {
  if (!Array.isArray(rows)) return null
  for (const r of rows) {
    if (typeof r !== "object" || r === null || typeof r.k !== "string") return null
    if (typeof r.d !== "object" || r.d === null || Array.isArray(r.d)) return null
  }
  return rows as ReadonlyArray<{ readonly k: string; readonly d: Row }>
}

/** Up to `max` asks from the front of capture's, leaving those of tables that block. */
const takeReady = (q: CaptureQuarantine, max: number): Array<readonly [string, string]> => {
  const take: Array<readonly [string, string]> = []
  const left: Array<readonly [string, string]> = []
  for (const a of q.rereads) (take.length < max && !q.blocksTable(a[0]) ? take : left).push(a)
  if (take.length > 0) {
    q.rereads.length = 0
    for (const a of left) q.rereads.push(a)
  }
  return take
}

/**
 * The watermarks of one capture run: the job that writes them and reads the rows (`run`), and
 * what capture's batcher does when it meets them (`low`, `high`, `note`, `truncated`).
 */
export class Resync {
  private readonly windows = new Map<string, Window>()
  /** Set by restore: where the windows of runs before this one stop mattering. */
  private restoredUntil: Lsn | null = null
  private readonly waiting: Array<{ readonly lsn: Lsn; readonly resolve: () => void }> = []
  private wake: (() => void) | null = null
  private next = 0
  private readonly run_ = `${process.pid}-${Date.now().toString(36)}`
  /** Windows open: the batcher notes changed keys only then. */
  open = 0
  private readonly size: number
  /** Runs between a chunk's read and its high watermark (tests write there, as the app may). */
  private readonly afterRead: ((table: string, keys: ReadonlyArray<string>) => Promise<void>) | undefined

  private readonly slot: string

  constructor(
    slot: string,
    chunk = RESYNC_CHUNK,
    afterRead?: (table: string, keys: ReadonlyArray<string>) => Promise<void>
  ) {
    this.slot = slot
    this.size = chunk
    this.afterRead = afterRead
  }

  // ---- the batcher's side (in stream order) ---------------------------------------------------

  /**
   * The windows open now, to store with the checkpoint `at` of the batch being written (every
   * change taken so far is in it or before it); null when none is open. A key noted for a
   * transaction after that batch only widens what the replay drops from a chunk, which that
   * transaction, replayed, changes anyway.
   */
  snapshot(at: Lsn): string | null {
    if (this.windows.size === 0) return null
    const stored: StoredWindows = {
      at: formatLsn(at),
      windows: [...this.windows].map(([id, w]) => ({
        id,
        table: w.table,
        from: w.from,
        to: w.to,
        keys: w.keys === null ? null : [...w.keys],
        changed: [...w.changed],
        void: w.void
      }))
    }
    return JSON.stringify(stored)
  }

  /**
   * The windows stored with the checkpoint a run streams from, taken up as they were. Windows
   * stored with another checkpoint (one a keepalive or an older release moved without them)
   * are not used: their chunks are read again, as when nothing was stored. `until`: the app's
   * WAL end when this run began. The high watermarks of runs before it were written before
   * that, so their windows still open once the stream is past it never close (their run
   * ended before its high one): they are dropped then (`passed`), not stored with every batch.
   */
  restore(stored: unknown, checkpoint: Lsn, until: Lsn): void {
    this.restoredUntil = until
    const s = storedWindowsOf(stored)
    if (s === null || s.at !== formatLsn(checkpoint)) return
    for (const w of s.windows)
      this.windows.set(w.id, {
        table: w.table,
        from: w.from,
        to: w.to,
        keys: w.keys === null ? null : new Set(w.keys),
        changed: new Set(w.changed),
        void: w.void
      })
    this.open = this.windows.size
  }

  /**
   * A watermark message. A low one opens its chunk's window, whichever run wrote it (a replay
   * meets an earlier run's); at this run's own first, the windows of runs before it that are
   * still open are closed: their run ended before writing the high one. A high one is returned
   * with its rows (none in a high watermark written before they travelled in it).
   */
  message(content: string): {
    readonly id: string
    readonly phase: "lo" | "hi"
    readonly rows: ReadonlyArray<{ readonly k: string; readonly d: Row }> | null
  } | null {
    let m: Watermark
    try {
      m = JSON.parse(content) as Watermark
    } catch {
      return null
    }
    if (typeof m.id !== "string" || (m.phase !== "lo" && m.phase !== "hi") || m.slot !== this.slot) return null
    if (m.phase === "lo") {
      if (typeof m.table !== "string" || !(m.table in APP_COLUMNS)) return null
      if (m.id.startsWith(`${this.run_}-`))
        for (const id of this.windows.keys()) if (!id.startsWith(`${this.run_}-`)) this.windows.delete(id)
      this.windows.set(m.id, {
        table: m.table,
        from: typeof m.from === "string" ? m.from : "",
        to: typeof m.to === "string" ? m.to : null,
        keys: Array.isArray(m.keys) ? new Set(m.keys.filter((k): k is string => typeof k === "string")) : null,
        changed: new Set(),
        void: false
      })
      this.open = this.windows.size
      return null
    }
    return { id: m.id, phase: "hi", rows: rowsOf(m.rows) }
  }

  /** A transaction's commit, in stream order: past `until`, earlier runs' windows are dropped. */
  passed(lsn: Lsn): void {
    if (this.restoredUntil === null || lsn <= this.restoredUntil) return
    this.restoredUntil = null
    for (const id of this.windows.keys()) if (!id.startsWith(`${this.run_}-`)) this.windows.delete(id)
    this.open = this.windows.size
  }

  /** A row change the stream delivered: noted if a window's chunk holds its key. */
  note(table: string, key: string): void {
    for (const w of this.windows.values()) if (w.table === table && inChunk(w, key)) w.changed.add(key)
  }

  /** A TRUNCATE of the table: its open chunks are read again. */
  truncated(table: string): void {
    for (const w of this.windows.values()) if (w.table === table) w.void = true
  }

  /**
   * The high watermark: the row changes the chunk makes now, its marker (a table's chunk:
   * where its re-read goes on, after null at its end; keys asked for: the asks it met), and the
   * asked keys to read again (those the stream changed meanwhile, all after a TRUNCATE): an ask
   * is met only by a read no change overtook, so every stored ask is met in the end.
   * `mirrored` gives the keys of the range the mirror has (read after everything before this
   * point is written).
   */
  async high(
    id: string,
    read: ReadonlyArray<{ readonly k: string; readonly d: Row }> | null,
    mirrored: (table: string, from: string, to: string | null) => Promise<ReadonlyArray<string>>
  ): Promise<{
    changes: RowChange[]
    marker: QuarantineMarker | null
    again: ReadonlyArray<readonly [string, string]>
  } | null> {
    const w = this.windows.get(id)
    // Closed once its rows are known: the batches written meanwhile (mirrored's) store it open.
    const close = () => {
      this.windows.delete(id)
      this.open = this.windows.size
    }
    // No window: the stream was taken up after its low watermark and nothing stored it; the
    // job reads the chunk again.
    if (w === undefined || read === null) {
      close()
      return null
    }
    const rows: RowChange[] = read.map((r) => ({ table: w.table, key: r.k, data: r.d }))
    if (w.void) {
      close()
      return w.keys === null
        ? null
        : { changes: [], marker: null, again: [...w.keys].map((k) => [w.table, k] as const) }
    }
    const changes: RowChange[] = []
    const have = new Set<string>()
    for (const r of rows) {
      have.add(r.key)
      if (!w.changed.has(r.key)) changes.push(r)
    }
    const gone = w.keys !== null ? [...w.keys] : await mirrored(w.table, w.from, w.to)
    close()
    for (const key of gone) if (!have.has(key) && !w.changed.has(key)) changes.push({ table: w.table, key, data: null })
    if (w.keys === null)
      return { changes, marker: { kind: "resynced", table: w.table, after: w.to, rows: rows.length }, again: [] }
    const keys = [...w.keys]
    return {
      changes,
      marker: { kind: "reread", table: w.table, keys: keys.filter((k) => !w.changed.has(k)) },
      again: keys.filter((k) => w.changed.has(k)).map((k) => [w.table, k] as const)
    }
  }

  /** Capture's checkpoint moved: chunks applied up to it are done. */
  applied(checkpoint: Lsn): void {
    for (let i = this.waiting.length - 1; i >= 0; i--) {
      const w = this.waiting[i]!
      if (w.lsn <= checkpoint) {
        this.waiting.splice(i, 1)
        w.resolve()
      }
    }
  }

  /** Something to re-read may have come (a table's contract held again, a retry). */
  kick(): void {
    const w = this.wake
    this.wake = null
    w?.()
  }

  // ---- the job -----------------------------------------------------------------------------------

  /**
   * Re-reads, a chunk at a time, what capture's state asks for: the rows a retry needs whole,
   * then tables whose re-read is stored and whose contract holds. Runs until `signal` aborts.
   * `sql` is the service's database (what to re-read), `app` the app's (its rows, its WAL's
   * watermarks): the same pool when both are one database.
   */
  async run(
    sql: Sql,
    app: Sql,
    q: CaptureQuarantine,
    signal: AbortSignal,
    onError: (e: unknown) => void
  ): Promise<void> {
    while (!signal.aborted) {
      try {
        // Asks of a table that does not fit, or is being re-read, wait until it is over.
        const take = takeReady(q, this.size)
        if (take.length > 0) {
          const byTable = new Map<string, string[]>()
          for (const [t, k] of take) {
            if (!(t in APP_COLUMNS)) continue
            let keys = byTable.get(t)
            if (keys === undefined) byTable.set(t, (keys = []))
            keys.push(k)
          }
          const tables = [...byTable]
          for (let i = 0; i < tables.length; i++) {
            const [table, keys] = tables[i]!
            try {
              await this.chunk(app, { table, from: "", to: null, keys: new Set(keys) }, signal)
            } catch (e) {
              // Not read: asked again, first (a run that ends instead finds the asks stored).
              q.rereads.unshift(...tables.slice(i).flatMap(([t, ks]) => ks.map((k) => [t, k] as const)))
              throw e
            }
          }
          continue
        }
        const [work] = await sql<{ tbl: string; after_key: string }[]>`
          select r.tbl, r.after_key from service.capture_resync r
          where not exists (select 1 from service.capture_contract c where c.tbl = r.tbl)
          order by r.started_at, r.tbl limit 1`
        if (work !== undefined && work.tbl in APP_COLUMNS) {
          const k = keyExpr(work.tbl)
          const [end] = await app.unsafe<{ k: string }[]>(
            `select ${k} as k from app.${ident(work.tbl)} where ${k} > $1 order by ${k} offset ${this.size - 1} limit 1`,
            [work.after_key]
          )
          await this.chunk(app, { table: work.tbl, from: work.after_key, to: end?.k ?? null, keys: null }, signal)
          continue
        }
      } catch (e) {
        // The app table does not answer as expected (it broke again): the next look tries again.
        if (signal.aborted) return
        onError(e)
        await sleep(5000, signal)
        continue
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve
        void sleep(2000, signal).then(resolve)
      })
    }
  }

  /** One chunk between its watermarks, all on the app's database (`sql`). */
  private async chunk(sql: Sql, c: Chunk, signal: AbortSignal): Promise<void> {
    const id = `${this.run_}-${++this.next}`
    const mark = (phase: "lo" | "hi", extra: Partial<Watermark> = {}) =>
      sql<{ lsn: string }[]>`
        select pg_logical_emit_message(true, ${RESYNC_PREFIX}, ${JSON.stringify({ id, phase, slot: this.slot, ...extra })})::text as lsn`
    await mark("lo", { table: c.table, from: c.from, to: c.to, ...(c.keys ? { keys: [...c.keys] } : {}) })
    // After the low watermark committed: this read sees every change before it.
    const rows = await readAppRows(sql, c.table, c.keys !== null ? { keys: [...c.keys] } : { from: c.from, to: c.to })
    await this.afterRead?.(
      c.table,
      rows.map((r) => r.key)
    )
    const [hi] = await mark("hi", { rows: rows.map((r) => ({ k: r.key, d: r.data! })) })
    const lsn = parseLsn(hi!.lsn)
    // One chunk in memory at a time: the next is read once capture has applied this one.
    await new Promise<void>((resolve) => {
      this.waiting.push({ lsn, resolve })
      signal.addEventListener("abort", () => resolve(), { once: true })
    })
  }
}
