// A transaction too large to hold in memory is applied while it streams: chunk by chunk
// into the mirror inside one open database transaction, remembering in temporary tables
// each row's state before the transaction and the records it touched. At its commit the
// touched views are rewritten and its events derived from those tables, chunk by chunk.
//
// With capture's quarantine (quarantine/) a record that cannot be shaped is held as in a
// batch (apply.ts, BatchHolds): its view is left as it was and its events wait; a held record
// the transaction reaches that shapes now is released, its owed events fired once after the
// transaction's own.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { eventsFor } from "../../domain/events.ts"
import type { Row } from "../../domain/records/types.ts"
import { isResource, RESOURCE_INFO } from "../../domain/resources.ts"
import { eventWrites, writeEvents, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { mayHaveEvents, scrubDeletedRecords } from "../outbox/deleted.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { prepare, project, type ProjectedView } from "../projection/project.ts"
import { type MirrorRow, STAGING_TABLE, Store } from "../projection/store.ts"
import { standsFor, VIEW_BACKED } from "../projection/by-view.ts"
import {
  keepsMirror,
  type MirrorChanges,
  mirrorWrites,
  stagingWrites,
  viewWrites,
  writeCompanies,
  writeUsers
} from "../projection/write.ts"
import { BatchHolds, finalViews, loadFor, mirrorChanges, owedEvents, wideInspectionKeys } from "./apply.ts"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { RowChange } from "./txn.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"
import { type CaptureQuarantine, emptyDelta, type QuarantineDelta } from "./quarantine/state.ts"
import { quarantineWrites } from "./quarantine/writes.ts"

const EVENT_TABLES = new Set(Object.values(EVENT_RESOURCE).map((r) => RESOURCE_INFO[r].table))
const CHUNK = 2000

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** A chunk's views as shaped (by resource|id), the records gone, and the views' writes under way. */
interface Reprojected {
  readonly views: Map<string, ProjectedView>
  readonly gone: ReadonlyArray<RecordRef>
  readonly written: Promise<unknown>
}

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
      .tx`create temp table txn_affected (seq bigserial primary key, resource text, id uuid, tbl text, unique (resource, id)) on commit drop`
    // Equipment and job sites whose inspections' views show what changed (apply.ts, Wide).
    await this.tx`create temp table txn_wide (tbl text, id uuid, primary key (tbl, id)) on commit drop`
    // Rows of view-backed tables as the transaction leaves them (store.ts, STAGING_TABLE): at
    // the commit each is stored in the mirror only if its view does not stand for it, so an
    // import of new records writes no mirror row for most of them.
    await this.tx`
      create temp table ${this.tx(STAGING_TABLE)} (tbl text, key text, company_id uuid, parent_id uuid, data text,
        primary key (tbl, key)) on commit drop`
    await keepsMirror(this.tx)
  }

  /** Applies a chunk of the transaction's changes to the mirror. */
  async add(chunk: ReadonlyArray<RowChange>): Promise<void> {
    await this.init()
    const store = new Store(this.tx, null, true)
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
    // The chunk's statements go out together, answered in order (one round trip, not five).
    const writes: Array<Promise<unknown>> = []
    if (befores.length > 0) {
      writes.push(
        this.tx`
        insert into txn_before (tbl, key, data)
        select tbl, key, data from json_to_recordset(${JSON.stringify(befores)}::text::json) as x(tbl text, key text, data jsonb)
        order by 1 on conflict do nothing`.execute()
      )
    }
    // View-backed rows go to the staging table, the others to the mirror as in a batch.
    const { inserts = [], upserts = [], deletes = [] } = mirrorChanges(store)
    const staged = <R extends { readonly tbl: string }>(rows: ReadonlyArray<R>, yes: boolean) =>
      rows.filter((r) => VIEW_BACKED.has(r.tbl) === yes)
    writes.push(
      ...mirrorWrites({
        inserts: staged(inserts, false),
        upserts: staged(upserts, false),
        deletes: staged(deletes, false)
      })(this.tx),
      ...stagingWrites({
        upserts: [...staged(inserts, true), ...staged(upserts, true)],
        deletes: staged(deletes, true)
      })(this.tx)
    )
    if (refs.length > 0) {
      writes.push(
        this.tx`
        insert into txn_affected (resource, id, tbl)
        select resource, id, tbl from json_to_recordset(${JSON.stringify(refs.map((r) => ({ ...r, tbl: tableOf(r) })))}::text::json)
          as x(resource text, id uuid, tbl text)
        on conflict do nothing`.execute()
      )
    }
    if (wide.equipment.length > 0 || wide.sites.length > 0) {
      writes.push(
        this.tx`
        insert into txn_wide (tbl, id)
        select 'equipment', unnest(${wide.equipment as string[]}::uuid[])
        union select 'job_sites', unnest(${wide.sites as string[]}::uuid[])
        on conflict do nothing`.execute()
      )
    }
    await Promise.all(writes)
    if (tenancy.size > 0) await writeCompanies(this.tx, store, tenancy)
    if (users.size > 0) await writeUsers(this.tx, store, users)
    this.changes += chunk.length
  }

  /**
   * At commit: rewrites the touched views and writes the transaction's events, in one pass
   * over the records it touched (each read from the mirror once: its view, then its events,
   * which carry that view's body).
   */
  async finish(endLsn: Lsn, commitTime: Date): Promise<{ tally: Map<string, number>; quarantine: QuarantineDelta }> {
    const tally = new Map<string, number>()
    if (!this.started) return { tally, quarantine: await this.settle(endLsn) }
    // The inspections of the wide equipment and sites, as the mirror has them at the commit.
    const tx = this.tx
    await tx`
      insert into txn_affected (resource, id, tbl)
      select 'inspections', i.key::uuid, 'inspections' from (${wideInspectionKeys(tx, tx`array(select id from txn_wide where tbl = 'equipment')`, tx`array(select id from txn_wide where tbl = 'job_sites')`)}) i
      order by 2 on conflict do nothing`
    const state = { seq: 0 }
    let met = 0
    // Chunk after chunk, pipelined: a chunk's records, with their rows before the transaction
    // and now, are read (one statement) before the chunk ahead of it is written, so that it is
    // shaped while PostgreSQL writes that one. At most two chunks' writes are in flight.
    const load = (after: number) => {
      const p = tx<
        Array<{
          seq: string
          resource: string
          id: string
          tbl: string
          changed: boolean
          data: Row | null
          company_id: string | null
          parent_id: string | null
          row: string | null
          staged: boolean
          stored: boolean
        }>
      >`
        select a.seq, a.resource, a.id::text, a.tbl, b.key is not null as changed, b.data,
               case when s.key is not null then s.company_id when m.key is not null then m.company_id else v.company_id end as company_id,
               case when s.key is not null then s.parent_id else m.parent_id end as parent_id,
               case when s.key is not null then s.data when m.key is not null then m.data when v.id is not null then 'v' || v.body end as row,
               s.key is not null as staged, m.key is not null as stored
          from txn_affected a
          left join txn_before b on b.tbl = a.tbl and b.key = a.id::text
          left join ${tx(STAGING_TABLE)} s on s.tbl = a.tbl and s.key = a.id::text
          left join service.rows m on m.tbl = a.tbl and m.key = a.id::text
          left join service.views v on s.key is null and m.key is null
                and service.view_backed_table(a.resource) = a.tbl and v.resource = a.resource and v.id = a.id
         where a.seq > ${after} order by a.seq limit ${CHUNK}`.execute()
      p.catch(() => {}) // awaited below; a failure must not go unhandled meanwhile
      return p
    }
    let next = load(0)
    let writing: Promise<unknown> = Promise.resolve()
    for (;;) {
      const rows = await next
      if (rows.length === 0) break
      next = load(Number(rows[rows.length - 1]!.seq))
      const refs: RecordRef[] = rows.flatMap((r) =>
        isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []
      )
      // Records whose row the transaction inserted have no view yet: a plain insert each.
      const fresh = new Set(rows.filter((r) => r.changed && r.data === null).map((r) => `${r.resource}|${r.id}`))
      const store = new Store(tx, null, true)
      store.seed(
        rows.map((r) => ({ tbl: r.tbl, key: r.id, companyId: r.company_id, parentId: r.parent_id, data: r.row }))
      )
      const {
        views,
        gone,
        written: viewsWritten
      } = this.holds === null
        ? await this.reproject(store, refs, fresh, commitTime)
        : await this.reprojectHolding(store, this.holds, refs, fresh, commitTime, endLsn)
      const written = Promise.all([viewsWritten, ...mirrorWrites(this.mirrorAtCommit(store, rows, views))(tx)])
      // Deleted means gone: their stored events keep only their identifiers. This transaction
      // fires none about them (a record gone at its commit fires nothing), so earlier ones only.
      if (mayHaveEvents(gone)) await scrubDeletedRecords(tx, gone)
      const changed = rows.filter((r) => r.changed).map((r) => ({ tbl: r.tbl, key: r.id, data: r.data }))
      met += changed.length
      const events = await this.eventsOf(store, changed, views, endLsn, commitTime, state, tally)
      const chunk = Promise.all([written, events])
      chunk.catch(() => {})
      await writing
      writing = chunk
    }
    await writing
    // Changed rows of event tables whose record was not among those touched (none expected:
    // a row's own record always is), so that no event can be missed.
    const [before] = await tx<{ n: number }[]>`select count(*)::int as n from txn_before`
    let lastSeq = 0
    while (before!.n > met) {
      const rows = await tx<Array<{ seq: string; tbl: string; key: string; data: Row | null }>>`
        select b.seq, b.tbl, b.key, b.data from txn_before b
         where b.seq > ${lastSeq} and not exists (select 1 from txn_affected a where a.tbl = b.tbl and a.id::text = b.key)
         order by b.seq limit ${CHUNK}`
      if (rows.length === 0) break
      lastSeq = Number(rows[rows.length - 1]!.seq)
      const store = new Store(tx, null, true)
      await store.loadKeys(rows.map((r) => [r.tbl, r.key] as const))
      await this.holds?.lookup(
        tx,
        rows.map((r) => [r.tbl, r.key] as const)
      )
      await await this.eventsOf(store, rows, new Map(), endLsn, commitTime, state, tally)
    }
    // The events the healed records owe, after the transaction's own.
    if (this.owed.length > 0) {
      const events = this.owed.map((e) => ({ ...e, seq: state.seq++ }))
      await writeEvents(tx, events)
      for (const e of events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
      await scrubPrivacyCases(tx, this.healedIncidents)
    }
    return { tally, quarantine: await this.settle(endLsn) }
  }

  /**
   * The events of changed rows, from their row before the transaction and at its commit (in
   * `store`, whose records' views `views` holds when just written: those events take their
   * payload from there, not sent again).
   */
  private async eventsOf(
    store: Store,
    rows: ReadonlyArray<{ tbl: string; key: string; data: Row | null }>,
    views: ReadonlyMap<string, ProjectedView>,
    endLsn: Lsn,
    commitTime: Date,
    state: { seq: number },
    tally: Map<string, number>
  ): Promise<Promise<unknown>> {
    if (rows.length === 0) return Promise.resolve()
    const kinds = rows.map((r) => ({
      r,
      // A held record's events wait (those it owes fire once it shapes).
      kinds: this.holds?.isHeld(r.tbl, r.key) ? [] : eventsFor(r.tbl, r.data, store.get(r.tbl, r.key)?.data ?? null)
    }))
    const refs = kinds.flatMap(({ r, kinds }) =>
      kinds.flatMap((k) =>
        views.has(`${EVENT_RESOURCE[k]}|${r.key}`) ? [] : [{ resource: EVENT_RESOURCE[k], id: r.key }]
      )
    )
    if (refs.length > 0) await prepare(store, refs)
    const companies = new Set<string>()
    for (const { r, kinds: ks } of kinds) {
      for (const k of ks) {
        const c = store.get(RESOURCE_INFO[EVENT_RESOURCE[k]].table, r.key)?.companyId
        if (c) companies.add(c)
      }
    }
    await this.loadModules(companies)
    const events: OutboxEvent[] = []
    const written = new Set<OutboxEvent>()
    for (const { r, kinds: ks } of kinds) {
      for (const kind of ks) {
        const resource = EVENT_RESOURCE[kind]
        const shown = views.get(`${resource}|${r.key}`)
        const view = shown ?? project(store, { resource, id: r.key })
        if (!view || !this.modules.get(view.companyId)?.has(resource)) continue
        const e: OutboxEvent = {
          companyId: view.companyId,
          event: kind,
          resource,
          recordId: r.key,
          commitLsn: endLsn,
          seq: state.seq++,
          payload: view.body,
          createdAt: commitTime
        }
        events.push(e)
        if (shown !== undefined) written.add(e)
      }
    }
    const writes = eventWrites(events, (e) => written.has(e))(this.tx)
    for (const e of events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
    // Incidents this transaction made privacy cases: their earlier events lose the fields too.
    const scrub = scrubPrivacyCases(
      this.tx,
      rows
        .filter(
          (r) =>
            r.tbl === "incidents" &&
            r.data?.privacy_case !== true &&
            store.get("incidents", r.key)?.data.privacy_case === true &&
            !this.holds?.isHeld(r.tbl, r.key)
        )
        .map((r) => r.key)
    )
    return Promise.all([...writes, scrub])
  }

  /** Companies' enabled modules as the mirror has them at the commit (finish writes no mirror row). */
  private readonly modules = new Map<string, Set<string>>()

  private async loadModules(companies: ReadonlySet<string>): Promise<void> {
    const want = [...companies].filter((c) => !this.modules.has(c))
    if (want.length === 0) return
    const store = new Store(this.tx)
    await store.loadChildren("company_modules", want)
    for (const c of want) {
      const on = new Set<string>()
      for (const m of store.childrenOf("company_modules", c))
        if (m.data.enabled === true && typeof m.data.module === "string") on.add(m.data.module)
      this.modules.set(c, on)
    }
  }

  /**
   * What the mirror keeps of a chunk's view-backed records at the commit: a row its view, as
   * just written, stands for is not stored (a stored copy goes); any other row the transaction
   * changed, or whose view it rewrote, is stored; one it deleted goes.
   */
  private mirrorAtCommit(
    store: Store,
    rows: ReadonlyArray<{ resource: string; id: string; tbl: string; staged: boolean; stored: boolean }>,
    views: ReadonlyMap<string, ProjectedView>
  ): MirrorChanges {
    const upserts: MirrorRow[] = []
    const deletes: Array<{ tbl: string; key: string }> = []
    for (const r of rows) {
      if (!VIEW_BACKED.has(r.tbl)) continue
      const row = store.get(r.tbl, r.id)
      const view = views.get(`${r.resource}|${r.id}`)
      if (row === null || (view !== undefined && standsFor(r.tbl, view.record, view.companyId, row.data))) {
        if (r.stored) deletes.push({ tbl: r.tbl, key: r.id })
      } else if (r.staged || view !== undefined) upserts.push(row)
    }
    return { upserts, deletes }
  }

  /** Issues the views' writes (not awaited: the caller holds the promise). */
  private writeViews(
    views: ReadonlyArray<ProjectedView>,
    gone: ReadonlyArray<RecordRef>,
    fresh: ReadonlySet<string>,
    commitTime: Date
  ): Promise<unknown> {
    const isFresh = (v: ProjectedView) => fresh.has(`${v.resource}|${v.id}`)
    const p = Promise.all(
      viewWrites(
        views.filter((v) => !isFresh(v)),
        gone,
        { commit: commitTime },
        views.filter(isFresh)
      )(this.tx)
    )
    p.catch(() => {}) // held by the caller, awaited later
    return p
  }

  /** Re-projects records from the mirror as the transaction sees it and writes their views; the views written, by resource|id. */
  private async reproject(
    store: Store,
    refs: ReadonlyArray<RecordRef>,
    fresh: ReadonlySet<string>,
    commitTime: Date
  ): Promise<Reprojected> {
    await prepare(store, refs)
    const { views, gone } = finalViews(store, refs)
    const written = this.writeViews(views, gone, fresh, commitTime)
    return { views: new Map(views.map((v) => [`${v.resource}|${v.id}`, v])), gone, written }
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
    store: Store,
    holds: BatchHolds,
    refs: ReadonlyArray<RecordRef>,
    fresh: ReadonlySet<string>,
    commitTime: Date,
    endLsn: Lsn
  ): Promise<Reprojected> {
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
    const writes = this.writeViews(views, gone, fresh, commitTime)
    const written = new Map(views.map((v) => [`${v.resource}|${v.id}`, v]))
    if (healed.length === 0) return { views: written, gone, written: writes }
    await writes
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
    return { views: written, gone, written: Promise.resolve() }
  }
}
