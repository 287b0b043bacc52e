// Builds the mirror and every view from the app tables as of the slot's exported snapshot,
// in one transaction that also stores the checkpoint (the slot's consistent point). The
// stream then resumes exactly after it: nothing committed meanwhile is lost or applied twice,
// and no event fires for rows that already existed.
import type { Transaction as Tx } from "../../platform/db/Database.ts"
import { Effect } from "effect"
import { inTransaction, query, transaction } from "../../platform/db/Sql.ts"
import { markProjectionVersion } from "../projection/version.ts"
import { PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { RESOURCES, RESOURCE_INFO } from "../../domain/resources.ts"
import { reprojectViews } from "./apply.ts"
import { Store, type MirrorRow } from "../projection/store.ts"
import { APP_TABLES, rowCompany, rowKey, rowParent } from "../projection/tables.ts"
import { removeOrphanViews, writeCompanies, writeMirror, writeUsers } from "../projection/write.ts"
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

const timestampColumns = async (tx: Tx) => {
  const rows = await tx<{ table_name: string; column_name: string }[]>`
    select table_name, column_name from information_schema.columns
    where table_schema = 'app' and data_type = 'timestamp with time zone'`
  return groupSets(
    rows,
    (r) => r.table_name,
    (r) => r.column_name
  )
}

/** Copies the published columns of every app row into the mirror, as the stream would.
 *  Pages by primary key (no cursor: the same transaction writes between pages). */
const loadMirror = async (tx: Tx) => {
  const ts = await timestampColumns(tx)
  let total = 0
  for (const table of APP_TABLES) {
    const cols = PUBLISHED_COLUMNS[table]!
    const tsCols = ts.get(table) ?? new Set<string>()
    const keyCols = table === "company_modules" ? ["company_id", "module"] : ["id"]
    const select = `select json_build_object(${cols.map((c) => `'${c}', ${c}`).join(", ")}) as row,
      ${keyCols.map((c, i) => `${c}::text as k${i}`).join(", ")} from app.${table}`
    const order = `order by ${keyCols.join(", ")} limit ${CHUNK}`
    let after: string[] | null = null
    for (;;) {
      const rows: Array<{ row: Record<string, unknown>; k0: string; k1?: string }> = after
        ? await tx.unsafe(
            `${select} where (${keyCols.join(", ")}) > (${keyCols.map((c, i) => `$${i + 1}::${c === "module" ? "text" : "uuid"}`).join(", ")}) ${order}`,
            after
          )
        : await tx.unsafe(`${select} ${order}`)
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

/** Keys of one mirror table, page by page (keyset on the primary key). */
async function* mirrorKeys(tx: Tx, tbl: string, page: number) {
  let after = ""
  for (;;) {
    const rows = await tx<Array<{ key: string }>>`
      select key from service.rows where tbl = ${tbl} and key > ${after} order by key limit ${page}`
    if (rows.length === 0) return
    yield rows.map((r) => r.key)
    after = rows[rows.length - 1]!.key
    if (rows.length < page) return
  }
}

/**
 * Re-projects every view (and the tenancy tables) from the mirror, in chunks. `mirrorAt`: the
 * time of the mirror's state, when a view changed (null: now).
 */
export const projectAll = async (tx: Tx, onProgress?: (done: number) => void, mirrorAt: Date | null = null) => {
  let done = 0
  for (const resource of RESOURCES) {
    const tbl = RESOURCE_INFO[resource].table
    for await (const keys of mirrorKeys(tx, tbl, CHUNK / 2)) {
      await reprojectViews(
        tx,
        keys.map((id) => ({ resource, id })),
        { mirror: mirrorAt }
      )
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
  failover = false
) {
  yield* dropSlot(slot)
  const exported = yield* Effect.promise(() => createSlotWithSnapshot(url, slot, failover))
  const result: BootstrapResult = yield* transaction(
    Effect.gen(function* () {
      // Both before the transaction's first query: the snapshot needs repeatable read.
      yield* query((tx) => tx`set transaction isolation level repeatable read`)
      yield* query((tx) => tx.unsafe(`set transaction snapshot '${exported.snapshot.replace(/'/g, "")}'`))
      // Views are rewritten in place, not truncated: a view that did not change keeps its
      // change time, and one whose record went while the slot was lost gets a tombstone.
      yield* query((tx) => tx`truncate service.rows, service.companies, service.users`)
      const rows = yield* onTransaction(loadMirror)
      const views = yield* onTransaction((tx) => projectAll(tx))
      yield* onTransaction((tx) =>
        removeOrphanViews(
          tx,
          RESOURCES,
          RESOURCES.map((r) => RESOURCE_INFO[r].table),
          null
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
  ).pipe(Effect.ensuring(Effect.promise(() => exported.release().catch(() => {}))))
  return result
})
