// The mirror as one batch sees it: rows loaded from service.rows before the batch runs, then
// changed in memory transaction by transaction. Everything a projection or an event rule
// reads must be loaded first; reading an unloaded row is a bug and throws.
//
// Capture prepares a batch while the batch before it is still being written (src/pipeline/capture/
// run.ts): that batch's Store is then the `prior` one, whose final state stands for the
// mirror wherever it knows a row, whether or not its database transaction has committed
// yet. Every load reads it first and lays it over what the database answers, so a load gives
// the same answer before and after that commit.
import type { Sql, TransactionSql } from "postgres"
import type { Row } from "../../domain/records/types.ts"
import { leavesOutDetails, redactPrivacyRow } from "../../domain/records/incidents.ts"
import { decodeStoredRow, rowFromView, VIEW_BACKED } from "./by-view.ts"
import { rowCompany, rowParent } from "./tables.ts"
import { isUuid } from "../../domain/ids.ts"

export interface MirrorRow {
  readonly tbl: string
  readonly key: string
  readonly companyId: string | null
  readonly parentId: string | null
  readonly data: Row
}

/**
 * Values by table, then by key (or parent): a lookup makes no "table|key" string to hash, and
 * the keys, strings decoded once, keep their hash. Capture looks rows up many times a change.
 */
export class TableMap<V> {
  private readonly tables = new Map<string, Map<string, V>>()
  get(tbl: string, key: string): V | undefined {
    return this.tables.get(tbl)?.get(key)
  }
  has(tbl: string, key: string): boolean {
    return this.tables.get(tbl)?.has(key) ?? false
  }
  set(tbl: string, key: string, value: V): void {
    let m = this.tables.get(tbl)
    if (m === undefined) this.tables.set(tbl, (m = new Map()))
    m.set(key, value)
  }
  delete(tbl: string, key: string): boolean {
    return this.tables.get(tbl)?.delete(key) ?? false
  }
  /** One table's entries (none: an empty map). */
  of(tbl: string): ReadonlyMap<string, V> {
    return this.tables.get(tbl) ?? EMPTY
  }
  isEmpty(): boolean {
    for (const m of this.tables.values()) if (m.size > 0) return false
    return true
  }
  /** Every key of every table (no tuple made per key). */
  forEachKey(f: (tbl: string, key: string) => void): void {
    for (const [tbl, m] of this.tables) for (const key of m.keys()) f(tbl, key)
  }
}
const EMPTY: ReadonlyMap<string, never> = new Map<string, never>()

/** A row read or changed before it was loaded: a bug in capture, never the data's fault (capture's
 *  quarantine does not hold a record for it: the run fails, as for any bug). */
export class ProjectionBug extends Error {
  constructor(what: string) {
    super(`projection bug: ${what}`)
    this.name = "ProjectionBug"
  }
}

/** No value left out (pgoutput's unchanged TOAST values are undefined). */
const complete = (row: Row): boolean => {
  for (const c in row) if (row[c] === undefined) return false
  return true
}

// A pool (capture prepares a batch outside any transaction) or a transaction (bootstrap, rebuild, large transactions).
type Db = Sql<Record<string, unknown>> | TransactionSql<Record<string, unknown>>

type RowRecord = { tbl: string; key: string; company_id: string | null; parent_id: string | null; data: string }

/**
 * A large transaction's rows of view-backed tables while it streams (src/pipeline/capture/
 * large.ts): a temporary table laid over the mirror, where data null means deleted in it.
 */
export const STAGING_TABLE = "txn_rows"

/**
 * Every key of a table the mirror holds: its stored rows and, for a view-backed table, the rows
 * its views stand for (by-view.ts); with `staging`, also those a large transaction staged.
 * Keys compared as text in "C" order may be bounded: (from, to], to null for no end; with
 * `limit`, the first that many in that order (a page: the next starts after the last).
 */
export const mirroredKeys = async (
  db: Db,
  table: string,
  range: { from: string; to: string | null } | null = null,
  staging = false,
  limit: number | null = null
): Promise<string[]> => {
  const resource = VIEW_BACKED.get(table)
  const within = (key: ReturnType<typeof db>) =>
    range === null
      ? db``
      : db`and ${key} collate "C" > ${range.from} and (${range.to}::text is null or ${key} collate "C" <= ${range.to}::text)`
  const rows = await db<{ key: string }[]>`
    select key from (
      select key from service.rows where tbl = ${table} ${within(db`key`)}
      ${resource === undefined ? db`` : db`union select id::text from service.views where resource = ${resource} ${within(db`id::text`)}`}
      ${staging ? db`union select key from ${db(STAGING_TABLE)} where tbl = ${table} and data is not null ${within(db`key`)}` : db``}
    ) k
    ${limit === null ? db`` : db`order by key collate "C" limit ${limit}`}`
  return rows.map((r) => r.key)
}

export class Store {
  /** Pre-batch state of every loaded key (null: absent). */
  private readonly base = new TableMap<MirrorRow | null>()
  /** Current state of every loaded key. */
  private readonly current = new TableMap<MirrorRow | null>()
  /** Children index for parents whose children were all loaded: (tbl, parent) -> keys. */
  private readonly children = new TableMap<Set<string>>()
  /** Pre-batch child counts for parents loaded by count only: (tbl, parent) -> count. */
  private readonly baseCounts = new TableMap<number>()
  /** Rows whose change left out values the mirror does not have either: read again from the app. */
  readonly incomplete: Array<readonly [string, string]> = []
  /** Keys changed in this batch. */
  private readonly dirty = new TableMap<true>()
  /** How many changes were applied so far; with the two maps below, what changed since a point. */
  version = 0
  private readonly changedAt = new TableMap<number>()
  private readonly childrenChangedAt = new TableMap<number>()
  private readonly sql: Db
  /** The batch before this one, while it may not be committed yet; dropped by seal(). */
  private prior: Store | null

  /** Whether the transaction's staging table (STAGING_TABLE) is laid over the mirror. */
  private readonly staging: boolean

  constructor(sql: Db, prior: Store | null = null, staging = false) {
    this.sql = sql
    this.prior = prior
    this.staging = staging
  }

  /** Loading is over (the batch is shaped): the prior batch's state is no longer needed. */
  seal(): void {
    this.prior = null
  }

  /** The final state of a row this store loaded (null: absent); undefined when it never loaded it. */
  private known(tbl: string, key: string): MirrorRow | null | undefined {
    return this.current.get(tbl, key)
  }

  private remember(row: MirrorRow) {
    if (this.base.has(row.tbl, row.key)) return
    this.base.set(row.tbl, row.key, row)
    this.current.set(row.tbl, row.key, row)
    if (row.parentId !== null) this.children.get(row.tbl, row.parentId)?.add(row.key)
  }

  /** The mirror keeps row data as JSON text (sql/006, mirror-codec.ts); it is decoded only when loaded. */
  private static toRow = (r: RowRecord): MirrorRow => ({
    tbl: r.tbl,
    key: r.key,
    companyId: r.company_id,
    parentId: r.parent_id,
    data: decodeStoredRow(r.tbl, r.key, r.data, r.company_id)
  })

  /** Loads the given keys (absent ones are remembered as absent). */
  async loadKeys(keys: Iterable<readonly [string, string]>): Promise<void> {
    let want = [...keys].filter(([t, key]) => !this.base.has(t, key))
    const prior = this.prior
    if (prior !== null) {
      want = want.filter(([t, key]) => {
        const row = prior.known(t, key)
        if (row === undefined) return true
        this.rememberAs(t, key, row)
        return false
      })
    }
    if (want.length === 0) return
    // A row the mirror does not store may be one its view stands for (by-view.ts): those keys
    // are looked up among the views too, in the same statement (one snapshot of both).
    const viewed = want.filter(([t, key]) => VIEW_BACKED.has(t) && isUuid(key))
    const sql = this.sql
    const staged = this.staging
      ? sql`
      select s.tbl, s.key, s.company_id, s.parent_id, s.data, false as viewed
      from unnest(${want.map(([tbl]) => tbl)}::text[], ${want.map(([, key]) => key)}::text[]) as w(tbl, key)
      join ${sql(STAGING_TABLE)} s on s.tbl = w.tbl and s.key = w.key
      union all`
      : sql``
    const notStaged = (tbl: ReturnType<typeof sql>, key: ReturnType<typeof sql>) =>
      this.staging
        ? sql`and not exists (select 1 from ${sql(STAGING_TABLE)} s where s.tbl = ${tbl} and s.key = ${key})`
        : sql``
    const byView =
      viewed.length === 0
        ? sql``
        : sql`
      union all
      select w.tbl, w.key, v.company_id, null::uuid, v.body, true
      from unnest(${viewed.map(([tbl]) => tbl)}::text[], ${viewed.map(([tbl]) => VIEW_BACKED.get(tbl)!)}::text[],
                  ${viewed.map(([, key]) => key)}::text[]) as w(tbl, resource, key)
      join service.views v on v.resource = w.resource and v.id = w.key::uuid
      where not exists (select 1 from service.rows r where r.tbl = w.tbl and r.key = w.key) ${notStaged(sql`w.tbl`, sql`w.key`)}`
    const rows = await sql<Array<Omit<RowRecord, "data"> & { data: string | null; viewed: boolean }>>`
      ${staged}
      select r.tbl, r.key, r.company_id, r.parent_id, r.data, false as viewed
      from unnest(${want.map(([tbl]) => tbl)}::text[], ${want.map(([, key]) => key)}::text[]) as w(tbl, key)
      join service.rows r on r.tbl = w.tbl and r.key = w.key
      where true ${notStaged(sql`w.tbl`, sql`w.key`)}
      ${byView}`
    for (const r of rows) {
      if (r.viewed) {
        // A view that is not its record's (written by hand, or by a bug) stands for no row: a
        // rebuild of the views then finds the record gone, and removes the view.
        const data = rowFromView(r.tbl, r.key, r.company_id, r.data!)
        if (data !== null) this.remember({ tbl: r.tbl, key: r.key, companyId: r.company_id, parentId: null, data })
      } else if (r.data === null)
        this.rememberAs(r.tbl, r.key, null) // deleted earlier in the large transaction staging it
      else this.remember(Store.toRow(r as RowRecord))
    }
    for (const [t, key] of want) if (!this.base.has(t, key)) this.rememberAs(t, key, null)
  }

  /** Remembers rows read from the mirror by another statement (data: its stored text; null: absent), unless already loaded. */
  seed(
    rows: ReadonlyArray<{
      tbl: string
      key: string
      companyId: string | null
      parentId: string | null
      data: string | null
    }>
  ): void {
    for (const r of rows) {
      if (r.data === null) this.rememberAs(r.tbl, r.key, null)
      else if (!this.base.has(r.tbl, r.key))
        this.remember({
          tbl: r.tbl,
          key: r.key,
          companyId: r.companyId,
          parentId: r.parentId,
          data: decodeStoredRow(r.tbl, r.key, r.data, r.companyId)
        })
    }
  }

  /** Remembers keys known to be absent before the batch (its first change of them is an INSERT). */
  absent(keys: Iterable<readonly [string, string]>): void {
    for (const [t, key] of keys) this.rememberAs(t, key, null)
  }

  /** absent() for one key. */
  absentKey(tbl: string, key: string): void {
    this.rememberAs(tbl, key, null)
  }

  /** Remembers a row's pre-batch state as given (null: absent), unless already loaded. */
  private rememberAs(tbl: string, key: string, row: MirrorRow | null) {
    if (row !== null) return this.remember(row)
    if (this.base.has(tbl, key)) return
    this.base.set(tbl, key, null)
    this.current.set(tbl, key, null)
  }

  /** Loads every child row of the given parents. */
  async loadChildren(tbl: string, parents: Iterable<string>): Promise<void> {
    const want = [...new Set(parents)].filter((p) => !this.children.has(tbl, p))
    if (want.length === 0) return
    for (const p of want) this.children.set(tbl, p, new Set())
    const prior = this.prior
    // Parents whose children the prior batch loaded: its final children are the answer.
    const fromDb = prior === null ? want : want.filter((p) => !prior.children.has(tbl, p))
    if (prior !== null && fromDb.length < want.length) {
      for (const p of want)
        if (prior.children.has(tbl, p)) for (const row of prior.childrenOf(tbl, p)) this.remember(row)
    }
    if (fromDb.length > 0) {
      const rows = await this.sql<RowRecord[]>`
        select tbl, key, company_id, parent_id, data from service.rows
        where tbl = ${tbl} and parent_id = any(${fromDb}::uuid[])`
      for (const r of rows) {
        // A row the prior batch knows is as it left it (maybe moved to another parent, or gone).
        const row = prior?.known(r.tbl, r.key)
        if (row === undefined) this.remember(Store.toRow(r))
        else this.rememberAs(r.tbl, r.key, row)
      }
      // Rows the prior batch moved under these parents (or made there) that the database may not show yet.
      if (prior !== null) {
        const wanted = new Set(fromDb)
        for (const key of prior.dirty.of(tbl).keys()) {
          const row = prior.current.get(tbl, key)
          if (row && row.parentId !== null && wanted.has(row.parentId)) this.remember(row)
        }
      }
    }
    // Every row known here under these parents joins their index, also those loaded earlier
    // by key (remember() indexes only rows it meets for the first time).
    const all = new Set(want)
    for (const row of this.base.of(tbl).values()) {
      if (row && row.parentId !== null && all.has(row.parentId)) this.children.get(tbl, row.parentId)!.add(row.key)
    }
  }

  /** Loads only how many children the parents have (policies' acknowledgement counts). */
  async loadChildCounts(tbl: string, parents: Iterable<string>): Promise<void> {
    const want = [...new Set(parents)].filter((p) => !this.baseCounts.has(tbl, p))
    if (want.length === 0) return
    for (const p of want) this.baseCounts.set(tbl, p, 0)
    // Rows the prior batch knows are counted as it left them, the others as the database has them.
    const skip: string[] = []
    const wanted = new Set(want)
    for (const [key, row] of this.prior?.current.of(tbl) ?? EMPTY) {
      skip.push(key)
      if (row && row.parentId !== null && wanted.has(row.parentId))
        this.baseCounts.set(tbl, row.parentId, this.baseCounts.get(tbl, row.parentId)! + 1)
    }
    const rows = await this.sql<{ parent_id: string; n: number }[]>`
      select parent_id, count(*)::int as n from service.rows
      where tbl = ${tbl} and parent_id = any(${want}::uuid[]) and key <> all(${skip}::text[]) group by parent_id`
    for (const r of rows) this.baseCounts.set(tbl, r.parent_id, this.baseCounts.get(tbl, r.parent_id)! + r.n)
  }

  has(tbl: string, key: string): boolean {
    return this.current.has(tbl, key)
  }

  get(tbl: string, key: string): MirrorRow | null {
    const row = this.current.get(tbl, key)
    if (row === undefined) throw new ProjectionBug(`${tbl} ${key} read before it was loaded`)
    return row
  }

  getBase(tbl: string, key: string): MirrorRow | null {
    return this.base.get(tbl, key) ?? null
  }

  /** Current children of a parent whose children were loaded. */
  childrenOf(tbl: string, parent: string): MirrorRow[] {
    const keys = this.children.get(tbl, parent)
    if (!keys) throw new ProjectionBug(`children ${tbl} of ${parent} read before they were loaded`)
    const rows = this.current.of(tbl)
    const out: MirrorRow[] = []
    for (const key of keys) {
      const row = rows.get(key)
      if (row && row.parentId === parent) out.push(row)
    }
    return out
  }

  /** Whether a current child of a loaded parent matches, without building the list. */
  someChild(tbl: string, parent: string, test: (row: MirrorRow) => boolean): boolean {
    const keys = this.children.get(tbl, parent)
    if (!keys) throw new ProjectionBug(`children ${tbl} of ${parent} read before they were loaded`)
    const rows = this.current.of(tbl)
    for (const key of keys) {
      const row = rows.get(key)
      if (row && row.parentId === parent && test(row)) return true
    }
    return false
  }

  /** Current child count: the pre-batch count plus what this batch moved in or out. */
  childCount(tbl: string, parent: string): number {
    const base = this.baseCounts.get(tbl, parent)
    if (base === undefined) throw new ProjectionBug(`count of ${tbl} of ${parent} read before it was loaded`)
    let n = base
    for (const key of this.dirty.of(tbl).keys()) {
      if (this.base.get(tbl, key)?.parentId === parent) n--
      if (this.current.get(tbl, key)?.parentId === parent) n++
    }
    return n
  }

  /** Applies one row change; `data` null deletes. Unchanged TOAST values (undefined) keep
   *  their previous value. */
  apply(tbl: string, key: string, data: Row | null): void {
    const prev = this.current.get(tbl, key)
    if (prev === undefined) throw new ProjectionBug(`${tbl} ${key} changed before it was loaded`)
    let next: MirrorRow | null = null
    if (data !== null) {
      // A decoded row is the store's own: a new row with every value is kept as it is.
      let merged: Record<string, unknown> = data
      if (prev !== null || !complete(data)) {
        merged = prev ? { ...prev.data } : {}
        for (const c in data) if (data[c] !== undefined) merged[c] = data[c]
      }
      const kept = tbl === "incidents" ? this.privacyKept(key, prev, data, merged) : merged
      next = { tbl, key, companyId: rowCompany(tbl, kept), parentId: rowParent(tbl, kept), data: kept }
      if (next.parentId !== null) this.children.get(tbl, next.parentId)?.add(key)
    }
    this.current.set(tbl, key, next)
    this.dirty.set(tbl, key, true)
    const v = ++this.version
    this.changedAt.set(tbl, key, v)
    if (prev?.parentId) this.childrenChangedAt.set(tbl, prev.parentId, v)
    if (next?.parentId) this.childrenChangedAt.set(tbl, next.parentId, v)
  }

  /**
   * An incidents row as the mirror keeps it: a privacy case without the person's details
   * (redactPrivacyRow). When one stops being a privacy case, its change brings them back,
   * but for a value PostgreSQL sent as unchanged (TOAST): the mirror no longer has it, so the
   * row is read again from the app (`incomplete`; capture's re-read, resync.ts).
   */
  private privacyKept(key: string, prev: MirrorRow | null, data: Row, merged: Row): Row {
    if (leavesOutDetails(prev?.data ?? null, data)) this.incomplete.push(["incidents", key])
    return redactPrivacyRow(merged)
  }

  /** Whether a row changed in this batch. */
  changed(tbl: string, key: string): boolean {
    return this.dirty.has(tbl, key)
  }

  /** Whether a row changed after `version`. */
  changedSince(tbl: string, key: string, version: number): boolean {
    return (this.changedAt.get(tbl, key) ?? 0) > version
  }

  /** Whether a row of `tbl` came under, left or changed under `parent` after `version`. */
  childrenChangedSince(tbl: string, parent: string, version: number): boolean {
    return (this.childrenChangedAt.get(tbl, parent) ?? 0) > version
  }

  /** The final state of every changed key, for writing back: rows new to the mirror, rows it
   *  has that changed, and rows it has that are gone. */
  changes(): { inserts: MirrorRow[]; updates: MirrorRow[]; deletes: Array<{ tbl: string; key: string }> } {
    const inserts: MirrorRow[] = []
    const updates: MirrorRow[] = []
    const deletes: Array<{ tbl: string; key: string }> = []
    this.dirty.forEachKey((tbl, key) => {
      const row = this.current.get(tbl, key)
      const before = this.base.get(tbl, key)
      if (row) (before ? updates : inserts).push(row)
      else if (before) deletes.push({ tbl: before.tbl, key: before.key })
    })
    return { inserts, updates, deletes }
  }
}
