// Builds the mirror and every view from the app tables as of the slot's exported snapshot,
// in one transaction that also stores the checkpoint (the slot's consistent point). The
// stream then resumes exactly after it: nothing committed meanwhile is lost or applied twice,
// and no event fires for rows that already existed. With the service's own database, the
// app's rows are read at that snapshot on the app's database (a read-only repeatable-read
// transaction there) and written into the service's transaction.
import type { Transaction as Tx, Tx as Handle } from "../../platform/db/Database.ts"
import { Effect } from "effect"
import { AppSql, inTransaction, query, transaction } from "../../platform/db/Sql.ts"
import { markProjectionVersion } from "../projection/version.ts"
import { PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { RESOURCES, RESOURCE_INFO } from "../../domain/resources.ts"
import { mirrorChanges, reprojectViews } from "./apply.ts"
import { VIEW_BACKED } from "../projection/by-view.ts"
import { contractNow } from "./quarantine/contract.ts"
import { errorText, isPoison } from "./quarantine/poison.ts"
import type { RecordRef } from "../projection/dependencies.ts"
import { prepare, project, type ProjectedView, tablesRead } from "../projection/project.ts"
import type { Row } from "../../domain/records/types.ts"
import { isResource, type Resource } from "../../domain/resources.ts"
import { scrubDeletedRecords } from "../outbox/deleted.ts"
import { Store, type MirrorRow } from "../projection/store.ts"
import { APP_TABLES, rowCompany, rowKey, rowParent } from "../projection/tables.ts"
import {
  type ChangeTime,
  keepsMirror,
  mirrorWrites,
  removeOrphanViews,
  writeCompanies,
  writeMirror,
  writeUsers,
  writeViews
} from "../projection/write.ts"
import { groupSets } from "../../platform/sets.ts"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import { createSlotWithSnapshot, dropSlot } from "./slot.ts"
import { toIsoUtcOrNull } from "../../domain/time.ts"

const CHUNK = 2000

/**
 * Capture's projection code on the current transaction's connection: inside `transaction`,
 * the handle `query` gives is that connection. The projection must never run alone (a view
 * written without its mirror rows), so outside a transaction this is a defect.
 */
export const onTransaction = <A>(f: (tx: Tx) => Promise<A>) =>
  Effect.flatMap(inTransaction, (inside) =>
    inside ? query((sql) => f(sql as Tx)) : Effect.die(new Error("the projection runs inside a transaction only"))
  )

const timestampColumns = async (tx: Handle) => {
  const rows = await tx<{ table_name: string; column_name: string }[]>`
    select table_name, column_name from information_schema.columns
    where table_schema = 'app' and data_type = 'timestamp with time zone'`
  return groupSets(
    rows,
    (r) => r.table_name,
    (r) => r.column_name
  )
}

/** Copies the published columns of every app row (read on `app`, at the snapshot) into the
 *  mirror (written on `tx`), as the stream would, but those of `skip` (tables that no longer
 *  fit: capture re-reads them once they do). Pages by primary key (no cursor: with one
 *  database the same transaction writes between pages). */
const loadMirror = async (app: Handle, tx: Tx, skip: ReadonlySet<string> = new Set()) => {
  const ts = await timestampColumns(app)
  let total = 0
  for (const table of APP_TABLES) {
    if (skip.has(table)) continue
    const cols = PUBLISHED_COLUMNS[table]!
    const tsCols = ts.get(table) ?? new Set<string>()
    const keyCols = table === "company_modules" ? ["company_id", "module"] : ["id"]
    const select = `select json_build_object(${cols.map((c) => `'${c}', ${c}`).join(", ")}) as row,
      ${keyCols.map((c, i) => `${c}::text as k${i}`).join(", ")} from app.${table}`
    const order = `order by ${keyCols.join(", ")} limit ${CHUNK}`
    let after: string[] | null = null
    for (;;) {
      const rows: Array<{ row: Record<string, unknown>; k0: string; k1?: string }> = after
        ? await app.unsafe(
            `${select} where (${keyCols.join(", ")}) > (${keyCols.map((c, i) => `$${i + 1}::${c === "module" ? "text" : "uuid"}`).join(", ")}) ${order}`,
            after
          )
        : await app.unsafe(`${select} ${order}`)
      if (rows.length === 0) break
      const last = rows[rows.length - 1]!
      after = keyCols.length === 2 ? [last.k0, last.k1!] : [last.k0]
      const upserts: MirrorRow[] = rows.map(({ row }) => {
        // As the stream's values are normalised: canonical ISO, and "infinity" is null.
        for (const c of tsCols) if (typeof row[c] === "string") row[c] = toIsoUtcOrNull(row[c])
        return {
          tbl: table,
          key: rowKey(table, row),
          companyId: rowCompany(table, row),
          parentId: rowParent(table, row),
          data: row
        }
      })
      await writeMirror(tx, upserts, [])
      total += rows.length
      if (rows.length < CHUNK) break
    }
  }
  return total
}

/**
 * Keys of one mirror table, page by page (keyset on the primary key); with `viewsToo`, then
 * those of the rows its views stand for (projection/by-view.ts: a view without a stored row),
 * keyset on the views' primary key.
 */
async function* mirrorKeys(tx: Tx, tbl: string, page: number, viewsToo = false) {
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

/** A record bootstrap or rebuild-views could not shape: its view is left as it was. */
export interface Unshaped {
  readonly ref: RecordRef
  readonly table: string
  readonly companyId: string | null
  readonly error: string
  /** Its row in the mirror. */
  readonly row: Row | null
}

/** How projectAll treats records that cannot be shaped (quarantine/), rather than failing. */
export interface Holding {
  /** Resources left alone (their views kept): those reading a table that no longer fits. */
  readonly skip?: ReadonlySet<Resource>
  /** Leave records held in quarantine alone (their last good view stays; capture shapes them). */
  readonly keepHeld: boolean
  /** Records that could not be shaped, and held ones left alone, a chunk at a time. */
  readonly found: (unshaped: ReadonlyArray<Unshaped>, held: ReadonlyArray<RecordRef>) => Promise<void>
}

/** reprojectViews, but a record that cannot be shaped (or a held one) keeps its view and is handed to `hold`. */
const reprojectHolding = async (
  tx: Tx,
  resource: Resource,
  keys: ReadonlyArray<string>,
  time: ChangeTime,
  hold: Holding,
  keepMirror: boolean
): Promise<ReadonlyArray<RecordRef>> => {
  const tbl = RESOURCE_INFO[resource].table
  const held = hold.keepHeld
    ? new Set(
        (
          await tx<{ key: string }[]>`
            select key from service.capture_quarantine where tbl = ${tbl} and key = any(${keys as string[]}::text[])`
        ).map((r) => r.key)
      )
    : new Set<string>()
  const refs = keys.filter((id) => !held.has(id)).map((id): RecordRef => ({ resource, id }))
  const store = new Store(tx)
  await prepare(store, refs)
  const views: ProjectedView[] = []
  const gone: RecordRef[] = []
  const unshaped: Unshaped[] = []
  for (const r of refs) {
    try {
      const v = project(store, r)
      if (v === null) gone.push(r)
      else views.push(v)
    } catch (e) {
      if (!isPoison(e)) throw e
      const row = store.get(tbl, r.id)
      unshaped.push({
        ref: r,
        table: tbl,
        companyId: row?.companyId ?? null,
        error: `${r.resource} ${r.id}: ${errorText(e)}`,
        row: row?.data ?? null
      })
    }
  }
  await writeViews(tx, views, gone, time)
  // The mirror rows the rewritten views stand for, or no longer do (apply.ts, mirrorChanges).
  if (keepMirror) await Promise.all(mirrorWrites(mirrorChanges(store, views))(tx))
  if (unshaped.length > 0 || held.size > 0)
    await hold.found(
      unshaped,
      [...held].map((id) => ({ resource, id }))
    )
  return gone
}

/**
 * Re-projects every view (and the tenancy tables) from the mirror, in chunks. `mirrorAt`: the
 * time of the mirror's state, when a view changed (null: now). With `hold`, a record that
 * cannot be shaped keeps its view and is handed over instead of failing the whole rebuild.
 * `mirror.keep`: which rows the mirror stores follows the views written (projection/by-view.ts:
 * a row its view stands for is not stored); `mirror.viewsToo` (a rebuild, not a bootstrap, which
 * has just stored every row): the rows views stand for are re-projected too; the records found
 * gone go to `mirror.onGone`.
 */
export const projectAll = async (
  tx: Tx,
  onProgress?: (done: number) => void,
  mirrorAt: Date | null = null,
  hold: Holding | null = null,
  mirror: {
    readonly keep?: boolean
    readonly viewsToo?: boolean
    readonly onGone?: (gone: ReadonlyArray<RecordRef>) => Promise<void>
  } = {}
) => {
  const { keep = false, viewsToo = false, onGone = async () => {} } = mirror
  let done = 0
  for (const resource of RESOURCES) {
    if (hold?.skip?.has(resource)) continue
    const tbl = RESOURCE_INFO[resource].table
    for await (const keys of mirrorKeys(tx, tbl, CHUNK / 2, viewsToo)) {
      if (hold === null)
        await reprojectViews(
          tx,
          keys.map((id) => ({ resource, id })),
          { mirror: mirrorAt }
        )
      else {
        const gone = await reprojectHolding(tx, resource, keys, { mirror: mirrorAt }, hold, keep)
        if (gone.length > 0) await onGone(gone)
      }
      done += keys.length
      onProgress?.(done)
    }
  }
  return done
}

/** Rewrites service.companies and service.users from the mirror. */
export const projectTenancy = async (tx: Tx) => {
  for await (const ids of mirrorKeys(tx, "companies", CHUNK)) {
    const store = new Store(tx)
    await store.loadKeys(ids.map((id) => ["companies", id] as const))
    await store.loadChildren("company_modules", ids)
    await writeCompanies(tx, store, ids)
  }
  for await (const ids of mirrorKeys(tx, "users", CHUNK)) {
    const store = new Store(tx)
    await store.loadKeys(ids.map((id) => ["users", id] as const))
    await writeUsers(tx, store, ids)
  }
}

export interface BootstrapResult {
  readonly consistentPoint: Lsn
  readonly rows: number
  readonly views: number
}

/**
 * (Re)creates the slot and rebuilds mirror, views and tenancy from its snapshot.
 * `gapReason` records that events between the old checkpoint and now could not be derived.
 */
export const bootstrap = Effect.fn("bootstrap")(function* (
  url: string,
  slot: string,
  gapReason: string | null,
  failover = false,
  publication = "safety_records_service"
) {
  // Said before the slot is made, and committed: a bootstrap cut short leaves a slot behind,
  // and this row tells the next start to make it again, not to take the slot for one the
  // service's database fell behind (checkpoint.ts, behindSlotProblem). A gap is kept with it.
  yield* query(
    (sql) => sql`
      insert into service.capture_state (slot_name, checkpoint_lsn, gap_at, gap_reason)
      values (${slot}, '0/0', ${gapReason === null ? null : new Date()}, ${gapReason})
      on conflict (slot_name) do update set bootstrapped_at = null,
        gap_at = coalesce(excluded.gap_at, service.capture_state.gap_at),
        gap_reason = coalesce(excluded.gap_reason, service.capture_state.gap_reason)`
  )
  yield* dropSlot(slot)
  const exported = yield* Effect.promise(() => createSlotWithSnapshot(url, slot, failover))
  const { pool: appPool } = yield* AppSql
  // The app's rows at the slot's snapshot: with one database, in the transaction that writes
  // (as before); else a read-only repeatable-read transaction on the app's database, ended after.
  const reader = appPool === undefined ? null : yield* Effect.promise(() => appPool.reserve())
  const release = async () => {
    exported.release().catch(() => {})
    if (reader === null) return
    await reader`rollback`.catch(() => {})
    reader.release()
  }
  if (reader !== null)
    yield* Effect.promise(async () => {
      await reader`begin isolation level repeatable read read only`
      await reader.unsafe(`set transaction snapshot '${exported.snapshot.replace(/'/g, "")}'`)
    }).pipe(Effect.onError(() => Effect.promise(release)))
  const result: BootstrapResult = yield* transaction(
    Effect.gen(function* () {
      if (reader === null) {
        // Both before the transaction's first query: the snapshot needs repeatable read.
        yield* query((tx) => tx`set transaction isolation level repeatable read`)
        yield* query((tx) => tx.unsafe(`set transaction snapshot '${exported.snapshot.replace(/'/g, "")}'`))
      }
      /** The app's side at the snapshot: the transaction itself with one database. */
      const onApp = <A>(f: (app: Handle, tx: Tx) => Promise<A>) => onTransaction((tx) => f(reader ?? tx, tx))
      // Views are rewritten in place, not truncated: a view that did not change keeps its
      // change time, and one whose record went while the slot was lost gets a tombstone.
      yield* query((tx) => tx`truncate service.rows, service.companies, service.users`)
      // Every row is stored again below, and the views written here decide which stay stored
      // (projectAll): a view removed or rewritten keeps no copy of its old body in the mirror
      // (sql/032), which for an orphan's would bring its record back.
      yield* query(keepsMirror)
      // The quarantine starts again with the mirror: what held records owed is part of the gap
      // (or there was none), and a record that cannot be shaped now is held owing nothing (no
      // event fires for existing rows). A table that does not fit is not read: it is marked
      // broken and re-read once it fits (resync.ts); the views that read it are kept meanwhile.
      const broken = yield* onApp((app) => contractNow(app, publication))
      yield* query((tx) => tx`truncate service.capture_quarantine, service.capture_contract, service.capture_resync`)
      for (const [tbl, problems] of broken) {
        yield* query(
          (tx) => tx`
          insert into service.capture_contract (tbl, problems, lsn)
          values (${tbl}, ${problems as string[]}, ${formatLsn(exported.consistentPoint)}::pg_lsn)`
        )
        yield* query((tx) => tx`insert into service.capture_resync (tbl) values (${tbl})`)
      }
      const skip = new Set(RESOURCES.filter((r) => tablesRead(r).some((t) => broken.has(t))))
      const rows = yield* onApp((app, tx) => loadMirror(app, tx, new Set(broken.keys())))
      const lsn = formatLsn(exported.consistentPoint)
      const kept = RESOURCES.filter((r) => !skip.has(r))
      // Records deleted while the slot was lost: their stored events keep only their identifiers.
      // Before the views are projected, while every row is stored: a view then left to stand for
      // its row (projection/by-view.ts) would look like one of these.
      yield* onTransaction(async (tx) => {
        const removed = await removeOrphanViews(
          tx,
          kept,
          kept.map((r) => RESOURCE_INFO[r].table),
          null
        )
        await scrubDeletedRecords(
          tx,
          removed.flatMap((r) => (isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []))
        )
      })
      const views = yield* onTransaction((tx) =>
        projectAll(
          tx,
          undefined,
          null,
          {
            skip,
            keepHeld: false,
            found: async (unshaped) => {
              await tx`
              insert into service.capture_quarantine (lsn, tbl, key, company_id, error, before)
              select ${lsn}::pg_lsn, tbl, key, company_id, error, before
              from json_to_recordset(${JSON.stringify(
                unshaped.map((u) => ({
                  tbl: u.table,
                  key: u.ref.id,
                  company_id: u.companyId,
                  error: u.error,
                  before: u.row === null ? null : JSON.stringify(u.row)
                }))
              )}::text::json) as x(tbl text, key text, company_id uuid, error text, before text)`
            }
          },
          { keep: true }
        )
      )
      yield* onTransaction(projectTenancy)
      yield* markProjectionVersion()
      yield* query(
        (tx) => tx`
        insert into service.capture_state (slot_name, checkpoint_lsn, bootstrapped_at, gap_at, gap_reason)
        values (${slot}, ${formatLsn(exported.consistentPoint)}::pg_lsn, now(),
                ${gapReason === null ? null : new Date()}, ${gapReason})
        on conflict (slot_name) do update set checkpoint_lsn = excluded.checkpoint_lsn,
          bootstrapped_at = excluded.bootstrapped_at, last_commit_at = null, applied_at = null,
          gap_at = coalesce(excluded.gap_at, service.capture_state.gap_at),
          gap_reason = coalesce(excluded.gap_reason, service.capture_state.gap_reason)`
      )
      return { consistentPoint: exported.consistentPoint, rows, views }
    })
  ).pipe(Effect.ensuring(Effect.promise(release)))
  return result
})
