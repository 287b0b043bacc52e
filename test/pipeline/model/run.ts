// Runs one model history against the real pipeline: a fresh database, the app's transactions,
// capture as a child process under faults, and at the end the oracle's verdict.
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
import { CaptureProcess, type ModelServer } from "./world.ts"

const PUBLICATION = "safety_records_service"

export interface Verdict {
  readonly ok: boolean
  readonly problems: ReadonlyArray<string>
  /** Capture's last log lines, for a failure's report. */
  readonly logs: ReadonlyArray<string>
  readonly stats: { readonly events: number; readonly views: number; readonly kills: number; readonly ms: number }
}

/** Capture did not apply what was committed in time: stuck (the verdict says so). */
class Stuck extends Error {}

export const runHistory = async (server: ModelServer, h: History, timeoutMs = 30_000): Promise<Verdict> => {
  const t0 = Date.now()
  const name = `m_${randomBytes(5).toString("hex")}`
  const db = await server.fresh(name)
  const sql = db.sql
  const slot = `slot_${name}`
  const cap = new CaptureProcess(db.url, slot, h.config)
  const app = new App(sql)
  const follower = new Follower(sql)
  const controls: Control[] = []
  let pendingKill: ReturnType<typeof setTimeout> | null = null
  const seqNow = async () => (await sql<{ s: number }[]>`select coalesce(max(seq), 0)::int as s from oracle.log`)[0]!.s
  const control = async (c: Record<string, unknown> & { kind: string }) =>
    controls.push({ ...c, at: await seqNow() } as Control)

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

  /** Until capture has applied everything committed before the call (restarting it if it is down). */
  const settle = async (what = "capture to catch up") => {
    const [m] = await sql<{ lsn: string }[]>`select pg_logical_emit_message(true, 'model-sync', '')::text as lsn`
    const target = parseLsn(m!.lsn)
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (!cap.running && pendingKill === null) cap.start()
      const [s] = await sql<{ lsn: string | null; boot: boolean }[]>`
        select checkpoint_lsn::text as lsn, bootstrapped_at is not null as boot from service.capture_state where slot_name = ${slot}`
      if (s?.boot && s.lsn !== null && parseLsn(s.lsn) >= target) return
      if (Date.now() > deadline) throw new Stuck(`capture stuck: waited ${timeoutMs} ms for ${what}`)
      await sleep(20)
    }
  }

  /** Until capture has re-read the tables renamed back, and released what they held. */
  const healed = async (tables: ReadonlyArray<string>) => {
    // A contract look that read the catalog before the rename back writes its message within its interval.
    await sleep(400)
    const deadline = Date.now() + timeoutMs
    for (;;) {
      await settle(`capture to re-read ${tables.join(", ")}`)
      const [r] = await sql<{ busy: boolean }[]>`
        select exists (select 1 from service.capture_contract where tbl = any(${tables as string[]}))
            or exists (select 1 from service.capture_resync where tbl = any(${tables as string[]}))
            or exists (select 1 from service.capture_quarantine where blocked_by = any(${tables as string[]})) as busy`
      if (!r!.busy) return
      if (Date.now() > deadline)
        throw new Stuck(`capture stuck: ${tables.join(", ")} renamed back, but not re-read within ${timeoutMs} ms`)
      await sleep(50)
    }
  }

  const bootstrapped = async (since: Date) => {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const [s] = await sql<{ ok: boolean }[]>`
        select bootstrapped_at > ${since} as ok from service.capture_state where slot_name = ${slot}`
      if (s?.ok) return settle("capture's bootstrap")
      if (!cap.running) cap.start()
      if (Date.now() > deadline) throw new Stuck(`capture stuck: no bootstrap within ${timeoutMs} ms`)
      await sleep(20)
    }
  }

  const dropSlot = async () => {
    for (let i = 0; ; i++) {
      const [s] = await sql<{ active: boolean }[]>`select active from pg_replication_slots where slot_name = ${slot}`
      if (s === undefined) return
      if (!s.active) {
        await sql`select pg_drop_replication_slot(${slot})`
        return
      }
      await sql`select pg_terminate_backend(active_pid) from pg_replication_slots where slot_name = ${slot}`
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
        await server.restart()
        return
      case "pg-crash": {
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
        await server.crash()
        await writing
        if (writes.length > 0) await app.reconcile()
        return
      }
      case "slot-drop": {
        await gap(s.gap)
        await dropSlot()
        const since = (await sql<{ now: Date }[]>`select now()`)[0]!.now
        await control({ kind: "bootstrap" })
        cap.start()
        return bootstrapped(since)
      }
      case "fresh": {
        await gap(s.gap)
        await dropSlot()
        await control({ kind: "bootstrap" })
        await runSql(sql, bootstrap(db.url, slot, "model: rebuild-views --fresh-snapshot", false, PUBLICATION))
        cap.start()
        return settle("capture after a fresh snapshot")
      }
      case "rebuild":
        await runSql(sql, rebuildViews())
        await control({ kind: "rebuild" })
        return
      case "retry": {
        const [q] = await sql<{ id: string | null }[]>`select max(id)::text as id from service.capture_quarantine`
        if (q?.id == null) return
        await sql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "retry", all: true, upTo: q.id })})`
        return
      }
      case "discard": {
        await settle()
        const held = await sql<
          { tbl: string; key: string }[]
        >`select tbl, key from service.capture_quarantine order by id`
        if (held.length === 0) return
        const { tbl, key } = held[s.n % held.length]!
        await sql`select pg_logical_emit_message(true, ${QUARANTINE_PREFIX}, ${JSON.stringify({ op: "discard", records: [[tbl, key]] })})`
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
    if (h.config.publication === "dba") await sql.unsafe(createPublicationStatement(PUBLICATION))
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
    const expected = await expectation(sql, controls)
    const actual = await readActual(sql, expected.forbidden)
    counts = { events: actual.events.length, views: actual.views.size }
    problems = [...differences(expected, actual), ...(await follower.misses())]
  } catch (e) {
    if (!(e instanceof Stuck)) throw e
    problems = [e.message]
  } finally {
    cancelKill()
    await cap.kill()
    await sql.end({ timeout: 2 }).catch(() => {})
    // MODEL_KEEP=1 keeps a failed history's database, to look into (its name is in the report).
    if (process.env.MODEL_KEEP === "1" && problems.length > 0) problems.push(`database kept: ${db.url}`)
    else await server.drop(name).catch(() => {})
  }
  return {
    ok: problems.length === 0,
    problems,
    logs: cap.lines.slice(-60),
    stats: { ...counts, kills: cap.kills, ms: Date.now() - t0 }
  }
}

/** The oracle's verdict from the database's log of the app's changes. */
const expectation = async (sql: postgres.Sql, controls: ReadonlyArray<Control>) => {
  const log = await sql<LogEntry[]>`select seq::int, xid::text, tbl, op, old, new from oracle.log order by seq`
  const commits = await sql<{ xid: string; ms: number }[]>`
    select xid::text, floor(extract(epoch from pg_xact_commit_timestamp(xid(xid))) * 1000)::float8 as ms
    from (select distinct xid from oracle.log) x`
  return new Oracle(log, controls, new Map(commits.map((c) => [c.xid, c.ms]))).run()
}
