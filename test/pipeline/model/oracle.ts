// The model's oracle: from the app's committed changes (logged by triggers, in commit order)
// and what the runner did (first start, renames, gaps, heals, discards), what the service must
// hold at the end. Written from docs/events.md and docs/privacy.md, not from capture's code:
// which events fire and when, each payload's moment, privacy and deletion scrubs, what is held
// and what a held record owes. It shapes records with the domain's shapers (src/domain/records,
// pure, with table tests of their own) and scrubs with the domain's redactions; everything
// about *when* and *whether* is stated here again.
import type { EventKind } from "../../../src/domain/event-kinds.ts"
import { scrubToIdentifiers } from "../../../src/domain/records/deleted.ts"
import { redactPrivacyCase } from "../../../src/domain/records/incidents.ts"
import { APP_COLUMNS } from "../../../src/domain/records/columns.ts"
import { shape } from "../../../src/domain/records/index.ts"
import type { Row } from "../../../src/domain/records/types.ts"
import { RESOURCE_INFO, RESOURCES, type Resource, resourceOfTable } from "../../../src/domain/resources.ts"

export interface LogEntry {
  readonly seq: number
  readonly xid: string
  readonly tbl: string
  readonly op: "insert" | "update" | "delete" | "truncate"
  readonly old: Record<string, unknown> | null
  readonly new: Record<string, unknown> | null
}

/** What the runner did, at a point of the log (`at`: the last log entry before it). */
export type Control =
  /** Capture's first start, or its start after a gap: the rows there now are its starting point. */
  | { readonly at: number; readonly kind: "bootstrap" }
  /** Capture stopped with everything applied, and its slot is gone (or about to be replaced): no events until the next bootstrap. */
  | { readonly at: number; readonly kind: "gap" }
  | { readonly at: number; readonly kind: "rename"; readonly table: string; readonly column: string }
  /** Tables renamed back and re-read by capture, its owed events fired between `from` and `to` (ms). */
  | {
      readonly at: number
      readonly kind: "heal"
      readonly tables: ReadonlyArray<string>
      readonly from: number
      readonly to: number
    }
  | { readonly at: number; readonly kind: "discard"; readonly table: string; readonly key: string }
  /** rebuild-views ran: it holds again what it cannot shape (a discarded record's row still poison). */
  | { readonly at: number; readonly kind: "rebuild" }
  /** Capture caught up: every view expected now was surely written. */
  | { readonly at: number; readonly kind: "settled" }

export interface ExpectedEvent {
  readonly kind: EventKind
  readonly resource: Resource
  readonly id: string
  payload: string
  /** Its commit time (ms), or the window it falls in. */
  readonly at: number | readonly [number, number]
}

interface Held {
  /** The row as of the commit before the record was held (null: it had none); `unknown`: columns capture could not read then. */
  readonly owedFrom: { readonly row: Row | null; readonly unknown: ReadonlyArray<string> }
  /** The renamed table that holds it, or null (its data cannot be shaped). */
  blockedBy: string | null
}

interface Rec {
  readonly resource: Resource
  readonly id: string
  held: Held | null
  /** The body of its last view capture could write (null: none). */
  lastGood: string | null
  /** Its view was surely written at some point (a settle): its deletion must leave a tombstone. */
  shown: boolean
  /** Its row changed (or was read) while its table did not fit: capture cannot shape it until the table is read again. */
  stale: boolean
  /**
   * It was a privacy case while held: its kept view lost the person's details, and keeps them
   * lost until it shapes again (the service keeps no copy of them to bring back), unless capture
   * met both commits in one batch.
   */
  keptRedacted: boolean
}

export interface Expected {
  readonly views: ReadonlyMap<string, string>
  /**
   * A view that may also read otherwise: a held incident that was a privacy case and is one no
   * more may keep its view without the details (if capture wrote it so between the two commits)
   * or with them (if both commits fell in one batch, whose states in between nobody saw).
   */
  readonly viewsOr: ReadonlyMap<string, string>
  readonly events: ReadonlyArray<ExpectedEvent>
  /** Deleted records whose tombstone must be there; and those whose tombstone may be. */
  readonly tombstones: { readonly required: ReadonlySet<string>; readonly allowed: ReadonlySet<string> }
  /** Records held because they cannot be shaped (not a renamed table): capture's quarantine lists each. */
  readonly poisoned: ReadonlySet<string>
  /** Records held for any reason (the quarantine lists nothing else). */
  readonly held: ReadonlySet<string>
  /** Text that must appear nowhere in the service's tables: a privacy case's withheld values, a deleted record's data. */
  readonly forbidden: ReadonlyMap<string, string>
}

const recKey = (resource: string, id: string) => `${resource}/${id}`

// ---- the event rules, stated again (docs/events.md#event-kinds) ------------------------------

const CLOSED = ["completed", "verified"]
const becomes = (before: Row | null, after: Row, column: string, value: string) =>
  after[column] === value && (before === null || before[column] !== value)

/** The events one record's net change fires, in the documented order (created before closed). */
export const eventsOf = (table: string, before: Row | null, after: Row | null): EventKind[] => {
  if (after === null) return []
  const out: EventKind[] = []
  const created = (k: EventKind) => before === null && out.push(k)
  switch (table) {
    case "incidents":
      created("incident.created")
      break
    case "observations":
      created("observation.created")
      break
    case "audits":
      created("audit.created")
      break
    case "training_records":
      created("training_record.created")
      break
    case "corrective_actions":
      created("corrective_action.created")
      if (CLOSED.includes(String(after.status)) && (before === null || !CLOSED.includes(String(before.status))))
        out.push("corrective_action.closed")
      break
    case "inspections":
      if (becomes(before, after, "outcome", "fail")) out.push("inspection.failed")
      break
    case "changes":
      if (becomes(before, after, "status", "approved")) out.push("change.approved")
      if (becomes(before, after, "status", "implemented")) out.push("change.implemented")
      break
    case "permits":
      if (becomes(before, after, "status", "approved")) out.push("permit.approved")
      if (becomes(before, after, "status", "closed")) out.push("permit.closed")
      break
  }
  return out
}

const EVENT_RESOURCE_OF: Readonly<Record<string, Resource>> = {
  incidents: "incidents",
  observations: "observations",
  audits: "audits",
  training_records: "training-records",
  corrective_actions: "corrective-actions",
  inspections: "inspections",
  changes: "changes",
  permits: "permits"
}

/** A value capture could not read then counts as unchanged. */
const fill = (owed: Held["owedFrom"], now: Row): Row | null => {
  if (owed.row === null) return null
  if (owed.unknown.length === 0) return owed.row
  const row: Record<string, unknown> = { ...owed.row }
  for (const c of owed.unknown) row[c] = now[c]
  return row
}

// ---- the app's rows, in the service's normal form --------------------------------------------

const PARENT: Readonly<Record<string, readonly [string, Resource]>> = {
  audit_items: ["audit_id", "audits"],
  inspection_items: ["inspection_id", "inspections"],
  policy_acknowledgements: ["policy_id", "policies"],
  subcontractor_documents: ["subcontractor_id", "subcontractors"]
}

const CHILD_OF: Partial<Record<Resource, string>> = {
  audits: "audit_items",
  inspections: "inspection_items",
  subcontractors: "subcontractor_documents"
}

/** A logged row (to_jsonb, columns renamed out of shape named back) as the mirror's normal form holds it. */
export const normalRow = (table: string, raw: Record<string, unknown>): Record<string, unknown> => {
  const columns = APP_COLUMNS[table]!
  const out: Record<string, unknown> = {}
  for (const [c, type] of Object.entries(columns)) {
    let v = c in raw ? raw[c] : raw[`${c}_x`]
    if (v === undefined) v = null
    if (type === "timestamptz" && typeof v === "string") {
      const d = new Date(v)
      v = Number.isNaN(d.getTime()) ? null : d.toISOString()
    }
    if (type === "numeric" && typeof v === "string" && Number.isFinite(Number(v))) v = Number(v)
    out[c] = v
  }
  return out
}

const keyOf = (table: string, row: Record<string, unknown>) =>
  table === "company_modules" ? `${String(row.company_id)}:${String(row.module)}` : String(row.id)

const WITHHELD_COLUMNS = ["description", "person_name", "location", "body_part", "injury_type"]
const MARKER = /Z[a-z]+\.\d+Z/g

export class Oracle {
  private readonly state = new Map<string, Map<string, Record<string, unknown>>>()
  private phase: "before" | "live" | "gap" = "before"
  private readonly broken = new Map<string, Set<string>>()
  private readonly recs = new Map<string, Rec>()
  private readonly events: ExpectedEvent[] = []
  private readonly tombRequired = new Set<string>()
  private readonly tombAllowed = new Set<string>()
  /** Every marker each record's own rows (and its children's) ever held; an incident's withheld ones apart. */
  private readonly markers = new Map<string, Set<string>>()
  private readonly withheldMarkers = new Map<string, Set<string>>()

  private readonly log: ReadonlyArray<LogEntry>
  private readonly controls: ReadonlyArray<Control>
  private readonly commitMs: ReadonlyMap<string, number>

  constructor(log: ReadonlyArray<LogEntry>, controls: ReadonlyArray<Control>, commitMs: ReadonlyMap<string, number>) {
    this.log = log
    this.controls = controls
    this.commitMs = commitMs
  }

  private table(t: string): Map<string, Record<string, unknown>> {
    let m = this.state.get(t)
    if (m === undefined) this.state.set(t, (m = new Map()))
    return m
  }

  private row(t: string, key: string): Record<string, unknown> | null {
    return this.state.get(t)?.get(key) ?? null
  }

  private rec(resource: Resource, id: string): Rec {
    const k = recKey(resource, id)
    let r = this.recs.get(k)
    if (r === undefined)
      this.recs.set(
        k,
        (r = { resource, id, held: null, lastGood: null, shown: false, stale: false, keptRedacted: false })
      )
    return r
  }

  /** The record as the API shapes it now; null when its row is gone; an error when it cannot be shaped. */
  private shapeNow(resource: Resource, id: string): { body: string } | { error: string } | null {
    const table = RESOURCE_INFO[resource].table
    const row = this.row(table, id)
    if (row === null) return null
    const child = CHILD_OF[resource]
    const children =
      child === undefined ? [] : [...this.table(child).values()].filter((c) => c[PARENT[child]![0]] === id)
    let equipment: Row | null = null
    let equipmentJobSite: Row | null = null
    if (resource === "inspections" && typeof row.equipment_id === "string") {
      equipment = this.row("equipment", row.equipment_id)
      const site = equipment?.job_site_id
      equipmentJobSite = typeof site === "string" ? this.row("job_sites", site) : null
    }
    const acknowledgementCount =
      resource === "policies"
        ? [...this.table("policy_acknowledgements").values()].filter((a) => a.policy_id === id).length
        : 0
    try {
      return {
        body: JSON.stringify(shape(resource, { row, children, acknowledgementCount, equipment, equipmentJobSite }))
      }
    } catch (e) {
      return { error: e instanceof Error ? e.message : String(e) }
    }
  }

  private moduleOn(company: unknown, resource: Resource): boolean {
    return this.row("company_modules", `${String(company)}:${resource}`)?.enabled === true
  }

  private eventsOfRecord(resource: Resource, id: string): ExpectedEvent[] {
    return this.events.filter((e) => e.resource === resource && e.id === id)
  }

  private deleted(r: Rec): void {
    const k = recKey(r.resource, r.id)
    this.tombAllowed.add(k)
    if (r.shown) this.tombRequired.add(k)
    for (const e of this.eventsOfRecord(r.resource, r.id)) e.payload = scrubToIdentifiers(r.resource, e.payload)
    r.held = null
    r.lastGood = null
    r.keptRedacted = false
  }

  private redactPrivacy(id: string): void {
    const r = this.recs.get(recKey("incidents", id))
    if (r !== undefined && r.held !== null) r.keptRedacted = true
    for (const e of this.eventsOfRecord("incidents", id)) e.payload = redactPrivacyCase(e.payload)
  }

  private remember(table: string, raw: Record<string, unknown> | null): void {
    if (raw === null) return
    const own = resourceOfTable(table)
    const parent = PARENT[table]
    const id = own !== undefined ? String(raw.id) : parent !== undefined ? String(raw[parent[0]]) : null
    if (id === null) return
    const resource = own ?? parent![1]
    const k = recKey(resource, id)
    const all = this.markers.get(k) ?? new Set<string>()
    this.markers.set(k, all)
    for (const [column, v] of Object.entries(raw)) {
      if (typeof v !== "string") continue
      for (const m of v.match(MARKER) ?? []) {
        all.add(m)
        if (table === "incidents" && WITHHELD_COLUMNS.includes(column.replace(/_x$/, ""))) {
          const w = this.withheldMarkers.get(k) ?? new Set<string>()
          this.withheldMarkers.set(k, w)
          w.add(m)
        }
      }
    }
  }

  /** Applies one transaction's logged changes; returns the rows it touched, each with its row before. */
  private applyTxn(entries: ReadonlyArray<LogEntry>) {
    const before = new Map<string, { table: string; key: string; row: Record<string, unknown> | null }>()
    const touch = (table: string, key: string) => {
      const k = `${table}|${key}`
      if (!before.has(k)) before.set(k, { table, key, row: this.row(table, key) })
    }
    for (const e of entries) {
      if (e.op === "truncate") {
        const t = this.table(e.tbl)
        for (const key of [...t.keys()]) {
          touch(e.tbl, key)
          t.delete(key)
        }
        continue
      }
      this.remember(e.tbl, e.old)
      this.remember(e.tbl, e.new)
      const raw = e.new ?? e.old!
      const row = normalRow(e.tbl, raw)
      const key = keyOf(e.tbl, row)
      touch(e.tbl, key)
      if (e.old !== null && e.new !== null) {
        const oldKey = keyOf(e.tbl, normalRow(e.tbl, e.old))
        if (oldKey !== key) {
          touch(e.tbl, oldKey)
          this.table(e.tbl).delete(oldKey)
        }
      }
      if (e.new === null) this.table(e.tbl).delete(key)
      else this.table(e.tbl).set(key, row)
    }
    return [...before.values()]
  }

  /** A committed transaction while capture follows the app (docs/events.md#how-events-are-derived). */
  private live(entries: ReadonlyArray<LogEntry>, at: number | readonly [number, number]): void {
    const changed = this.applyTxn(entries)
    // The records it touches: those whose own row changed (with that row before), and the
    // parents of child rows it changed, in the order first met.
    const touched = new Map<string, { resource: Resource; id: string; own: boolean; before: Row | null }>()
    for (const c of changed) {
      const own = resourceOfTable(c.table)
      if (own !== undefined) {
        const k = recKey(own, c.key)
        const t = touched.get(k)
        if (t === undefined || !t.own) touched.set(k, { resource: own, id: c.key, own: true, before: c.row })
        continue
      }
      const parent = PARENT[c.table]
      if (parent === undefined) continue
      for (const row of [c.row, this.row(c.table, c.key)]) {
        const id = row?.[parent[0]]
        if (typeof id === "string" && !touched.has(recKey(parent[1], id)))
          touched.set(recKey(parent[1], id), { resource: parent[1], id, own: false, before: null })
      }
    }
    for (const t of touched.values()) this.settle(t, at)
    this.refreshViews()
  }

  /** One touched record at a commit: deleted, held, healed, or its events. */
  private settle(
    t: { resource: Resource; id: string; own: boolean; before: Row | null },
    at: number | readonly [number, number]
  ): void {
    const table = RESOURCE_INFO[t.resource].table
    const r = this.rec(t.resource, t.id)
    const now = this.row(table, t.id)
    const ownBefore = t.own ? t.before : now
    if (now === null) {
      if (t.own || r.held !== null || r.lastGood !== null) this.deleted(r)
      return
    }
    if (r.held?.blockedBy && this.broken.has(r.held.blockedBy)) {
      // Still waiting for its table to fit and be read again.
    } else if ((t.own || r.stale) && this.broken.has(table)) {
      r.stale = true
      r.held = { owedFrom: r.held?.owedFrom ?? { row: ownBefore, unknown: [] }, blockedBy: table }
    } else {
      const s = this.shapeNow(t.resource, t.id)
      if (s !== null && "error" in s) {
        r.held = { owedFrom: r.held?.owedFrom ?? { row: ownBefore, unknown: [] }, blockedBy: null }
      } else if (s !== null) {
        const kinds =
          r.held !== null
            ? eventsOf(table, fill(r.held.owedFrom, now), now)
            : t.own
              ? eventsOf(table, ownBefore, now)
              : []
        r.held = null
        r.keptRedacted = false
        for (const kind of kinds) {
          const resource = EVENT_RESOURCE_OF[table]!
          if (this.moduleOn(now.company_id, resource))
            this.events.push({ kind, resource, id: t.id, payload: s.body, at })
        }
      }
    }
    // A privacy case's withheld fields leave every copy of it, held or not (docs/privacy.md#privacy-cases).
    if (table === "incidents" && now.privacy_case === true) this.redactPrivacy(t.id)
  }

  /** Every record not held shows its shape now. */
  private refreshViews(): void {
    for (const resource of RESOURCES) {
      const table = RESOURCE_INFO[resource].table
      for (const id of this.table(table).keys()) {
        const r = this.rec(resource, id)
        if (r.held !== null || r.stale) continue
        const s = this.shapeNow(resource, id)
        if (s !== null && "body" in s) r.lastGood = s.body
      }
    }
  }

  /** Capture's first start, or its start after a gap: the rows there now are its starting point. */
  private bootstrap(): void {
    for (const r of this.recs.values()) {
      const table = RESOURCE_INFO[r.resource].table
      if (this.row(table, r.id) === null && (r.lastGood !== null || r.held !== null)) this.deleted(r)
      r.held = null // what held records owed before is part of the gap
    }
    for (const resource of RESOURCES) {
      const table = RESOURCE_INFO[resource].table
      for (const [id, row] of this.table(table)) {
        const r = this.rec(resource, id)
        const renamed = this.broken.get(table)
        if (renamed !== undefined) {
          r.held = { owedFrom: { row, unknown: [...renamed] }, blockedBy: table }
          r.stale = true
          continue
        }
        r.stale = false
        r.keptRedacted = false
        const s = this.shapeNow(resource, id)
        if (s !== null && "error" in s) r.held = { owedFrom: { row, unknown: [] }, blockedBy: null }
        else if (s !== null) r.lastGood = s.body
      }
    }
    for (const [id, row] of this.table("incidents")) if (row.privacy_case === true) this.redactPrivacy(id)
  }

  private heal(tables: ReadonlyArray<string>, window: readonly [number, number]): void {
    for (const t of tables) this.broken.delete(t)
    // Read again: every row of those tables is whole.
    for (const r of this.recs.values()) if (tables.includes(RESOURCE_INFO[r.resource].table)) r.stale = false
    for (const r of this.recs.values()) {
      if (r.held === null || r.held.blockedBy === null || this.broken.has(r.held.blockedBy)) continue
      if (!tables.includes(r.held.blockedBy)) continue
      this.settle({ resource: r.resource, id: r.id, own: false, before: null }, window)
    }
    this.refreshViews()
  }

  /** Runs the whole history; what the service must hold at its end. */
  run(): Expected {
    const byXid = new Map<string, LogEntry[]>()
    const order: string[] = []
    for (const e of this.log) {
      let list = byXid.get(e.xid)
      if (list === undefined) {
        byXid.set(e.xid, (list = []))
        order.push(e.xid)
      }
      list.push(e)
    }
    // Transactions and the runner's controls, in log order (a control after every entry up to its `at`).
    let c = 0
    const controlsUpTo = (seq: number) => {
      while (c < this.controls.length && this.controls[c]!.at < seq) this.control(this.controls[c++]!)
    }
    for (const xid of order) {
      const entries = byXid.get(xid)!
      controlsUpTo(entries[0]!.seq)
      if (this.phase === "live") this.live(entries, this.commitMs.get(xid) ?? 0)
      else this.applyTxn(entries)
    }
    controlsUpTo(Number.POSITIVE_INFINITY)
    return this.expected()
  }

  private control(c: Control): void {
    switch (c.kind) {
      case "bootstrap":
        this.phase = "live"
        this.bootstrap()
        return
      case "gap":
        this.phase = "gap"
        return
      case "rename": {
        const cols = this.broken.get(c.table) ?? new Set<string>()
        cols.add(c.column)
        this.broken.set(c.table, cols)
        return
      }
      case "heal":
        if (this.phase === "live") this.heal(c.tables, [c.from, c.to])
        else for (const t of c.tables) this.broken.delete(t)
        return
      case "discard": {
        // What it owed is dropped; while its table does not fit it still waits, owing nothing from
        // here: from its row as capture can read it now (a column out of shape is unknown, and a
        // value it could not read counts as unchanged when the table fits again).
        const resource = resourceOfTable(c.table)
        if (resource === undefined) return
        const r = this.rec(resource, c.key)
        const blockedBy = r.held?.blockedBy ?? null
        r.held =
          blockedBy !== null && this.broken.has(blockedBy)
            ? {
                owedFrom: { row: this.row(c.table, c.key), unknown: [...(this.broken.get(blockedBy) ?? [])] },
                blockedBy
              }
            : null
        if (r.held === null) r.keptRedacted = false
        return
      }
      case "rebuild":
        // It keeps views and asks capture to shape held and unshapeable records again at this
        // point of its stream: one that still fails is held, owing nothing from its row now.
        for (const r of this.recs.values()) {
          if (r.held !== null) continue
          const row = this.row(RESOURCE_INFO[r.resource].table, r.id)
          if (row === null) continue
          const s = this.shapeNow(r.resource, r.id)
          if (s !== null && "error" in s) r.held = { owedFrom: { row, unknown: [] }, blockedBy: null }
        }
        return
      case "settled":
        for (const r of this.recs.values()) if (r.lastGood !== null) r.shown = true
        return
    }
  }

  private expected(): Expected {
    const views = new Map<string, string>()
    const viewsOr = new Map<string, string>()
    const poisoned = new Set<string>()
    const held = new Set<string>()
    const forbidden = new Map<string, string>()
    for (const r of this.recs.values()) {
      const k = recKey(r.resource, r.id)
      const table = RESOURCE_INFO[r.resource].table
      const row = this.row(table, r.id)
      if (row === null) {
        // Deleted means gone: nothing of it stays anywhere.
        if (this.tombAllowed.has(k)) for (const m of this.markers.get(k) ?? []) forbidden.set(m, `deleted ${k}`)
        continue
      }
      if (r.held !== null) {
        held.add(k)
        if (r.held.blockedBy === null) poisoned.add(k)
      }
      if (r.lastGood !== null) {
        views.set(k, r.held !== null && row.privacy_case === true ? redactPrivacyCase(r.lastGood) : r.lastGood)
        if (r.held !== null && row.privacy_case !== true && r.keptRedacted)
          viewsOr.set(k, redactPrivacyCase(r.lastGood))
      }
      if (table === "incidents" && row.privacy_case === true)
        for (const m of this.withheldMarkers.get(k) ?? []) forbidden.set(m, `privacy case ${k}`)
    }
    return {
      views,
      viewsOr,
      events: this.events,
      tombstones: { required: this.tombRequired, allowed: this.tombAllowed },
      poisoned,
      held,
      forbidden
    }
  }
}
