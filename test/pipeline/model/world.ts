// Where a model history runs: a PostgreSQL of its own (the model restarts it), a database per
// history cloned from a template, the app's changes logged by triggers for the oracle, and
// capture as a child process the runner may SIGKILL.
import { spawn, type ChildProcess } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import postgres from "postgres"
import { connect } from "../../../src/platform/db/Database.ts"
import { prepareDemoDatabase } from "../../../src/platform/db/demo-schema.ts"
import { startEmbedded, type EmbeddedServer } from "../../../src/platform/db/embedded.ts"
import { APP_TABLES } from "../../../src/pipeline/projection/tables.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { freePort } from "../../support/net.ts"
import { sleep } from "../../support/wait.ts"
import type { ModelConfig } from "./steps.ts"

const CHILD = fileURLToPath(new URL("../../support/capture-child.ts", import.meta.url))
const TEMPLATE = "model_template"

/** The company, job sites and equipment every history starts with (fixed ids: the template's). */
export const FIXED = {
  company: "0c000000-0000-4000-8000-000000000001",
  sites: ["05000000-0000-4000-8000-000000000001", "05000000-0000-4000-8000-000000000002"],
  equipment: ["0e000000-0000-4000-8000-000000000001", "0e000000-0000-4000-8000-000000000002"]
} as const

/** The triggers that log every change of the app's tables for the oracle (not published: schema oracle). */
const ORACLE_LOG = `
  create schema oracle;
  create table oracle.log (seq bigserial primary key, xid xid8 not null default pg_current_xact_id(), tbl text not null,
    op text not null, old jsonb, new jsonb);
  create function oracle.row_change() returns trigger language plpgsql as $$
  begin
    insert into oracle.log (tbl, op, old, new) values (tg_table_name, lower(tg_op),
      case when tg_op = 'INSERT' then null else to_jsonb(old) end,
      case when tg_op = 'DELETE' then null else to_jsonb(new) end);
    return null;
  end $$;
  create function oracle.truncated() returns trigger language plpgsql as $$
  begin
    insert into oracle.log (tbl, op) values (tg_table_name, 'truncate');
    return null;
  end $$;
  ${APP_TABLES.map(
    (t) => `
    create trigger oracle_row after insert or update or delete on app.${t} for each row execute function oracle.row_change();
    create trigger oracle_truncate after truncate on app.${t} for each statement execute function oracle.truncated();`
  ).join("\n")}
`

export class ModelServer {
  private server: EmbeddedServer | null = null
  private readonly dir: string
  private readonly port: number
  private constructor(dir: string, port: number) {
    this.dir = dir
    this.port = port
  }

  static async start(): Promise<ModelServer> {
    const dir = mkdtempSync(join(tmpdir(), "srs-model-"))
    chmodSync(dir, 0o755)
    const s = new ModelServer(dir, await freePort())
    await s.up()
    await s.makeTemplate()
    return s
  }

  private async up() {
    this.server = await startEmbedded({
      dataDir: this.dir,
      port: this.port,
      settings: {
        max_replication_slots: "32",
        max_wal_senders: "32",
        max_connections: "200",
        fsync: "off",
        full_page_writes: "off",
        // The oracle dates each app transaction by its commit, as capture does.
        track_commit_timestamp: "on",
        // An asynchronous commit stays in the WAL buffers until something writes them (the WAL
        // writer, every 10 s at most, or a later synchronous commit), so a crash (crash()) loses it.
        // With fsync off a synchronous commit still writes its WAL to the OS, which outlives a crash.
        wal_writer_delay: "10000ms"
      }
    })
  }

  urlOf(database: string): string {
    const u = new URL(this.server!.url)
    u.pathname = `/${database}`
    return u.toString()
  }

  /** A fast stop and start: every connection is cut, slots and data stay. */
  async restart(): Promise<void> {
    await this.server?.stop()
    await this.up()
  }

  /**
   * A crash and a start: the postmaster sent SIGQUIT (what `pg_ctl stop -m immediate` sends; pg_ctl
   * itself refuses to run as root), so every process quits at once, with no checkpoint and the WAL
   * buffers never written: an asynchronous commit not yet written is lost. The start recovers from
   * the WAL on disk; slots come back as last saved (a logical slot's confirmed position is saved at
   * checkpoints, so it may go back).
   */
  async crash(): Promise<void> {
    const pid = Number(readFileSync(join(this.dir, "pg", "postmaster.pid"), "utf8").split("\n")[0])
    process.kill(pid, "SIGQUIT")
    // The postmaster exits once all its processes have (it SIGKILLs those still there after 5 s).
    const deadline = Date.now() + 30_000
    for (;;) {
      try {
        process.kill(pid, 0)
      } catch {
        break
      }
      if (Date.now() > deadline) throw new Error(`the model's PostgreSQL (pid ${pid}) did not quit within 30 s`)
      await sleep(10)
    }
    await this.server?.stop() // nothing left to stop: it lets the server go
    await this.up()
  }

  async stop(): Promise<void> {
    await this.server?.stop()
    rmSync(this.dir, { recursive: true, force: true })
  }

  private async makeTemplate() {
    const admin = postgres(this.urlOf("postgres"), { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${TEMPLATE}`)
    await admin.end()
    const sql = connect(this.urlOf(TEMPLATE), 1)
    await prepareDemoDatabase(sql)
    // An app whose audits take any score: a NaN one is a record capture cannot shape.
    await sql`alter table app.audits drop constraint if exists audits_score_check`
    // Logged from here on: the oracle starts from the same rows as the app.
    await sql.unsafe(ORACLE_LOG)
    await sql`
      insert into app.companies (id, name, host, tier, api_enabled, created_at)
      values (${FIXED.company}, 'Model Co', 'model.test', 'company', true, '2026-01-01T00:00:00Z')`
    for (const m of RESOURCES)
      await sql`insert into app.company_modules (company_id, module, enabled) values (${FIXED.company}, ${m}, true)`
    for (let i = 0; i < 2; i++) {
      await sql`
        insert into app.job_sites (id, company_id, name, created_at, updated_at)
        values (${FIXED.sites[i]!}, ${FIXED.company}, ${`Site ${i}`}, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`
      await sql`
        insert into app.equipment (id, company_id, name, identifier, job_site_id, created_at, updated_at)
        values (${FIXED.equipment[i]!}, ${FIXED.company}, ${`Crane ${i}`}, ${`EQ-${i}`}, ${FIXED.sites[i]!},
                '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`
    }
    // Every sequence set to where it stands, so a clone's first nextval writes WAL. A sequence
    // hands out the values its last WAL record covered (32 ahead) without writing again; a clone
    // copies the page with that count but not the record, so after a crash (before a checkpoint)
    // its sequence would go back and hand out, again, values committed rows hold.
    await sql.unsafe(`
      do $$ declare s regclass; begin
        for s in select oid::regclass from pg_class where relkind = 'S' loop
          execute format('select setval(%L, last_value, is_called) from %s', s, s);
        end loop;
      end $$`)
    await sql.end()
  }

  /** A new database cloned from the template. */
  async fresh(name: string): Promise<{ url: string; sql: postgres.Sql }> {
    const admin = postgres(this.urlOf("postgres"), { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${name} template ${TEMPLATE}`)
    await admin.end()
    const url = this.urlOf(name)
    return { url, sql: connect(url, 3) }
  }

  async drop(name: string): Promise<void> {
    const admin = postgres(this.urlOf("postgres"), { max: 1, onnotice: () => {} })
    try {
      for (let attempt = 0; ; attempt++) {
        await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`
        await admin`select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = ${name} and not active`
        try {
          await admin.unsafe(`drop database if exists ${name} with (force)`)
          return
        } catch (e) {
          if (attempt >= 50) throw e
          await sleep(100)
        }
      }
    } finally {
      await admin.end()
    }
  }
}

/** Capture as a child process: started, SIGKILLed, started again; its last log lines kept for a report. */
export class CaptureProcess {
  private child: ChildProcess | null = null
  readonly lines: string[] = []
  starts = 0
  kills = 0

  private readonly url: string
  private readonly slot: string
  private readonly config: ModelConfig

  constructor(url: string, slot: string, config: ModelConfig) {
    this.url = url
    this.slot = slot
    this.config = config
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null
  }

  start(): void {
    if (this.running) return
    this.starts++
    const child = spawn(process.execPath, [CHILD], {
      env: {
        ...process.env,
        CAPTURE_URL: this.url,
        CAPTURE_SLOT: this.slot,
        CAPTURE_BATCH: String(this.config.batchChanges),
        CAPTURE_LARGE: String(this.config.largeTransaction),
        CAPTURE_HELD_MEMORY: String(this.config.heldInMemory),
        CAPTURE_RESYNC_CHUNK: String(this.config.resyncChunk),
        CAPTURE_CONTRACT_MS: "150",
        CAPTURE_HEARTBEAT_MS: "1000"
      },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (line.trim() === "") continue
        this.lines.push(line.length > 600 ? `${line.slice(0, 600)}…` : line)
        if (this.lines.length > 200) this.lines.shift()
      }
    }
    child.stdout!.on("data", keep)
    child.stderr!.on("data", keep)
    this.child = child
  }

  async kill(): Promise<void> {
    const c = this.child
    if (c === null) return
    this.child = null
    if (c.exitCode === null && c.signalCode === null) {
      this.kills++
      const exited = new Promise((r) => c.once("exit", r))
      c.kill("SIGKILL")
      await exited
    }
  }
}
