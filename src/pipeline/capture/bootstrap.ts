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
import { redactPrivacyRow } from "../../domain/records/incidents.ts"
import { RESOURCES, RESOURCE_INFO } from "../../domain/resources.ts"
import { isResource } from "../../domain/resources.ts"
import { catalogProblems, readCatalog } from "./quarantine/contract.ts"
import { BatchHolds } from "./quarantine/holds.ts"
import { CaptureQuarantine } from "./quarantine/state.ts"
import { quarantineWrites } from "./quarantine/writes.ts"
import { tablesRead } from "../projection/project.ts"
import { scrubDeletedRecords } from "../outbox/deleted.ts"
import { Store, type MirrorRow } from "../projection/store.ts"
import { APP_TABLES, rowCompany, rowKey, rowParent } from "../projection/tables.ts"
import {
  beginEpoch,
  keepsMirror,
  removeOrphanViews,
  writeCompanies,
  writeMirror,
  writeUsers
} from "../projection/write.ts"
import { groupSets } from "../../platform/sets.ts"
import { formatLsn, type Lsn } from "../../platform/db/lsn.ts"
import { createSlotWithSnapshot, dropSlot } from "./slot.ts"
import { toIsoUtcOrNull } from "../../domain/time.ts"
import { mirrorKeys, settleAll } from "./step/all.ts"

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

/**
 * Copies the published columns of every app row (read on `app`, at the snapshot) into the
 * mirror (written on `tx`), as the stream would: a privacy case without the person's details.
 * Of a table that does not fit (`readable`), the columns that are there: its rows are there
 * when capture starts, and what it could not read counts as unchanged once it can (the table
 * is read again then: resync.ts). Pages by primary key (no cursor: with one database the same
 * transaction writes between pages).
 */
const loadMirror = async (app: Handle, tx: Tx, readable: ReadonlyMap<string, ReadonlyArray<string>>) => {
  const ts = await timestampColumns(app)
  let total = 0
  for (const table of APP_TABLES) {
    const cols = readable.get(table) ?? PUBLISHED_COLUMNS[table]!
    const tsCols = ts.get(table) ?? new Set<string>()
    const keyCols = table === "company_modules" ? ["company_id", "module"] : ["id"]
    if (!keyCols.every((k) => cols.includes(k))) continue
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
        const data = table === "incidents" ? redactPrivacyRow(row) : row
        return {
          tbl: table,
          key: rowKey(table, data),
          companyId: rowCompany(table, data),
          parentId: rowParent(table, data),
          data
        }
      })
      await writeMirror(tx, upserts, [])
      total += rows.length
      if (rows.length < CHUNK) break
    }
  }
  return total
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
      // Every row is stored again below, and the views written here decide which stay stored
      // (settleAll): a view removed or rewritten keeps no copy of its old body in the mirror
      // (sql/032), which for an orphan's would bring its record back. Said before the truncate's
      // lock, as every writer of the mirror says it first.
      yield* query(keepsMirror)
      // Views are rewritten in place, not truncated: a view that did not change keeps its
      // change time, and one whose record went while the slot was lost gets a tombstone.
      yield* query((tx) => tx`truncate service.rows, service.companies, service.users`)
      // The quarantine starts again with the mirror: what held records owed is part of the gap
      // (or there was none), and a record that cannot be shaped now is held owing nothing (no
      // event fires for existing rows). A table that does not fit is read as far as it can be,
      // marked broken, and read again once it fits (resync.ts); the views that read it are kept
      // meanwhile.
      const catalog = yield* onApp((app) => readCatalog(app, publication))
      const broken = new Map<string, ReadonlyArray<string>>()
      const readable = new Map<string, ReadonlyArray<string>>()
      for (const [tbl, t] of catalog) {
        const problems = catalogProblems(tbl, publication, t)
        if (problems.length === 0) continue
        broken.set(tbl, problems)
        const there = new Set((t.columns ?? []).map((c) => c.name))
        readable.set(
          tbl,
          PUBLISHED_COLUMNS[tbl]!.filter((c) => there.has(c))
        )
      }
      yield* query(
        (tx) =>
          tx`truncate service.capture_quarantine, service.capture_contract, service.capture_resync, service.capture_retries, service.capture_rereads`
      )
      for (const [tbl, problems] of broken) {
        yield* query(
          (tx) => tx`
          insert into service.capture_contract (tbl, problems, lsn)
          values (${tbl}, ${problems as string[]}, ${formatLsn(exported.consistentPoint)}::pg_lsn)`
        )
        yield* query((tx) => tx`insert into service.capture_resync (tbl) values (${tbl})`)
      }
      const rows = yield* onApp((app, tx) => loadMirror(app, tx, readable))
      // Records deleted while the slot was lost: their views go, their stored events keep only
      // their identifiers. Before the views are projected, while every row is stored: a view then
      // left to stand for its row (projection/by-view.ts) would look like one of these. A table
      // whose rows could not be read at all (missing, or its key) cannot tell.
      const unread = new Set(
        [...readable]
          .filter(([tbl, cols]) => !cols.includes(tbl === "company_modules" ? "module" : "id"))
          .map(([t]) => t)
      )
      const checked = RESOURCES.filter((r) => !unread.has(RESOURCE_INFO[r].table))
      yield* onTransaction(async (tx) => {
        const removed = await removeOrphanViews(
          tx,
          checked,
          checked.map((r) => RESOURCE_INFO[r].table),
          null
        )
        await scrubDeletedRecords(
          tx,
          removed.flatMap((r) => (isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []))
        )
      })
      const holds = new BatchHolds(new CaptureQuarantine())
      const settled = yield* onTransaction((tx) =>
        settleAll(tx, holds, {
          point: { endLsn: exported.consistentPoint, commitTime: new Date() },
          time: { mirror: null },
          skip: new Set(RESOURCES.filter((r) => tablesRead(r).some((t) => broken.has(t)))),
          keepHeld: false,
          viewsToo: false
        })
      )
      yield* onTransaction((tx) => beginEpoch(tx, exported.consistentPoint, gapReason ?? "the service's first start"))
      const held = quarantineWrites(holds.finish(exported.consistentPoint))
      if (held !== null) yield* onTransaction(held)
      const views = settled.records
      yield* onTransaction(projectTenancy)
      yield* markProjectionVersion()
      yield* query(
        (tx) => tx`
        insert into service.capture_state (slot_name, checkpoint_lsn, bootstrapped_at, gap_at, gap_reason)
        values (${slot}, ${formatLsn(exported.consistentPoint)}::pg_lsn, now(),
                ${gapReason === null ? null : new Date()}, ${gapReason})
        on conflict (slot_name) do update set checkpoint_lsn = excluded.checkpoint_lsn,
          bootstrapped_at = excluded.bootstrapped_at, last_commit_at = null, applied_at = null, open_windows = null,
          gap_at = coalesce(excluded.gap_at, service.capture_state.gap_at),
          gap_reason = coalesce(excluded.gap_reason, service.capture_state.gap_reason)`
      )
      return { consistentPoint: exported.consistentPoint, rows, views }
    })
  ).pipe(Effect.ensuring(Effect.promise(release)))
  return result
})
