// Every record of the mirror through the one step (step.ts), a chunk at a time, as a starting
// point: a first start or a lost slot's rebuild (bootstrap.ts) and rebuild-views (rebuild.ts).
// Nothing fires. A record that cannot be shaped keeps its view and is held, owing nothing; a
// view whose record is gone goes, with a tombstone, its stored events keeping only their
// identifiers; a privacy case's stored events, and its view if held, lose the person's details.
import type { Transaction as Tx } from "../../../platform/db/Database.ts"
import { RESOURCE_INFO, RESOURCES, type Resource } from "../../../domain/resources.ts"
import { scrubDeletedRecords } from "../../outbox/deleted.ts"
import { scrubPrivacyCases } from "../../outbox/privacy.ts"
import { VIEW_BACKED } from "../../projection/by-view.ts"
import type { RecordRef } from "../../projection/dependencies.ts"
import { prepare, project, type ProjectedView } from "../../projection/project.ts"
import { Store } from "../../projection/store.ts"
import { type ChangeTime, mirrorWrites, redactViews, writeViews } from "../../projection/write.ts"
import type { BatchHolds } from "../quarantine/holds.ts"
import { mirrorChanges } from "./mirror.ts"
import { type Point, Step } from "./step.ts"

const CHUNK = 1000

/**
 * Keys of one mirror table, page by page (keyset on the primary key); with `viewsToo`, then
 * those of the rows its views stand for (projection/by-view.ts: a view without a stored row),
 * keyset on the views' primary key.
 */
export async function* mirrorKeys(tx: Tx, tbl: string, page: number, viewsToo = false) {
  const resource = VIEW_BACKED.get(tbl)
  if (viewsToo && resource !== undefined) {
    // Which rows views stand for, taken before any is re-projected: re-projecting a stored row
    // may leave it to its view, and it must not be met twice.
    await tx`create temp table if not exists mirror_by_view (id uuid primary key) on commit drop`
    await tx`truncate mirror_by_view`
    await tx`
      insert into mirror_by_view
      select v.id from service.views v
       where v.resource = ${resource} and not exists (select 1 from service.rows r where r.tbl = ${tbl} and r.key = v.id::text)`
  }
  let after = ""
  for (;;) {
    const rows = await tx<Array<{ key: string }>>`
      select key from service.rows where tbl = ${tbl} and key > ${after} order by key limit ${page}`
    if (rows.length > 0) yield rows.map((r) => r.key)
    if (rows.length < page) break
    after = rows[rows.length - 1]!.key
  }
  if (!viewsToo || resource === undefined) return
  let id = "00000000-0000-0000-0000-000000000000"
  for (;;) {
    const rows = await tx<Array<{ key: string }>>`
      select id::text as key from mirror_by_view where id > ${id}::uuid order by id limit ${page}`
    if (rows.length > 0) yield rows.map((r) => r.key)
    if (rows.length < page) return
    id = rows[rows.length - 1]!.key
  }
}

export interface StartingPoint {
  /** Where the mirror's state is: the holds' LSN, and when a changed view changed. */
  readonly point: Point
  readonly time: ChangeTime
  /** Resources whose views stay as they are (they read a table that does not fit, or is read again): only their privacy cases are seen to. */
  readonly skip: ReadonlySet<Resource>
  /** Held records are left as they are (rebuild-views: capture shapes them again). */
  readonly keepHeld: boolean
  /** Also the rows views stand for (rebuild-views: the mirror was not just loaded). */
  readonly viewsToo: boolean
  readonly onProgress?: (done: number) => void
}

export interface Settled {
  /** Records taken through the step. */
  readonly records: number
  /** Records found gone (their views removed). */
  readonly gone: number
  /** Records held before, left as they are (keepHeld). */
  readonly held: ReadonlyArray<RecordRef>
  /** Records that cannot be shaped now: held, their views kept. */
  readonly unshaped: ReadonlyArray<RecordRef>
}

/** Every record of the mirror as a starting point (see the file's head). `holds`: the quarantine as it stands. */
export const settleAll = async (tx: Tx, holds: BatchHolds, opts: StartingPoint): Promise<Settled> => {
  let records = 0
  let gone = 0
  const held: RecordRef[] = []
  const unshaped: RecordRef[] = []
  for (const resource of RESOURCES) {
    const tbl = RESOURCE_INFO[resource].table
    const skipped = opts.skip.has(resource)
    if (skipped && resource !== "incidents") continue
    for await (const keys of mirrorKeys(tx, tbl, CHUNK, opts.viewsToo && !skipped)) {
      const refs = keys.map((id): RecordRef => ({ resource, id }))
      const store = new Store(tx)
      await prepare(store, refs)
      if (skipped) {
        await privacyOnly(tx, store, refs)
        continue
      }
      await holds.lookup(
        tx,
        refs.map((r) => [tbl, r.id] as const)
      )
      const step = new Step(
        store,
        (r) => project(store, r),
        holds,
        () => false
      )
      const views: ProjectedView[] = []
      const lost: RecordRef[] = []
      const kept: string[] = []
      for (const ref of refs) {
        const privacyCase = resource === "incidents" && store.get(tbl, ref.id)?.data.privacy_case === true
        if (opts.keepHeld && holds.isHeld(tbl, ref.id)) {
          held.push(ref)
          if (privacyCase) kept.push(ref.id)
          continue
        }
        const { verdict, view } = step.at(opts.point, ref, undefined, true)
        if (verdict.kind === "gone") lost.push(ref)
        else if (verdict.kind === "held") {
          unshaped.push(ref)
          if (privacyCase) kept.push(ref.id)
        } else if (view !== null) views.push(view)
      }
      await writeViews(tx, views, lost, opts.time)
      // The mirror rows the rewritten views stand for, or no longer do (step/mirror.ts).
      await Promise.all(mirrorWrites(mirrorChanges(store, views))(tx))
      if (kept.length > 0) await redactViews(tx, "incidents", kept)
      await scrubDeletedRecords(tx, step.goneRefs())
      if (step.privacy.size > 0) await scrubPrivacyCases(tx, [...step.privacy])
      records += refs.length
      gone += lost.length
      opts.onProgress?.(records)
    }
  }
  return { records, gone, held, unshaped }
}

/** Incidents whose views stay as they are: a privacy case's stored events and view lose the person's details still. */
const privacyOnly = async (tx: Tx, store: Store, refs: ReadonlyArray<RecordRef>) => {
  const cases = refs.filter((r) => store.get("incidents", r.id)?.data.privacy_case === true).map((r) => r.id)
  if (cases.length === 0) return
  await redactViews(tx, "incidents", cases)
  await scrubPrivacyCases(tx, cases)
}
