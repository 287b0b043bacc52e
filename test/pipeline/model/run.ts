// Runs one model history against the real pipeline: fresh databases (the app's and the
// service's, one database or two as the history's layout says), the app's transactions,
// capture as a child process under faults, and at the end the oracle's verdict. Statements on
// the app's tables, the oracle's log, the slot and the publication go to `db.app`; those on
// the service's tables to `db.service`.
import { randomBytes } from "node:crypto"
import type postgres from "postgres"
import { bootstrap } from "../../../src/pipeline/capture/bootstrap.ts"
import { createPublicationStatement } from "../../../src/pipeline/capture/publication.ts"
import { QUARANTINE_PREFIX } from "../../../src/pipeline/capture/quarantine/markers.ts"
import { rebuildViews } from "../../../src/pipeline/capture/rebuild.ts"
import { parseLsn } from "../../../src/platform/db/lsn.ts"
import { runSql } from "../../support/sql.ts"
import { sleep } from "../../support/wait.ts"
import { App } from "./app.ts"
import { differences, readActual } from "./compare.ts"
import { Follower } from "./follower.ts"
import { type Control, type LogEntry, Oracle } from "./oracle.ts"
import type { AppOp, History, Step } from "./steps.ts"
import { CaptureProcess, type ModelWorld } from "./world.ts"

const PUBLICATION = "safety_records_service"

export interface Verdict {
  readonly ok: boolean
  readonly problems: ReadonlyArray<string>
  /** Capture's last log lines, for a failure's report. */
  readonly logs: ReadonlyArray<string>
  readonly stats: {
    readonly events: number
    readonly views: number
    readonly kills: number
    /**
     * Crashes of the service's database alone (split layout); those after which its checkpoint
     * was seen to go back; those that took record changes the follower had read.
     */
    readonly serviceCrashes: number
    readonly lostCheckpoints: number
    readonly lostRead: number
    readonly ms: number
  }
}

/** Capture did not apply what was committed in time: stuck (the verdict says so). */
class Stuck extends Error {}

export const runHistory = async (world: ModelWorld, h: History, timeoutMs = 30_000): Promise<Verdict> => {
  const t0 = Date.now()
  const name = `m_${randomBytes(5).toString("hex")}`
  const layout = h.config.layout ?? "one"
  const db = await world.databases(name, layout)
  const appSql = db.app.sql
  const serviceSql = db.service.sql
  const slot = `slot_${name}`
  const cap = new CaptureProcess(db, slot, h.config)
  const app = new App(appSql)
  const follower = new Follower(serviceSql)
  const controls: Control[] = []
  let pendingKill: ReturnType<typeof setTimeout> | null = null
  let serviceCrashes = 0
  let lostCheckpoints = 0
  let lostRead = 0
  const seqNow = async () =>
    (await appSql<{ s: number }[]>`select coalesce(max(seq), 0)::int as s from oracle.log`)[0]!.s
  const control = async (c: Record<string, unknown> & { kind: string }) =>
    controls.push({ ...c, at: await seqNow() } as Control)

  // A wait for capture is over after `timeoutMs` of its process running: counted again from
  // each start within it (a start of a process under load takes seconds of its own), and
  // never longer than five times `timeoutMs` in all (a capture failing at once each start).
  const patience = () => {
    const since = Date.now()
    const starts = cap.starts
    return {
      over: () => Date.now() > Math.min(since + 5 * timeoutMs, Math.max(since, cap.startedAt) + timeoutMs),
      said: () => `${Date.now() - since} ms, capture started ${cap.starts - starts} times meanwhile`
    }
  }

  const restartCapture = async () => {
    await cap.kill()
    cap.start()
  }
  const cancelKill = () => {
    if (pendingKill !== null) clearTimeout(pendingKill)
    pendingKill = null
  }
  const killLater = (ms: number) => {
    cancelKill()
    pendingKill = setTimeout(() => {
      pendingKill = null
      void restartCapture()
    }, ms)
  }

  /**
   * Until capture has applied everything committed before the call (restarting it if it is
   * down), and the app rows it asked to read again (but those of a table that does not fit, or
   * is being read again: they wait for it).
   */
  const settle = async (what = "capture to catch up") => {
    const [m] = await appSql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'model-sync', '')::text as lsn`
    const target = parseLsn(m!.lsn)
    const wait = patience()
    for (;;) {
      if (!cap.running && pendingKill === null) cap.start()
      const [s] = await serviceSql<{ lsn: string | null; boot: boolean; asked: boolean }[]>`
        select checkpoint_lsn::text as lsn, bootstrapped_at is not null as boot,
          exists (select 1 from service.capture_rereads r
                  where not exists (select 1 from service.capture_contract c where c.tbl = r.tbl)
                    and not exists (select 1 from service.capture_resync x where x.tbl = r.tbl)) as asked
        from service.capture_state where slot_name = ${slot}`
      if (s?.boot && s.lsn !== null && parseLsn(s.lsn) >= target && !s.asked) return
      if (wait.over()) throw new Stuck(`capture stuck: waited ${wait.said()} for ${what}`)
      await sleep(20)
    }
  }

  /** Until capture has re-read the tables renamed back, and released what they held. */
  const healed = async (tables: ReadonlyArray<string>) => {
    // A contract look that read the catalog before the rename back writes its message within its interval.
    await sleep(400)
    const wait = patience()
    for (;;) {
      await settle(`capture to re-read ${tables.join(", ")}`)
      const [r] = await serviceSql<{ busy: boolean }[]>`
        select exists (select 1 from service.capture_contract where tbl = any(${tables as string[]}))
            or exists (select 1 from service.capture_resync where tbl = any(${tables as string[]}))
            or exists (select 1 from service.capture_quarantine where blocked_by = any(${tables as string[]})) as busy`
      if (!r!.busy) return
      if (wait.over())
        throw new Stuck(`capture stuck: ${tables.join(", ")} renamed back, but not re-read within ${wait.said()}`)
      await sleep(50)
    }
  }

  const bootstrapped = async (since: Date) => {
    const wait = patience()
    for (;;) {
      const [s] = await serviceSql<{ ok: boolean }[]>`
        select bootstrapped_at > ${since} as ok from service.capture_state where slot_name = ${slot}`
      if (s?.ok) return settle("capture's bootstrap")
      if (!cap.running) cap.start()
      if (wait.over()) throw new Stuck(`capture stuck: no bootstrap within ${wait.said()}`)
      await sleep(20)
    }
  }

  const dropSlot = async () => {
    for (let i = 0; ; i++) {
      const [s] = await appSql<{ active: boolean }[]>`select active from pg_replication_slots where slot_name = ${slot}`
      if (s === undefined) return
      if (!s.active) {
        await appSql`select pg_drop_replication_slot(${slot})`
        return
      }
      await appSql`select pg_terminate_backend(active_pid) from pg_replication_slots where slot_name = ${slot}`
      if (i > 200) throw new Error("the slot stayed active")
      await sleep(20)
    }
  }

  /** A gap: capture stopped with everything applied; the app writes; then `then` (the slot dropped, or a fresh snapshot). */
  const gap = async (writes: ReadonlyArray<ReadonlyArray<AppOp>>) => {
    cancelKill()
    await settle()
    await cap.kill()
    await control({ kind: "gap" })
    for (const ops of writes) await app.transaction(ops)
  }

  /** The app's PostgreSQL crashed (with one database, the service's too), maybe while the app writes. */
  const appCrash = async (s: Extract<Step, { t: "pg-crash" | "service-crash" }>) => {
    // Capture's last batch may be committed but not yet written: the crash takes it, with
    // what the follower has read of it, and capture replays it from the slot.
    await settle("capture to catch up before a crash")
    await follower.read()
    const writes = s.writes ?? []
    let cut = false
    const writing = (async () => {
      for (const ops of writes) {
        if (cut) return
        try {
          await app.transaction(ops)
          // A page of what capture wrote meanwhile: the follower may stop inside a batch
          // the crash then takes, and must find the rest after its offset once replayed.
          if (s.page !== undefined) await follower.read(s.page)
        } catch {
          return // cut by the crash: committed or not, the oracle's log tells
        }
      }
    })()
    if ((s.afterMs ?? 0) > 0) await sleep(s.afterMs!)
    cut = true
    await db.appServer.crash()
    await writing
    if (writes.length > 0) await app.reconcile()
  }

  const checkpointNow = async () => {
    const [c] = await serviceSql<{ lsn: string | null }[]>`
      select checkpoint_lsn::text as lsn from service.capture_state where slot_name = ${slot}`
    return c?.lsn == null ? 0n : parseLsn(c.lsn)
  }
  const lastChangeNow = async () => {
    const [c] = await serviceSql<
      { lsn: string | null }[]
    >`select max(commit_lsn)::text as lsn from service.record_changes`
    return c?.lsn == null ? 0n : parseLsn(c.lsn)
  }

  /**
   * The service's PostgreSQL crashed alone: nothing of the app's flushes capture's asynchronous
   * batches there, so every batch since its WAL writer last ran may be lost, and capture writes
   * them again from the slot in its own cuts, while the app goes on and the follower reads pages.
   */
  const serviceCrash = async (s: Extract<Step, { t: "service-crash" }>) => {
    await settle("capture to catch up before a crash of the service's database")
    await follower.read()
    const writes = s.writes ?? []
    const writing = (async () => {
      for (const ops of writes) {
        await app.transaction(ops)
        // A failed page (the service's database down) is a request that got no answer.
        if (s.page !== undefined) await follower.read(s.page).catch(() => {})
      }
    })()
    if ((s.afterMs ?? 0) > 0) await sleep(s.afterMs!)
    // Read just before and just after: a lower bound on what the crash took, for the report.
    const before = await checkpointNow()
    await db.serviceServer.crash()
    serviceCrashes++
    const after = await checkpointNow().catch(() => before)
    if (after < before) lostCheckpoints++
    if (follower.offsetLsn > (await lastChangeNow().catch(() => follower.offsetLsn))) lostRead++
    await writing
    // Pages while capture writes the lost batches again, maybe cut otherwise: the follower's
    // offset may be inside one it read before the crash.
    if (s.page !== undefined)
      for (let i = 0; i < writes.length; i++) {
        await sleep(50)
        await follower.read(s.page).catch(() => {})
      }
  }

  const step = async (s: Step) => {
    switch (s.t) {
      case "txn":
        return app.transaction(s.ops)
      case "large":
        return app.transaction(s.ops, h.config.largeTransaction + 1 + s.pad)
      case "rename": {
        const r = await app.rename(s.which)
        if (r !== null) await control({ kind: "rename", table: r[0], column: r[1] })
        return
      }
      case "unrename": {
        const tables = await app.unrename()
        if (tables.length === 0) return
        const from = Date.now()
        const at = await seqNow()
        if (s.killAfterMs !== null) killLater(s.killAfterMs)
        await healed(tables)
        controls.push({ kind: "heal", tables, from, to: Date.now(), at })
        return
      }
      case "kill":
        if (s.afterMs < 50) return restartCapture()
        return killLater(s.afterMs)
      case "pg-restart":
        await db.appServer.restart()
        return
      case "pg-crash":
        return appCrash(s)
      case "service-crash":
        // One database: the service's crash is the app's too.
        if (layout === "one") return appCrash(s)
        return serviceCrash(s)
      case "slot-drop": {
        await gap(s.gap)
        await dropSlot()
        const since = (await serviceSql<{ now: Date }[]>`select now()`)[0]!.now
        await control({ kind: "bootstrap" })
        cap.start()
        return bootstrapped(since)
      }
      case "fresh": {
        await gap(s.gap)
        await dropSlot()
        await control({ kind: "bootstrap" })
        await runSql(
          serviceSql,
          bootstrap(db.app.url, slot, "model: rebuild-views --fresh-snapshot", false, PUBLICATION),
          db.appPool
        )
        cap.start()
        return settle("capture after a fresh snapshot")
      }
      case "rebuild":
        await runSql(serviceSql, rebuildViews(), db.appPool)
        await control({ kind: "rebuild" })
        return
      case "retry": {
        const [q] = await serviceSql<
          { id: string | null }[]
        >`select max(id)::text as id from service.capture_quarantine`
        if (q?.id == null) return
        await appSql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "retry", all: true, upTo: q.id })})`
        return
      }
      case "discard": {
        await settle()
        const held = await serviceSql<
          { tbl: string; key: string }[]
        >`select tbl, key from service.capture_quarantine order by id`
        if (held.length === 0) return
        const { tbl, key } = held[s.n % held.length]!
        await appSql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "discard", records: [[tbl, key]] })})`
        await control({ kind: "discard", table: tbl, key })
        return
      }
      case "settle":
        await settle()
        await control({ kind: "settled" })
        return
    }
  }

  let problems: string[] = []
  let counts = { events: 0, views: 0 }
  try {
    if (h.config.publication === "dba") await appSql.unsafe(createPublicationStatement(PUBLICATION))
    for (const s of h.before) if (s.t === "txn" || s.t === "rename") await step(s)
    await control({ kind: "bootstrap" })
    cap.start()
    await bootstrapped(new Date(0))
    await follower.read()
    for (const s of h.steps) {
      await step(s)
      await follower.read()
    }
    cancelKill()
    if (!cap.running) cap.start()
    await settle("capture to catch up at the end")
    await control({ kind: "settled" })
    await cap.kill()
    const expected = await expectation(appSql, controls)
    const actual = await readActual(serviceSql, expected.forbidden)
    counts = { events: actual.events.length, views: actual.views.size }
    problems = [...differences(expected, actual), ...(await follower.misses())]
  } catch (e) {
    if (!(e instanceof Stuck)) throw e
    problems = [e.message, ...(await whereStuck(db.app.sql, db.service.sql, slot, cap))]
  } finally {
    cancelKill()
    await cap.kill()
    // MODEL_KEEP=1 keeps a failed history's databases, to look into (their names are in the report).
    if (process.env.MODEL_KEEP === "1" && problems.length > 0) {
      await appSql.end({ timeout: 2 }).catch(() => {})
      await serviceSql.end({ timeout: 2 }).catch(() => {})
      problems.push(
        layout === "one"
          ? `database kept: ${db.app.url}`
          : `databases kept: ${db.app.url} (app), ${db.service.url} (service)`
      )
    } else await world.drop(db)
  }
  return {
    ok: problems.length === 0,
    problems,
    logs: cap.lines.slice(-60),
    stats: { ...counts, kills: cap.kills, serviceCrashes, lostCheckpoints, lostRead, ms: Date.now() - t0 }
  }
}

/**
 * What a stuck history's report adds, to look into without its databases: whether capture's
 * process runs, what each database's sessions are doing, the slot, and capture's state. Each
 * read is bounded: a database that does not answer is itself the finding.
 */
const whereStuck = async (
  app: postgres.Sql,
  service: postgres.Sql,
  slot: string,
  cap: CaptureProcess
): Promise<Array<string>> => {
  const bounded = async (what: string, read: () => Promise<unknown>) => {
    try {
      const r = await Promise.race([
        read(),
        sleep(5000).then(() => {
          throw new Error("no answer within 5 s")
        })
      ])
      return `stuck: ${what}: ${JSON.stringify(r)}`
    } catch (e) {
      return `stuck: ${what}: ${e instanceof Error ? e.message : String(e)}`
    }
  }
  const sessions = (sql: postgres.Sql) => () =>
    sql`select pid, application_name as app, state, wait_event_type as wt, wait_event as w,
               left(regexp_replace(query, '\s+', ' ', 'g'), 100) as q,
               round(extract(epoch from now() - state_change))::int as secs
          from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()`
  return [
    `stuck: capture process running ${cap.running}, ${cap.starts} starts, ${cap.kills} kills`,
    await bounded("the app's sessions", sessions(app)),
    await bounded(
      "the slot",
      () => app`select active, active_pid, confirmed_flush_lsn::text, pg_current_wal_lsn()::text as wal
                  from pg_replication_slots where slot_name = ${slot}`
    ),
    await bounded("the service's sessions", sessions(service)),
    await bounded(
      "capture's state",
      () => service`select checkpoint_lsn::text, bootstrapped_at, open_windows is not null as windows,
                      (select count(*)::int from service.capture_rereads) as asks,
                      (select count(*)::int from service.capture_resync) as resync,
                      (select count(*)::int from service.capture_contract) as broken
                      from service.capture_state where slot_name = ${slot}`
    )
  ]
}

/** The oracle's verdict from the database's log of the app's changes. */
const expectation = async (sql: postgres.Sql, controls: ReadonlyArray<Control>) => {
  const log = await sql<LogEntry[]>`select seq::int, xid::text, tbl, op, old, new from oracle.log order by seq`
  const commits = await sql<{ xid: string; ms: number }[]>`
    select xid::text, floor(extract(epoch from pg_xact_commit_timestamp(xid(xid))) * 1000)::float8 as ms
    from (select distinct xid from oracle.log) x`
  return new Oracle(log, controls, new Map(commits.map((c) => [c.xid, c.ms]))).run()
}
