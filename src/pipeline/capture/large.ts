// A transaction too large to hold in memory is applied while it streams: chunk by chunk
// into the mirror inside one open database transaction, remembering in temporary tables
// each row's state before the transaction and the records it touched. At its commit every
// touched record goes through the one step (step/step.ts), chunk by chunk, as a batch's do:
// its view written, removed or kept (held), its events, its scrubs, its holds and releases.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import type { Row } from "../../domain/records/types.ts"
import { isResource, RESOURCE_INFO } from "../../domain/resources.ts"
import { eventWrites } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { mayHaveEvents, scrubDeletedRecords } from "../outbox/deleted.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { prepare, project, type ProjectedView } from "../projection/project.ts"
import { type MirrorRow, STAGING_TABLE, Store } from "../projection/store.ts"
import { standsFor, VIEW_BACKED } from "../projection/by-view.ts"
import {
  type CommitTime,
  keepsMirror,
  type MirrorChanges,
  mirrorWrites,
  redactViews,
  stagingWrites,
  viewWrites,
  writeCompanies,
  writeUsers
} from "../projection/write.ts"
import { RECORD_CHANGES_CHANNEL } from "../../platform/db/channels.ts"
import type { Lsn } from "../../platform/db/lsn.ts"
import type { RowChange } from "./txn.ts"
import { BatchHolds } from "./quarantine/holds.ts"
import type { QuarantineMarker } from "./quarantine/markers.ts"
import { askingRereads, type CaptureQuarantine, emptyDelta, type QuarantineDelta } from "./quarantine/state.ts"
import { quarantineWrites } from "./quarantine/writes.ts"
import { loadFor, WIDE_TABLES, wideInspectionKeys } from "./step/load.ts"
import { mirrorChanges } from "./step/mirror.ts"
import { Step } from "./step/step.ts"

const EVENT_TABLES = new Set(Object.values(EVENT_RESOURCE).map((r) => RESOURCE_INFO[r].table))
const CHUNK = 2000

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** A record the transaction touched, read at its commit: its row before (changed), its row now, how the mirror holds it. */
interface AffectedRow {
  readonly seq: string
  readonly resource: string
  readonly id: string
  readonly tbl: string
  readonly changed: boolean
  readonly data: Row | null
  readonly company_id: string | null
  readonly parent_id: string | null
  readonly row: string | null
  readonly staged: boolean
  readonly stored: boolean
}

export class LargeTransaction {
  private readonly tx: Tx
  private started = false
  changes = 0
  /** Rows applied without values the mirror does not have either: read again from the app once committed. */
  readonly incomplete: Array<readonly [string, string]> = []
  /** Capture's quarantine, for this transaction (null: none, as in rebuild tests). */
  private readonly holds: BatchHolds | null

  constructor(tx: Tx, q: CaptureQuarantine | null = null) {
    this.tx = tx
    this.holds = q === null ? null : new BatchHolds(q)
  }

  /** A marker met inside the transaction (a Relation message: the table's contract from here on). */
  mark(m: QuarantineMarker): void {
    this.holds?.mark(m, 0n)
  }

  /** Makes the transaction's temporary tables (once; before the first chunk, or before a TRUNCATE reads the staged rows). */
  async init() {
    if (this.started) return
    this.started = true
    await this
      .tx`create temp table txn_before (seq bigserial, tbl text, key text, data jsonb, primary key (tbl, key)) on commit drop`
    await this
      .tx`create temp table txn_affected (seq bigserial primary key, resource text, id uuid, tbl text, unique (resource, id)) on commit drop`
    // Equipment and job sites whose inspections' views show what changed (step/load.ts, Wide).
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
    this.incomplete.push(...store.incomplete)
    if (tenancy.size > 0) await writeCompanies(this.tx, store, tenancy)
    if (users.size > 0) await writeUsers(this.tx, store, users)
    this.changes += chunk.length
  }

  /**
   * At commit: rewrites the touched views and writes the transaction's events, in one pass

  /**
   * At commit: every record the transaction touched goes through the one step (step/step.ts),
   * chunk by chunk, from its row before the transaction and its row at the commit: its view
   * written or removed (or kept, held), its events, its scrubs.
   */
  async finish(endLsn: Lsn, commitTime: Date): Promise<{ tally: Map<string, number>; quarantine: QuarantineDelta }> {
    const tally = new Map<string, number>()
    if (!this.started) return { tally, quarantine: await this.settle(endLsn) }
    const point = { endLsn, commitTime }
    // The inspections of the wide equipment and sites, as the mirror has them at the commit
    // (not while a table they read does not fit: read again, it reaches them).
    const tx = this.tx
    if (!WIDE_TABLES.some((t) => this.holds?.q.blocksTable(t)))
      await tx`
      insert into txn_affected (resource, id, tbl)
      select 'inspections', i.key::uuid, 'inspections' from (${wideInspectionKeys(tx, tx`array(select id from txn_wide where tbl = 'equipment')`, tx`array(select id from txn_wide where tbl = 'job_sites')`)}) i
      order by 2 on conflict do nothing`
    const counter = { seq: 0 }
    // Chunk after chunk, pipelined: a chunk's records, with their rows before the transaction
    // and now, are read (one statement) before the chunk ahead of it is written, so that it is
    // shaped while PostgreSQL writes that one. At most two chunks' writes are in flight.
    let next = this.chunkAfter(0)
    let writing: Promise<unknown> = Promise.resolve()
    for (;;) {
      const rows = await next
      if (rows.length === 0) break
      next = this.chunkAfter(Number(rows[rows.length - 1]!.seq))
      const chunk = await this.settleChunk(point, rows, counter)
      for (const e of chunk.events) tally.set(e.event, (tally.get(e.event) ?? 0) + 1)
      const written = chunk.write()
      written.catch(() => {})
      await writing
      writing = written
    }
    await writing
    // Followers of the record changes wake at the commit (docs/integrators.md).
    await tx`select pg_notify(${RECORD_CHANGES_CHANNEL}, '')`
    return { tally, quarantine: await this.settle(endLsn) }
  }

  /** A chunk of the records the transaction touched, after `after`: each with its row before (changed: its own row did change) and now. */
  private chunkAfter(after: number) {
    const tx = this.tx
    const p = tx<AffectedRow[]>`
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
    p.catch(() => {}) // awaited by the caller; a failure must not go unhandled meanwhile
    return p
  }

  /** A chunk's records through the step: what it writes (views, mirror, events, scrubs), not yet issued. */
  private async settleChunk(
    point: { endLsn: Lsn; commitTime: Date },
    rows: ReadonlyArray<AffectedRow>,
    counter: { seq: number }
  ) {
    const tx = this.tx
    const store = new Store(tx, null, true)
    store.seed(
      rows.map((r) => ({ tbl: r.tbl, key: r.id, companyId: r.company_id, parentId: r.parent_id, data: r.row }))
    )
    const refs: RecordRef[] = rows.flatMap((r) => (isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []))
    await prepare(store, refs)
    await this.holds?.lookup(
      tx,
      refs.map((r) => [tableOf(r), r.id] as const)
    )
    await this.loadModules(new Set(rows.flatMap((r) => (r.company_id === null ? [] : [r.company_id]))))
    const step = new Step(
      store,
      (r) => project(store, r),
      this.holds,
      (c, resource) => this.modules.get(c)?.has(resource) === true,
      counter
    )
    const views: ProjectedView[] = []
    const gone: RecordRef[] = []
    const kept: string[] = []
    // Records whose row the transaction inserted have no view yet: a plain insert each.
    const fresh = new Set<string>()
    for (const r of rows) {
      if (!isResource(r.resource)) continue
      const ref: RecordRef = { resource: r.resource, id: r.id }
      const { verdict, view } = step.at(point, ref, r.changed ? r.data : undefined)
      if (verdict.kind === "gone") gone.push(ref)
      else if (verdict.kind === "held") {
        if (ref.resource === "incidents" && store.get(r.tbl, r.id)?.data.privacy_case === true) kept.push(r.id)
      } else if (view !== null) {
        views.push(view)
        if (r.changed && r.data === null) fresh.add(`${view.resource}|${view.id}`)
      }
    }
    const shown = new Map(views.map((v) => [`${v.resource}|${v.id}`, v]))
    // The record changes' places (sql/052): the order the transaction first touched each record.
    const places = new Map(rows.map((r) => [`${r.resource}|${r.id}`, Number(r.seq)]))
    const time: CommitTime = {
      commit: point.commitTime,
      lsn: point.endLsn,
      place: (resource, id) => {
        const ord = places.get(`${resource}|${id}`)
        return ord === undefined ? undefined : { lsn: point.endLsn, ord, commit: point.commitTime }
      }
    }
    const events = step.scrubbedEvents()
    const goneRefs = step.goneRefs()
    const privacy = [...step.privacy]
    const mirror = this.mirrorAtCommit(store, rows, shown)
    const write = async () => {
      await Promise.all([this.writeViews(views, gone, fresh, time), ...mirrorWrites(mirror)(tx)])
      if (kept.length > 0) await redactViews(tx, "incidents", kept, time)
      await Promise.all(eventWrites(events, (e) => shown.get(`${e.resource}|${e.recordId}`)?.body === e.payload)(tx))
      // Deleted means gone; a privacy case's stored events lose the person's details (after this chunk's events).
      if (mayHaveEvents(goneRefs)) await scrubDeletedRecords(tx, goneRefs)
      if (privacy.length > 0) await scrubPrivacyCases(tx, privacy)
    }
    return { events, write }
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
    time: CommitTime
  ): Promise<unknown> {
    const isFresh = (v: ProjectedView) => fresh.has(`${v.resource}|${v.id}`)
    const p = Promise.all(
      viewWrites(
        views.filter((v) => !isFresh(v)),
        gone,
        time,
        views.filter(isFresh)
      )(this.tx)
    )
    p.catch(() => {}) // held by the caller, awaited later
    return p
  }

  /** The quarantine's changes, written in the transaction. */
  private async settle(endLsn: Lsn): Promise<QuarantineDelta> {
    const delta = askingRereads(this.holds === null ? emptyDelta(0) : this.holds.finish(endLsn), this.incomplete)
    const write = quarantineWrites(delta)
    if (write !== null) await write(this.tx)
    return delta
  }
}
