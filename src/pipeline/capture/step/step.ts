// The one step: a record at a commit point, decided by the one rule (rules.ts) and turned into
// what the point writes: its events (each with the record as of that point), its holds and
// releases, and which stored events lose a privacy case's fields or keep only a deleted
// record's identifiers. Every route that turns app rows into the service's state goes through
// here: a stream's transactions (batch.ts), a large transaction's commit (large.ts), a first
// start or a lost slot's rebuild (bootstrap.ts), rebuild-views (rebuild.ts), a re-read and a
// held record shaped again (both arrive as a transaction's changes or requests).
import { EVENT_RESOURCE, type EventKind } from "../../../domain/event-kinds.ts"
import { scrubToIdentifiers } from "../../../domain/records/deleted.ts"
import type { Row } from "../../../domain/records/types.ts"
import { RESOURCE_INFO, type Resource } from "../../../domain/resources.ts"
import type { Lsn } from "../../../platform/db/lsn.ts"
import type { OutboxEvent } from "../../outbox/events.ts"
import type { RecordRef } from "../../projection/dependencies.ts"
import type { ProjectedView } from "../../projection/project.ts"
import { type Store, TableMap } from "../../projection/store.ts"
import { type BatchHolds, OWN } from "../quarantine/holds.ts"
import { errorText, isPoison } from "../quarantine/poison.ts"
import { type RecordAt, scrubsPrivacy, type Verdict, verdict } from "./rules.ts"

/** A commit point: where its events go in the outbox, and when they happened. */
export interface Point {
  readonly endLsn: Lsn
  readonly commitTime: Date
}

const tableOf = (r: RecordRef) => RESOURCE_INFO[r.resource].table

export class Step {
  readonly events: OutboxEvent[] = []
  /** Incidents whose stored events lose a privacy case's fields, once this point's events are written. */
  readonly privacy = new Set<string>()
  /** Records found gone: every stored event about them keeps only their identifiers. */
  readonly gone = new TableMap<RecordRef>()
  /** Each record's last view shown at a point: a record held later keeps it (its last good view). */
  readonly shown = new TableMap<ProjectedView>()
  private lastLsn: Lsn | null = null
  /** The next event's place in its transaction (shared by the steps of one transaction's chunks). */
  private readonly counter: { seq: number }
  private readonly store: Store
  private readonly view: (ref: RecordRef) => ProjectedView | null
  private readonly holds: BatchHolds | null
  private readonly moduleOn: (companyId: string, resource: Resource) => boolean

  /**
   * `view` shapes a record from `store` (it throws on data it cannot shape: without `holds`
   * that ends the point, which its route shapes again with holds); `moduleOn` says whether an
   * event of a resource may fire for a company (its module is on at that point).
   */
  constructor(
    store: Store,
    view: (ref: RecordRef) => ProjectedView | null,
    holds: BatchHolds | null,
    moduleOn: (companyId: string, resource: Resource) => boolean,
    counter: { seq: number } = { seq: 0 }
  ) {
    this.counter = counter
    this.store = store
    this.view = view
    this.holds = holds
    this.moduleOn = moduleOn
  }

  /**
   * The record at a point, with its row before it when its own row changed there (undefined:
   * it did not; a child row or a request brought it here). A starting point (`baseline`) fires
   * nothing. Returns the verdict and, when it is shown, its view.
   */
  at(
    point: Point,
    ref: RecordRef,
    before: Row | null | undefined,
    baseline = false
  ): { readonly verdict: Verdict; readonly view: ProjectedView | null } {
    const table = tableOf(ref)
    const row = this.store.get(table, ref.id)
    const holds = this.holds
    const blocked = holds?.blocked(table, ref.id, row?.data ?? null)
    const at: RecordAt = {
      table,
      before: before === undefined ? (row?.data ?? null) : before,
      now: row?.data ?? null,
      owed: holds?.owed(table, ref.id),
      blocked: blocked !== undefined,
      baseline
    }
    let view: ProjectedView | null = null
    let poison: string | null = null
    let v = verdict(at, () => {
      if (holds === null) {
        view = this.view(ref)
        return true
      }
      try {
        view = this.view(ref)
        return true
      } catch (e) {
        if (!isPoison(e)) throw e
        poison = `${ref.resource} ${ref.id}: ${errorText(e)}`
        return false
      }
    })
    // A row that shows no record (no company) is as good as gone.
    if (v.kind === "shown" && view === null) v = { kind: "gone" }
    if (scrubsPrivacy(at)) this.privacy.add(ref.id)
    if (v.kind === "gone") {
      holds?.release(ref)
      this.shown.delete(ref.resource, ref.id)
      this.gone.set(ref.resource, ref.id, ref)
      return { verdict: v, view: null }
    }
    if (v.kind === "held") {
      const companyId = row?.companyId ?? this.store.getBase(table, ref.id)?.companyId ?? null
      holds!.hold(ref, blocked ?? { error: poison, info: OWN }, v.owes, companyId, point.endLsn)
      return { verdict: v, view: null }
    }
    if (v.released) holds?.release(ref)
    const shown = view as ProjectedView | null
    if (shown !== null) this.shown.set(ref.resource, ref.id, shown)
    if (shown !== null && v.events.length > 0) this.fire(point, ref, v.events, shown)
    return { verdict: v, view: shown }
  }

  private fire(point: Point, ref: RecordRef, kinds: ReadonlyArray<EventKind>, view: ProjectedView) {
    if (point.endLsn !== this.lastLsn) {
      if (this.lastLsn !== null) this.counter.seq = 0
      this.lastLsn = point.endLsn
    }
    for (const kind of kinds) {
      const resource = EVENT_RESOURCE[kind]
      if (!this.moduleOn(view.companyId, resource)) continue
      this.events.push({
        companyId: view.companyId,
        event: kind,
        resource,
        recordId: ref.id,
        commitLsn: point.endLsn,
        seq: this.counter.seq++,
        payload: view.body,
        createdAt: point.commitTime
      })
    }
  }

  /** The events, those of records found gone reduced to their identifiers (deleted means gone). */
  scrubbedEvents(): OutboxEvent[] {
    if (this.gone.isEmpty()) return this.events
    return this.events.map((e) =>
      this.gone.has(e.resource, e.recordId) ? { ...e, payload: scrubToIdentifiers(e.resource, e.payload) } : e
    )
  }

  /** The records found gone. */
  goneRefs(): RecordRef[] {
    const out: RecordRef[] = []
    this.gone.forEachKey((resource, id) => out.push(this.gone.get(resource, id)!))
    return out
  }
}
