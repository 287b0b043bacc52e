// rebuild-views: re-projects every view (and the tenancy tables the API reads) from the
// mirror while the service runs. The mirror (service.rows) is the app tables' published
// columns as of capture's checkpoint, so a view built from it is exactly what capture would
// have written; reading the app tables directly would run ahead of the stream.
//
// One transaction, for two reasons:
// - readers never see a half-rebuilt set (old and new shapes mixed on one page): until the
//   commit they read the previous views, then all the new ones at once (MVCC);
// - it takes the mirror in SHARE mode first. That waits for a capture batch in progress to
//   commit, and holds the next one at its first mirror write until the rebuild commits, so
//   no batch can write a view from a newer mirror state that the rebuild then overwrites
//   with an older one. Capture resumes where it stopped: its changes wait in the slot.
// The cost: capture (and so events and webhooks) pauses for the rebuild's duration.
import { Effect } from "effect"
import { AppSql, query, transaction } from "../../platform/db/Sql.ts"
import { onTransaction, projectTenancy } from "./bootstrap.ts"
import { isResource, RESOURCE_INFO, RESOURCES } from "../../domain/resources.ts"
import { scrubDeletedRecords } from "../outbox/deleted.ts"
import { markProjectionVersion } from "../projection/version.ts"
import { beginEpoch, keepsMirror, removeOrphanViews } from "../projection/write.ts"
import { viewBackedTable } from "../projection/by-view.ts"
import { QUARANTINE_PREFIX } from "./quarantine/markers.ts"
import { BatchHolds } from "./quarantine/holds.ts"
import { CaptureQuarantine } from "./quarantine/state.ts"
import { tablesRead } from "../projection/project.ts"
import { parseLsn } from "../../platform/db/lsn.ts"
import { settleAll } from "./step/all.ts"

export type RebuildPhase = "waiting" | "views" | "tenancy" | "cleanup" | "committing"

export interface RebuildProgress {
  readonly phase: RebuildPhase
  readonly done: number
  readonly total: number
}

export interface RebuildResult {
  /** Records re-projected. */
  readonly views: number
  /** Views whose stored JSON differed and was rewritten. */
  readonly changed: number
  /** Views of records no longer in the mirror, deleted. */
  readonly removed: number
  /** Records that could not be shaped (their views kept), and records held in quarantine left alone:
   *  capture shapes both again at this point of its stream, holding those that still fail. */
  readonly unshaped: number
  readonly held: number
  readonly companies: number
  /** The checkpoint the rebuilt views correspond to. */
  readonly checkpoint: string | null
  /** How long capture had to wait for the mirror lock, at most (the whole transaction). */
  readonly pausedCaptureMs: number
  readonly ms: number
}

export const rebuildViews = Effect.fn("rebuildViews")(function* (onProgress: (p: RebuildProgress) => void = () => {}) {
  const started = Date.now()
  onProgress({ phase: "waiting", done: 0, total: 0 })
  let locked = 0
  // The requests below go into the app's WAL, where capture meets them: with one database in
  // this transaction; with the service's own, at once on the app's (a request met before this
  // commits only shapes records this rebuild leaves alone, from the mirror it does not change).
  const { pool: app } = yield* AppSql
  const result = yield* transaction(
    Effect.gen(function* () {
      // The views written below and the mirror rows they stand for move together (step/all.ts,
      // settleAll); capture's batches wait meanwhile (taken first, as capture takes it first).
      yield* query(keepsMirror)
      yield* query((tx) => tx`lock table service.rows in share mode`)
      locked = Date.now()
      const tables = RESOURCES.map((r) => RESOURCE_INFO[r].table)
      const [counts] = yield* query(
        (tx) => tx<{ total: number; checkpoint: string | null; committed: Date | null }[]>`
        select (select count(*)::int from service.rows where tbl = any(${tables}))
             + (select count(*)::int from service.views v where service.view_backed_table(v.resource) is not null
                   and not exists (select 1 from service.rows r where r.tbl = service.view_backed_table(v.resource)
                                   and r.key = v.id::text)) as total,
          (select checkpoint_lsn::text from service.capture_state order by slot_name limit 1) as checkpoint,
          (select last_commit_at from service.capture_state order by slot_name limit 1) as committed`
      )
      // The mirror is the app as of the checkpoint's commit: what changed here changed then
      // (not now, which would run ahead of the changes capture applies next if it lags).
      const mirrorAt = counts!.committed
      const total = counts!.total
      onProgress({ phase: "views", done: 0, total })
      // A record that cannot be shaped keeps its view; a held one is left alone (its last good
      // view stays); so are the records of a table that does not fit, or is being read again.
      // Capture meets a request for the first two in its stream, where it shapes them again (a
      // held one that shapes now fires the events it owes) and holds those that still fail.
      const q = yield* onTransaction((tx) => CaptureQuarantine.load(tx))
      const blocking = new Set([...q.broken.keys(), ...q.resyncing])
      const settled = yield* onTransaction((tx) =>
        settleAll(tx, new BatchHolds(q), {
          point: { endLsn: parseLsn(counts!.checkpoint ?? "0/0"), commitTime: mirrorAt ?? new Date() },
          time: { mirror: mirrorAt },
          skip: new Set(RESOURCES.filter((r) => tablesRead(r).some((t) => blocking.has(t)))),
          keepHeld: true,
          viewsToo: true,
          onProgress: (done) => onProgress({ phase: "views", done, total })
        })
      )
      const views = settled.records
      const goneFound = settled.gone
      const held = settled.held.length
      const unshaped = settled.unshaped.length
      const check = [...settled.unshaped, ...settled.held]
      for (let i = 0; i < check.length; i += 1000) {
        const records = check.slice(i, i + 1000).map((r) => [RESOURCE_INFO[r.resource].table, r.id] as const)
        const message = JSON.stringify({ op: "check", records })
        yield* onTransaction(async (tx) => {
          if (app === undefined) await tx`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${message})`
          else await app`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${message})`
        })
      }
      onProgress({ phase: "tenancy", done: views, total })
      yield* onTransaction(projectTenancy)
      yield* markProjectionVersion()
      onProgress({ phase: "cleanup", done: views, total })
      // Views whose record left the mirror (e.g. written by an older version that missed a delete).
      // Records no longer there: their stored events keep only their identifiers, as capture does.
      const removed = yield* onTransaction(async (tx) => {
        // A view-backed record's view without a stored row is the mirror's row (projection/by-view.ts).
        const checked = RESOURCES.filter((r) => viewBackedTable(r) === undefined)
        const gone = await removeOrphanViews(
          tx,
          checked,
          checked.map((r) => RESOURCE_INFO[r].table),
          mirrorAt
        )
        await scrubDeletedRecords(
          tx,
          gone.flatMap((r) => (isResource(r.resource) ? [{ resource: r.resource, id: r.id }] : []))
        )
        return gone.length + goneFound
      })
      yield* query(
        (tx) =>
          tx`delete from service.companies c where not exists (select 1 from service.rows r where r.tbl = 'companies' and r.key = c.id::text)`
      )
      yield* query(
        (tx) =>
          tx`delete from service.users u where not exists (select 1 from service.rows r where r.tbl = 'users' and r.key = u.id::text)`
      )
      // Rows this transaction wrote carry its id as xmin: those are the views that differed.
      const [changed] = yield* query(
        (tx) => tx<{ n: number; companies: number }[]>`
        select (select count(*)::int from service.views where xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text) as n,
          (select count(*)::int from service.companies) as companies`
      )
      // Views rewritten here are not numbered one by one: followers of the changes copy again.
      if (changed!.n > 0 || removed > 0)
        yield* onTransaction((tx) =>
          beginEpoch(
            tx,
            parseLsn(counts!.checkpoint ?? "0/0"),
            `rebuild-views rewrote ${changed!.n} views and removed ${removed}`
          )
        )
      onProgress({ phase: "committing", done: views, total })
      return {
        views,
        changed: changed!.n,
        removed,
        unshaped,
        held,
        companies: changed!.companies,
        checkpoint: counts!.checkpoint
      }
    })
  )
  const ended = Date.now()
  const rebuilt: RebuildResult = { ...result, pausedCaptureMs: ended - (locked || ended), ms: ended - started }
  return rebuilt
})
