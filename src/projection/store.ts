// The mirror as one batch sees it: rows loaded from service.rows before the batch runs, then
// changed in memory transaction by transaction. Everything a projection or an event rule
// reads must be loaded first; reading an unloaded row is a bug and throws.
import type { TransactionSql } from "postgres"
import type { Row } from "../domain/records/types.ts"
import { rowCompany, rowParent } from "./tables.ts"

export interface MirrorRow {
  readonly tbl: string
  readonly key: string
  readonly companyId: string | null
  readonly parentId: string | null
  readonly data: Row
}

const k = (tbl: string, key: string) => tbl + "|" + key

type Sql = TransactionSql<Record<string, unknown>>

export class Store {
  /** Pre-batch state of every loaded key (null: absent). */
  private readonly base = new Map<string, MirrorRow | null>()
  /** Current state of every loaded key. */
  private readonly current = new Map<string, MirrorRow | null>()
  /** Children index for parents whose children were all loaded: "tbl|parent" -> keys. */
  private readonly children = new Map<string, Set<string>>()
  /** Pre-batch child counts for parents loaded by count only. */
  private readonly baseCounts = new Map<string, number>()
  /** Keys changed in this batch, in first-change order. */
  readonly dirty = new Set<string>()
  private readonly sql: Sql

  constructor(sql: Sql) {
    this.sql = sql
  }

  private remember(row: MirrorRow) {
    const id = k(row.tbl, row.key)
    if (this.base.has(id)) return
    this.base.set(id, row)
    this.current.set(id, row)
    if (row.parentId !== null) this.children.get(k(row.tbl, row.parentId))?.add(row.key)
  }

  /** The mirror keeps row data as JSON text (sql/006); it is parsed only when loaded. */
  private static toRow = (r: { tbl: string; key: string; company_id: string | null; parent_id: string | null; data: string }): MirrorRow => ({
    tbl: r.tbl,
    key: r.key,
    companyId: r.company_id,
    parentId: r.parent_id,
    data: JSON.parse(r.data) as Row
  })

  /** Loads the given keys (absent ones are remembered as absent). */
  async loadKeys(keys: Iterable<readonly [string, string]>): Promise<void> {
    const want = [...keys].filter(([t, key]) => !this.base.has(k(t, key)))
    if (want.length === 0) return
    const rows = await this.sql<{ tbl: string; key: string; company_id: string | null; parent_id: string | null; data: string }[]>`
      select r.tbl, r.key, r.company_id, r.parent_id, r.data
      from json_to_recordset(${JSON.stringify(want.map(([tbl, key]) => ({ tbl, key })))}::text::json) as w(tbl text, key text)
      join service.rows r on r.tbl = w.tbl and r.key = w.key`
    for (const r of rows) this.remember(Store.toRow(r))
    for (const [t, key] of want) {
      const id = k(t, key)
      if (!this.base.has(id)) {
        this.base.set(id, null)
        this.current.set(id, null)
      }
    }
  }

  /** Loads every child row of the given parents. */
  async loadChildren(tbl: string, parents: Iterable<string>): Promise<void> {
    const want = [...new Set(parents)].filter((p) => !this.children.has(k(tbl, p)))
    if (want.length === 0) return
    for (const p of want) this.children.set(k(tbl, p), new Set())
    const rows = await this.sql<{ tbl: string; key: string; company_id: string | null; parent_id: string | null; data: string }[]>`
      select tbl, key, company_id, parent_id, data from service.rows
      where tbl = ${tbl} and parent_id = any(${want}::uuid[])`
    for (const r of rows) this.remember(Store.toRow(r))
    // Rows loaded earlier by key that belong to these parents join the index too.
    for (const [id, row] of this.base) {
      if (row && row.tbl === tbl && row.parentId !== null && want.includes(row.parentId)) this.children.get(k(tbl, row.parentId))!.add(row.key)
    }
  }

  /** Loads only how many children the parents have (policies' acknowledgement counts). */
  async loadChildCounts(tbl: string, parents: Iterable<string>): Promise<void> {
    const want = [...new Set(parents)].filter((p) => !this.baseCounts.has(k(tbl, p)))
    if (want.length === 0) return
    for (const p of want) this.baseCounts.set(k(tbl, p), 0)
    const rows = await this.sql<{ parent_id: string; n: number }[]>`
      select parent_id, count(*)::int as n from service.rows
      where tbl = ${tbl} and parent_id = any(${want}::uuid[]) group by parent_id`
    for (const r of rows) this.baseCounts.set(k(tbl, r.parent_id), r.n)
  }

  has(tbl: string, key: string): boolean {
    return this.current.has(k(tbl, key))
  }

  get(tbl: string, key: string): MirrorRow | null {
    const id = k(tbl, key)
    if (!this.current.has(id)) throw new Error(`projection bug: ${tbl} ${key} read before it was loaded`)
    return this.current.get(id)!
  }

  getBase(tbl: string, key: string): MirrorRow | null {
    return this.base.get(k(tbl, key)) ?? null
  }

  /** Current children of a parent whose children were loaded. */
  childrenOf(tbl: string, parent: string): MirrorRow[] {
    const keys = this.children.get(k(tbl, parent))
    if (!keys) throw new Error(`projection bug: children ${tbl} of ${parent} read before they were loaded`)
    const out: MirrorRow[] = []
    for (const key of keys) {
      const row = this.current.get(k(tbl, key))
      if (row && row.parentId === parent) out.push(row)
    }
    return out
  }

  /** Whether a current child of a loaded parent matches, without building the list. */
  someChild(tbl: string, parent: string, test: (row: MirrorRow) => boolean): boolean {
    const keys = this.children.get(k(tbl, parent))
    if (!keys) throw new Error(`projection bug: children ${tbl} of ${parent} read before they were loaded`)
    for (const key of keys) {
      const row = this.current.get(k(tbl, key))
      if (row && row.parentId === parent && test(row)) return true
    }
    return false
  }

  /** Current child count: the pre-batch count plus what this batch moved in or out. */
  childCount(tbl: string, parent: string): number {
    const base = this.baseCounts.get(k(tbl, parent))
    if (base === undefined) throw new Error(`projection bug: count of ${tbl} of ${parent} read before it was loaded`)
    let n = base
    for (const id of this.dirty) {
      if (!id.startsWith(tbl + "|")) continue
      if (this.base.get(id)?.parentId === parent) n--
      if (this.current.get(id)?.parentId === parent) n++
    }
    return n
  }

  /** Applies one row change; `data` null deletes. Unchanged TOAST values (undefined) keep
   *  their previous value. */
  apply(tbl: string, key: string, data: Row | null): void {
    const id = k(tbl, key)
    if (!this.current.has(id)) throw new Error(`projection bug: ${tbl} ${key} changed before it was loaded`)
    const prev = this.current.get(id)!
    let next: MirrorRow | null = null
    if (data !== null) {
      const merged: Record<string, unknown> = prev ? { ...prev.data } : {}
      for (const [c, v] of Object.entries(data)) if (v !== undefined) merged[c] = v
      next = { tbl, key, companyId: rowCompany(tbl, merged), parentId: rowParent(tbl, merged), data: merged }
      if (next.parentId !== null) this.children.get(k(tbl, next.parentId))?.add(key)
    }
    this.current.set(id, next)
    this.dirty.add(id)
  }

  /** The final state of every changed key, for writing back. */
  changes(): { upserts: MirrorRow[]; deletes: Array<{ tbl: string; key: string }> } {
    const upserts: MirrorRow[] = []
    const deletes: Array<{ tbl: string; key: string }> = []
    for (const id of this.dirty) {
      const row = this.current.get(id)!
      if (row) upserts.push(row)
      else if (this.base.get(id)) {
        const sep = id.indexOf("|")
        deletes.push({ tbl: id.slice(0, sep), key: id.slice(sep + 1) })
      }
    }
    return { upserts, deletes }
  }

  /** Parents (by child table) currently indexed: used to find rows by parent. */
  knownRowsOf(tbl: string): MirrorRow[] {
    const out: MirrorRow[] = []
    for (const [id, row] of this.current) if (row && id.startsWith(tbl + "|")) out.push(row)
    return out
  }
}
