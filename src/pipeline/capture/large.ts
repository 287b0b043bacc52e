// A transaction too large to hold in memory is applied while it streams: chunk by chunk
// into the mirror inside one open database transaction, remembering in temporary tables
// each row's state before the transaction and the records it touched. At its commit the
// touched views are rewritten and its events derived from those tables, chunk by chunk.
//
// With capture's quarantine (quarantine.ts) a record that cannot be shaped is held as in a
// batch (apply.ts, BatchHolds): its view is left as it was and its events wait; a held record
// the transaction reaches that shapes now is released, its owed events fired once after the
// transaction's own.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { isResource, RESOURCE_INFO } from "../../domain/resources.ts"
import { writeEvents, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { mayHaveEvents, scrubDeletedRecords } from "../outbox/deleted.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { prepare, project, type ProjectedView } from "../projection/project.ts"
import { Store } from "../projection/store.ts"
import { mirrorWrites, writeCompanies, writeUsers, writeViews } from "../projection/write.ts"
import {
  BatchHolds,
  loadFor,
  mirrorChanges,
  moduleOn,
  owedEvents,
  reprojectViews,
  wideInspectionKeys
} from "./apply.ts"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { RowChange } from "./txn.ts"
import {
  type CaptureQuarantine,
  emptyDelta,
  type QuarantineDelta,
  type QuarantineMarker,
  quarantineWrites
} from "./quarantine.ts"

const EVENT_TABLES = new Set(Object.values(EVENT_RESOURCE).map((r) => RESOURCE_INFO[r].table))
const CHUNK = 1000

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** An event a healed record owes, before its place (seq) in the transaction is known. */
type Owed = Omit<OutboxEvent, "seq">

export class LargeTransaction {
  private readonly tx: Tx
  private started = false
  changes = 0
  /** Capture's quarantine, for this transaction (null: none, as in rebuild tests). */
  private readonly holds: BatchHolds | null
  /** Held records this transaction shaped again: released, with the events they owe. */
  private readonly released: RecordRef[] = []
  private readonly owed: Owed[] = []
  private readonly healedIncidents: string[] = []

  constructor(tx: Tx, q: CaptureQuarantine | null = null) {
    this.tx = tx
    this.holds = q === null ? null : new BatchHolds(q)
  }

  /** A marker met inside the transaction (a Relation message: the table's contract from here on). */
  mark(m: QuarantineMarker): void {
    this.holds?.mark(m, 0n)
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
      this.holds?.force(c, store.get(c.table, c.key)?.data ?? null)
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
    if (!this.started) return { tally, quarantine: await this.settle(endLsn) }
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
      const gone =
        this.holds === null
          ? await reprojectViews(this.tx, refs, { commit: commitTime })
          : await this.reprojectHolding(this.holds, refs, commitTime, endLsn)
      // Deleted means gone: their stored events keep only their identifiers. This transaction
      // fires none about them (a record gone at its commit fires nothing), so earlier ones only.
      if (mayHaveEvents(gone)) await scrubDeletedRecords(this.tx, gone)
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
      await this.holds?.lookup(
        this.tx,
        candidates.map((r) => [r.tbl, r.key] as const)
      )
      const kinds = candidates.map((r) => ({
        r,
        // A held record's events wait (those it owes fire once it shapes).
        kinds: this.holds?.isHeld(r.tbl, r.key) ? [] : eventsFor(r.tbl, r.data, store.get(r.tbl, r.key)?.data ?? null)
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
              store.get("incidents", r.key)?.data.privacy_case === true &&
              !this.holds?.isHeld(r.tbl, r.key)
          )
          .map((r) => r.key)
      )
    }
    // The events the healed records owe, after the transaction's own.
    if (this.owed.length > 0) {
      const events = this.owed.map((e) => ({ ...e, seq: seq++ }))
      await writeEvents(this.tx, events)
      for (const e of events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
      await scrubPrivacyCases(this.tx, this.healedIncidents)
    }
    return { tally, quarantine: await this.settle(endLsn) }
  }

  /** The quarantine's changes, written in the transaction. */
  private async settle(endLsn: Lsn): Promise<QuarantineDelta> {
    const holds = this.holds
    if (holds === null) return emptyDelta(0)
    // What records held here owe: their row before this transaction (their row at its commit
    // when it was not an event table's, whose rows are not kept: they owe no events anyway).
    const fresh: Array<{ table: string; key: string }> = []
    holds.held.forEachKey((table, key) => {
      if (holds.held.get(table, key)!.before !== undefined) fresh.push({ table, key })
    })
    if (fresh.length > 0 && this.started) {
      const rows = await this.tx<{ tbl: string; key: string; data: Row | null }[]>`
        select tbl, key, data from txn_before where (tbl, key) in (
          select * from unnest(${fresh.map((h) => h.table)}::text[], ${fresh.map((h) => h.key)}::text[]))`
      for (const r of rows) holds.held.set(r.tbl, r.key, { ...holds.held.get(r.tbl, r.key)!, before: r.data })
    }
    holds.held.forEachKey((t, k) => holds.held.set(t, k, { ...holds.held.get(t, k)!, lsn: endLsn }))
    const delta = holds.finish(this.released, endLsn)
    const write = quarantineWrites(delta)
    if (write !== null) await write(this.tx)
    return delta
  }

  /**
   * reprojectViews, holding what cannot be shaped: a record that cannot be shaped keeps its
   * view and is held; a held record that shapes now is released, its view written and the events
   * it owes kept for the end of the transaction.
   */
  private async reprojectHolding(
    holds: BatchHolds,
    refs: ReadonlyArray<RecordRef>,
    commitTime: Date,
    endLsn: Lsn
  ): Promise<ReadonlyArray<RecordRef>> {
    const store = new Store(this.tx)
    await prepare(store, refs)
    await holds.lookup(
      this.tx,
      refs.map((r) => [tableOf(r), r.id] as const)
    )
    const projections = { get: (r: RecordRef) => project(store, r) }
    const views: ProjectedView[] = []
    const gone: RecordRef[] = []
    const healed: Array<{ ref: RecordRef; view: ProjectedView }> = []
    for (const r of refs) {
      const v = holds.shape(projections, r)
      if (v !== null && "poison" in v) {
        holds.hold(store, r, v, endLsn)
        continue
      }
      if (v === null) gone.push(r)
      else views.push(v)
      if (holds.heldBefore(tableOf(r), r.id) === undefined) continue
      this.released.push(r)
      if (v !== null) healed.push({ ref: r, view: v })
    }
    await writeViews(this.tx, views, gone, { commit: commitTime })
    if (healed.length === 0) return gone
    const owed = await holds.q.owedBy(
      this.tx,
      healed.map((h) => h.ref)
    )
    await store.loadChildren("company_modules", new Set(healed.map((h) => h.view.companyId)))
    for (const { ref, view } of healed) {
      const table = tableOf(ref)
      const now = store.get(table, ref.id)?.data ?? null
      for (const { kind, resource } of owedEvents(store, ref, view, owed.get(table, ref.id) ?? null, now)) {
        this.owed.push({
          companyId: view.companyId,
          event: kind,
          resource,
          recordId: ref.id,
          commitLsn: endLsn,
          payload: view.body,
          createdAt: commitTime
        })
      }
      if (ref.resource === "incidents" && now?.privacy_case === true) this.healedIncidents.push(ref.id)
    }
    return gone
  }
}
