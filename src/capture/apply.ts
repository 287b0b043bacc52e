// Applies a batch of decoded transactions in one database transaction: the mirror, the
// views, the outbox and the checkpoint move together, so a crash replays the whole batch
// or none of it. Transactions are simulated in commit order over an in-memory Store so
// each event carries its record as it stood at its own commit.
import type { TransactionSql } from "postgres"
import { EVENT_RESOURCE } from "../domain/event-kinds.ts"
import { eventsFor } from "../domain/events.ts"
import type { Row } from "../domain/records/types.ts"
import { RESOURCE_INFO, type Resource } from "../domain/resources.ts"
import { writeEvents, type OutboxEvent } from "../outbox/events.ts"
import { scrubPrivacyCases } from "../outbox/privacy.ts"
import { dependentsOf, type RecordRef } from "../projection/dependencies.ts"
import { prepare, project, type ProjectedView } from "../projection/project.ts"
import { Store } from "../projection/store.ts"
import { rowCompany } from "../projection/tables.ts"
import { writeCompanies, writeMirror, writeUsers, writeViews } from "../projection/write.ts"
import type { Txn } from "./txn.ts"

type Tx = TransactionSql<Record<string, unknown>>

export interface BatchResult {
  readonly changes: number
  readonly events: ReadonlyArray<OutboxEvent>
}

const refKey = (r: RecordRef) => r.resource + "|" + r.id

export const moduleOn = (store: Store, companyId: string, resource: Resource): boolean =>
  store.someChild("company_modules", companyId, (m) => m.data.module === resource && m.data.enabled === true)

/** Everything a set of row changes makes the views depend on, loaded into the store. */
export const loadFor = async (store: Store, changes: ReadonlyArray<{ table: string; key: string; data: Row | null }>) => {
  await store.loadKeys(changes.map((c) => [c.table, c.key] as const))
  const refs = new Map<string, RecordRef>()
  const equipment = new Set<string>()
  const sites = new Set<string>()
  const companies = new Set<string>()
  const tenancy = new Set<string>()
  const users = new Set<string>()
  for (const c of changes) {
    const before = store.getBase(c.table, c.key)?.data ?? null
    const deps = dependentsOf(c.table, c.key, before, c.data)
    for (const r of deps.records) refs.set(refKey(r), r)
    for (const e of deps.inspectionsOfEquipment) equipment.add(e)
    for (const s of deps.inspectionsAtSite) sites.add(s)
    for (const row of [before, c.data]) {
      const company = row ? rowCompany(c.table, row) : null
      if (company) companies.add(company)
    }
    if (c.table === "companies") tenancy.add(c.key)
    if (c.table === "company_modules") tenancy.add(c.key.slice(0, c.key.indexOf(":")))
    if (c.table === "users") users.add(c.key)
  }
  if (sites.size > 0) {
    await store.loadChildren("equipment", sites)
    for (const s of sites) for (const e of store.childrenOf("equipment", s)) equipment.add(e.key)
  }
  if (equipment.size > 0) {
    await store.loadChildren("inspections", equipment)
    for (const e of equipment) for (const i of store.childrenOf("inspections", e)) refs.set(refKey({ resource: "inspections", id: i.key }), { resource: "inspections", id: i.key })
  }
  const seen = changes.flatMap((c) => (c.data ? [{ tbl: c.table, data: c.data }] : []))
  await prepare(store, refs.values(), seen)
  for (const id of [...refs.values()].map((r) => store.getBase(tableOf(r), r.id)?.companyId)) if (id) companies.add(id)
  for (const c of tenancy) companies.add(c)
  await store.loadKeys([...tenancy].map((id) => ["companies", id] as const))
  await store.loadChildren("company_modules", companies)
  return { refs: [...refs.values()], tenancy, users }
}

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

/** Simulates one transaction over the store; returns its events (seq from 0). */
export const simulate = (store: Store, txn: Txn): OutboxEvent[] => {
  const before = new Map<string, { table: string; key: string; data: Row | null }>()
  for (const c of txn.changes) {
    const id = c.table + "|" + c.key
    if (!before.has(id)) before.set(id, { table: c.table, key: c.key, data: store.get(c.table, c.key)?.data ?? null })
    store.apply(c.table, c.key, c.data)
  }
  const events: OutboxEvent[] = []
  for (const b of before.values()) {
    const after = store.get(b.table, b.key)?.data ?? null
    for (const kind of eventsFor(b.table, b.data, after)) {
      const resource = EVENT_RESOURCE[kind]
      const view = project(store, { resource, id: b.key })
      if (!view || !moduleOn(store, view.companyId, resource)) continue
      events.push({
        companyId: view.companyId,
        event: kind,
        resource,
        recordId: b.key,
        commitLsn: txn.endLsn,
        seq: events.length,
        payload: view.body,
        createdAt: txn.commitTime
      })
    }
  }
  return events
}

/** Final views of the given records: rewritten, or deleted when their row is gone. */
export const finalViews = (store: Store, refs: ReadonlyArray<RecordRef>) => {
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  for (const r of refs) {
    const v = project(store, r)
    if (v) views.push(v)
    else gone.push(r)
  }
  return { views, gone }
}

/** The gone records with the commit time of the last transaction of the batch that changed their row. */
export const deletedAt = (txns: ReadonlyArray<Txn>, gone: ReadonlyArray<RecordRef>): ReadonlyArray<RecordRef & { readonly at?: Date }> => {
  if (gone.length === 0) return gone
  const wanted = new Map(gone.map((r) => [tableOf(r) + "|" + r.id, r]))
  const at = new Map<RecordRef, Date>()
  for (const t of txns) {
    for (const c of t.changes) {
      const r = wanted.get(c.table + "|" + c.key)
      if (r !== undefined) at.set(r, t.commitTime)
    }
  }
  return gone.map((r) => {
    const when = at.get(r)
    return when === undefined ? r : { ...r, at: when }
  })
}

/**
 * Incidents that are privacy cases at the end of the batch and whose stored events may still
 * carry the withheld fields: they were not one before it, or they have events in it.
 */
export const newPrivacyCases = (store: Store, changes: ReadonlyArray<{ table: string; key: string }>, events: ReadonlyArray<OutboxEvent>): string[] => {
  const ids = new Set<string>()
  const withEvents = new Set(events.filter((e) => e.resource === "incidents").map((e) => e.recordId))
  for (const c of changes) {
    if (c.table !== "incidents" || ids.has(c.key)) continue
    if (store.get("incidents", c.key)?.data.privacy_case !== true) continue
    if (store.getBase("incidents", c.key)?.data.privacy_case !== true || withEvents.has(c.key)) ids.add(c.key)
  }
  return [...ids]
}

export const applyBatch = async (tx: Tx, txns: ReadonlyArray<Txn>): Promise<BatchResult> => {
  const store = new Store(tx)
  const changes = txns.flatMap((t) => t.changes)
  const { refs, tenancy, users } = await loadFor(store, changes)
  const events = txns.flatMap((t) => simulate(store, t))
  const { upserts, deletes } = store.changes()
  // The writes are independent: issued together, they run back to back on the connection
  // while the views are shaped here, instead of waiting for each round trip in turn.
  const writes: Promise<unknown>[] = [writeMirror(tx, upserts, deletes)]
  const { views, gone } = finalViews(store, refs)
  // No view of the batch changed after its last commit; a deleted record was deleted when the
  // last transaction that changed its row committed.
  writes.push(writeViews(tx, views, deletedAt(txns, gone), txns.length > 0 ? { commit: txns[txns.length - 1]!.commitTime } : { mirror: null }))
  if (tenancy.size > 0) writes.push(writeCompanies(tx, store, tenancy))
  if (users.size > 0) writes.push(writeUsers(tx, store, users))
  writes.push(writeEvents(tx, events))
  const privacy = newPrivacyCases(store, changes, events)
  if (privacy.length > 0) writes.push(scrubPrivacyCases(tx, privacy)) // after the events above
  await Promise.all(writes)
  return { changes: changes.length, events }
}
