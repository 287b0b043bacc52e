// Which mirror rows a commit point writes, once its views are known: a view-backed row whose
// view, as written, stands for it (projection/by-view.ts) is not stored, and a stored copy of it
// goes; one whose view no longer does is stored, changed or not.
import { type MirrorRow, type Store, TableMap } from "../../projection/store.ts"
import type { ProjectedView } from "../../projection/project.ts"
import { standsFor, viewBackedTable } from "../../projection/by-view.ts"
import type { MirrorChanges } from "../../projection/write.ts"

/**
 * What a batch changes in the mirror, as statements take it, once its views are known
 * (`written`: every view it writes). A view-backed row whose view, as written, stands for it
 * (projection/by-view.ts) is not stored, and a stored copy of it goes; one whose view no longer
 * does is stored, changed or not (the view the mirror read it from is being rewritten).
 * The view and the mirror row are written in the same transaction, which keeps the mirror
 * itself (sql/032: no copy made by the views' trigger).
 */
export const mirrorChanges = (store: Store, written: ReadonlyArray<ProjectedView> = []): MirrorChanges => {
  const { inserts, updates, deletes } = store.changes()
  if (written.length === 0) return { inserts, upserts: updates, deletes }
  const stands = new TableMap<boolean>()
  for (let i = 0; i < written.length; i++) {
    const v = written[i]!
    const table = viewBackedTable(v.resource)
    if (table === undefined) continue
    const row = store.get(table, v.id)
    if (row !== null) stands.set(table, v.id, standsFor(table, v.record, v.companyId, row.data))
  }
  if (stands.isEmpty()) return { inserts, upserts: updates, deletes }
  const stored = (r: MirrorRow) => stands.get(r.tbl, r.key) !== true
  const upserts = updates.filter(stored)
  stands.forEachKey((tbl, key) => {
    if (stands.get(tbl, key)) {
      // Stored before this batch (or read from its view: then the delete finds nothing).
      if (store.getBase(tbl, key) !== null) deletes.push({ tbl, key })
    } else if (!store.changed(tbl, key)) upserts.push(store.get(tbl, key)!)
  })
  return { inserts: inserts.filter(stored), upserts, deletes }
}
