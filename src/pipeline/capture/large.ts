// A transaction too large to hold in memory is applied while it streams: chunk by chunk
// into the mirror inside one open database transaction, remembering in temporary tables
// each row's state before the transaction and the records it touched. At its commit the
// touched views are rewritten and its events derived from those tables, chunk by chunk.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { isResource, RESOURCE_INFO } from "../../domain/resources.ts"
import { writeEvents, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { prepare, project } from "../projection/project.ts"
import { Store } from "../projection/store.ts"
import { mirrorWrites, writeCompanies, writeUsers } from "../projection/write.ts"
import { loadFor, mirrorChanges, moduleOn, reprojectViews, wideInspectionKeys } from "./apply.ts"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { RowChange } from "./txn.ts"
import { dependentsOf } from "../projection/dependencies.ts"
import { finalViews } from "./apply.ts"
import { writeViews } from "../projection/write.ts"
import {
  type CaptureQuarantine,
  EMPTY_DELTA,
  errorText,
  type Held,
  isPoison,
  type QuarantineDelta,
  quarantineWrites
} from "./quarantine.ts"
import { TableMap } from "../projection/store.ts"

const EVENT_TABLES = new Set(Object.values(EVENT_RESOURCE).map((r) => RESOURCE_INFO[r].table))
const CHUNK = 1000

export class LargeTransaction {
  private readonly tx: Tx
  private started = false
  changes = 0
  /** Capture's quarantine: held records keep their last good view; records that cannot be shaped are held. */
  private readonly q: CaptureQuarantine | null
  /** Records fed by a value not decoded or a broken table's rows: held whatever they shape to. */
  private readonly forced = new TableMap<{ readonly error: string; readonly blockedBy: string | null }>()
  readonly contract: Array<{ table: string; problems: ReadonlyArray<string> | null; lsn: Lsn }> = []

  constructor(tx: Tx, q: CaptureQuarantine | null = null) {
    this.tx = tx
    this.q = q
  }

  /** A Relation message in the transaction: the table's contract as it stands from here on (null: it fits). */
  contractChanged(table: string, problems: ReadonlyArray<string> | null): void {
    if (this.q === null) return
    if (problems === null) this.q.broken.delete(table)
    else this.q.broken.set(table, problems)
    this.contract.push({ table, problems, lsn: 0n })
  }

  private async init() {
    if (this.started) return
    this.started = true
    await this
      .tx`create temp table txn_before (seq bigserial, tbl text, key text, data jsonb, primary key (tbl, key)) on commit drop`
    await this
      .tx`create temp table txn_affected (seq bigserial primary key, resource text, id uuid, unique (resource, id)) on commit drop`
    // Equipment and job sites whose inspections' views show what changed (apply.ts, Wide).
    await this.tx`create temp table txn_wide (tbl text, id uuid, primary key (tbl, id)) on commit drop`
  }

  /** Applies a chunk of the transaction's changes to the mirror. */
  async add(chunk: ReadonlyArray<RowChange>): Promise<void> {
    await this.init()
    const store = new Store(this.tx)
    const { refs, tenancy, users, wide } = await loadFor(store, chunk)
    const befores: Array<{ tbl: string; key: string; data: Row | null }> = []
    const seen = new Set<string>()
    for (const c of chunk) {
      const id = `${c.table}|${c.key}`
      if (EVENT_TABLES.has(c.table) && !seen.has(id)) {
        seen.add(id)
        befores.push({ tbl: c.table, key: c.key, data: store.get(c.table, c.key)?.data ?? null })
      }
      if (this.q !== null && (c.poison !== undefined || this.q.broken.has(c.table))) {
        const problems = this.q.broken.get(c.table)
        const error = c.poison ?? `app.${c.table} no longer fits what the service reads: ${problems!.join("; ")}`
        const blockedBy = c.poison === undefined ? c.table : null
        const deps = dependentsOf(c.table, c.key, store.get(c.table, c.key)?.data ?? null, c.data)
        for (const r of deps.records) this.forced.set(RESOURCE_INFO[r.resource].table, r.id, { error, blockedBy })
      }
      store.apply(c.table, c.key, c.data)
    }
    if (befores.length > 0) {
      await this.tx`
        insert into txn_before (tbl, key, data)
        select tbl, key, data from json_to_recordset(${JSON.stringify(befores)}::text::json) as x(tbl text, key text, data jsonb)
        order by 1 on conflict do nothing`
    }
    await Promise.all(mirrorWrites(mirrorChanges(store))(this.tx))
    if (refs.length > 0) {
      await this.tx`
        insert into txn_affected (resource, id)
        select resource, id from json_to_recordset(${JSON.stringify(refs)}::text::json) as x(resource text, id uuid)
        on conflict do nothing`
    }
    if (wide.equipment.length > 0 || wide.sites.length > 0) {
      await this.tx`
        insert into txn_wide (tbl, id)
        select 'equipment', unnest(${wide.equipment as string[]}::uuid[])
        union select 'job_sites', unnest(${wide.sites as string[]}::uuid[])
        on conflict do nothing`
    }
    if (tenancy.size > 0) await writeCompanies(this.tx, store, tenancy)
    if (users.size > 0) await writeUsers(this.tx, store, users)
    this.changes += chunk.length
  }

  /** At commit: rewrites the touched views and writes the transaction's events. */
  async finish(endLsn: Lsn, commitTime: Date): Promise<{ tally: Map<string, number>; quarantine: QuarantineDelta }> {
    const tally = new Map<string, number>()
    if (!this.started) return { tally, quarantine: this.contractOnly(endLsn) }
    // The inspections of the wide equipment and sites, as the mirror has them at the commit.
    const tx = this.tx
    await tx`
      insert into txn_affected (resource, id)
      select 'inspections', i.key::uuid from (${wideInspectionKeys(tx, tx`array(select id from txn_wide where tbl = 'equipment')`, tx`array(select id from txn_wide where tbl = 'job_sites')`)}) i
      order by 2 on conflict do nothing`
    let after = 0
    for (;;) {
      const rows = await this.tx<Array<{ seq: string; resource: string; id: string }>>`
        select seq, resource, id::text from txn_affected where seq > ${after} order by seq limit ${CHUNK}`
      if (rows.length === 0) break
      after = Number(rows[rows.length - 1]!.seq)
      const refs: RecordRef[] = rows.flatMap((r) =>
        isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []
      )
      if (this.q === null) await reprojectViews(this.tx, refs, { commit: commitTime })
      else await this.reprojectHolding(refs, commitTime, endLsn)
    }
    let seq = 0
    let lastSeq = 0
    for (;;) {
      const rows = await this.tx<Array<{ seq: string; tbl: string; key: string; data: Row | null }>>`
        select seq, tbl, key, data from txn_before where seq > ${lastSeq} order by seq limit ${CHUNK}`
      if (rows.length === 0) break
      lastSeq = Number(rows[rows.length - 1]!.seq)
      const store = new Store(this.tx)
      const candidates = rows
      await store.loadKeys(candidates.map((r) => [r.tbl, r.key] as const))
      const kinds = candidates.map((r) => ({
        r,
        kinds: eventsFor(r.tbl, r.data, store.get(r.tbl, r.key)?.data ?? null)
      }))
      const refs = kinds.flatMap(({ r, kinds }) => kinds.map((k) => ({ resource: EVENT_RESOURCE[k], id: r.key })))
      await prepare(store, refs)
      const companies = new Set(
        refs
          .map((ref) => store.get(RESOURCE_INFO[ref.resource].table, ref.id)?.companyId)
          .filter((c): c is string => !!c)
      )
      await store.loadChildren("company_modules", companies)
      const events: OutboxEvent[] = []
      for (const { r, kinds: ks } of kinds) {
        for (const kind of ks) {
          const resource = EVENT_RESOURCE[kind]
          if (this.q !== null && (this.q.isHeld(r.tbl, r.key) || this.poisoned.has(r.tbl, r.key))) continue
          const view = project(store, { resource, id: r.key })
          if (!view || !moduleOn(store, view.companyId, resource)) continue
          events.push({
            companyId: view.companyId,
            event: kind,
            resource,
            recordId: r.key,
            commitLsn: endLsn,
            seq: seq++,
            payload: view.body,
            createdAt: commitTime
          })
        }
      }
      await writeEvents(this.tx, events)
      for (const e of events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
      // Incidents this transaction made privacy cases: their earlier events lose the fields too.
      await scrubPrivacyCases(
        this.tx,
        candidates
          .filter(
            (r) =>
              r.tbl === "incidents" &&
              r.data?.privacy_case !== true &&
              store.get("incidents", r.key)?.data.privacy_case === true
          )
          .map((r) => r.key)
      )
    }
    if (this.q === null) return { tally, quarantine: EMPTY_DELTA }
    const held: Held[] = []
    this.poisoned.forEachKey((table, key) => held.push({ ...this.poisoned.get(table, key)!, lsn: endLsn }))
    // What the held records owe: their row before this transaction.
    if (held.length > 0) {
      const rows = await this.tx<{ tbl: string; key: string; data: Row | null }[]>`
        select tbl, key, data from txn_before where (tbl, key) in (
          select * from unnest(${held.map((h) => h.table)}::text[], ${held.map((h) => h.ref.id)}::text[]))`
      const before = new TableMap<Row | null>()
      for (const r of rows) before.set(r.tbl, r.key, r.data)
      for (let i = 0; i < held.length; i++) {
        const h = held[i]!
        if (before.has(h.table, h.ref.id)) held[i] = { ...h, before: before.get(h.table, h.ref.id) ?? null }
      }
    }
    for (const h of held) this.q.hold(h.table, h.ref.id, h.blockedBy)
    this.q.owe(held)
    const delta: QuarantineDelta = { held, released: [], contract: this.contract.map((c) => ({ ...c, lsn: endLsn })) }
    const write = quarantineWrites(delta)
    if (write !== null) await write(this.tx)
    return { tally, quarantine: delta }
  }

  private contractOnly(endLsn: Lsn): QuarantineDelta {
    return this.contract.length === 0
      ? EMPTY_DELTA
      : { held: [], released: [], contract: this.contract.map((c) => ({ ...c, lsn: endLsn })) }
  }

  /** Records this transaction could not shape, by table and key (their view is left as it was). */
  private readonly poisoned = new TableMap<Omit<Held, "lsn">>()

  /**
   * reprojectViews, holding what cannot be shaped: a held record keeps its last good view (it is
   * shaped again at its next batch or on retry); a record that throws is held, its row as it
   * stands here taken as what it owes from (finish replaces it with its row before the transaction).
   */
  private async reprojectHolding(refs: ReadonlyArray<RecordRef>, commitTime: Date, endLsn: Lsn): Promise<void> {
    const q = this.q!
    const store = new Store(this.tx)
    await prepare(store, refs)
    const ok: RecordRef[] = []
    for (const r of refs) {
      const table = RESOURCE_INFO[r.resource].table
      if (q.isHeld(table, r.id)) continue
      const forced = this.forced.get(table, r.id)
      let error = forced?.error ?? null
      if (error === null) {
        try {
          project(store, r)
          ok.push(r)
          continue
        } catch (e) {
          if (!isPoison(e)) throw e
          error = `${r.resource} ${r.id}: ${errorText(e)}`
        }
      }
      const row = store.get(table, r.id)
      this.poisoned.set(table, r.id, {
        ref: r,
        table,
        error,
        companyId: row?.companyId ?? null,
        before: row?.data ?? null,
        blockedBy: forced?.blockedBy ?? null
      })
    }
    void endLsn
    const { views, gone } = finalViews(store, ok)
    await writeViews(this.tx, views, gone, { commit: commitTime })
  }
}
