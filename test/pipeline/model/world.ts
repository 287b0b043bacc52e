// Where a model history runs: a PostgreSQL of its own (the model restarts it), a database per
// history cloned from a template, the app's changes logged by triggers for the oracle, and
// capture as a child process the runner may SIGKILL. In the split layout the service's
// database is a clone on a second PostgreSQL, so it can crash alone: capture's asynchronous
// batches are then flushed by nothing of the app's, and many can be lost at once.
import { spawn, type ChildProcess } from "node:child_process"
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import postgres from "postgres"
import { connect } from "../../../src/platform/db/Database.ts"
import { ensureDemoAppSchema, prepareDemoDatabase } from "../../../src/platform/db/demo-schema.ts"
import { startEmbedded, type EmbeddedServer } from "../../../src/platform/db/embedded.ts"
import { APP_TABLES } from "../../../src/pipeline/projection/tables.ts"
import { RESOURCES } from "../../../src/domain/resources.ts"
import { restartablePort } from "../../support/net.ts"
import { sleep } from "../../support/wait.ts"
import { migrate } from "../../../src/platform/db/migrate.ts"
import type { Layout, ModelConfig } from "./steps.ts"

const CHILD = fileURLToPath(new URL("../../support/capture-child.ts", import.meta.url))
/** The app's tables and the service's schema in one database. */
const TEMPLATE = "model_template"
/** The split layout's: the app's tables alone, and the service's schema alone. */
const APP_TEMPLATE = "model_app_template"
const SERVICE_TEMPLATE = "model_service_template"

/**
 * Every sequence set to where it stands, so a clone's first nextval writes WAL. A sequence
 * hands out the values its last WAL record covered (32 ahead) without writing again; a clone
 * copies the page with that count but not the record, so after a crash (before a checkpoint)
 * its sequence would go back and hand out, again, values committed rows hold.
 */
const SEQUENCES_LOGGED = `
  do $$ declare s regclass; begin
    for s in select oid::regclass from pg_class where relkind = 'S' loop
      execute format('select setval(%L, last_value, is_called) from %s', s, s);
    end loop;
  end $$`

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

/** One PostgreSQL cluster of the model's: the app's (with the one layout's template), or the split layout's service's. */
export class ModelServer {
  private server: EmbeddedServer | null = null
  private readonly dir: string
  private readonly port: number
  private constructor(dir: string, port: number) {
    this.dir = dir
    this.port = port
  }

  static async start(role: "app" | "service" = "app"): Promise<ModelServer> {
    const dir = mkdtempSync(join(tmpdir(), `srs-model-${role}-`))
    chmodSync(dir, 0o755)
    const s = new ModelServer(dir, await restartablePort())
    await s.up()
    if (role === "app") {
      await s.makeAppTemplate(TEMPLATE, true)
      await s.makeAppTemplate(APP_TEMPLATE, false)
    } else await s.makeServiceTemplate()
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
    try {
      await this.server?.stop()
    } finally {
      rmSync(this.dir, { recursive: true, force: true })
    }
  }

  private async createDatabase(name: string) {
    const admin = postgres(this.urlOf("postgres"), { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${name}`)
    await admin.end()
  }

  /** The app's tables, logged for the oracle, with the fixed rows; `service`: the service's schema beside them. */
  private async makeAppTemplate(name: string, service: boolean) {
    await this.createDatabase(name)
    const sql = connect(this.urlOf(name), 1)
    if (service) await prepareDemoDatabase(sql)
    else await ensureDemoAppSchema(sql)
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
    await sql.unsafe(SEQUENCES_LOGGED)
    await sql.end()
  }

  /** The service's schema alone (its migrations), as a separate service database starts. */
  private async makeServiceTemplate() {
    await this.createDatabase(SERVICE_TEMPLATE)
    const sql = connect(this.urlOf(SERVICE_TEMPLATE), 1)
    await migrate(sql)
    // This cluster is the one that crashes in the split layout: its clones' sequences too.
    await sql.unsafe(SEQUENCES_LOGGED)
    await sql.end()
  }

  /** A new database cloned from a template. */
  async fresh(name: string, template: string): Promise<Handle> {
    const admin = postgres(this.urlOf("postgres"), { max: 1, onnotice: () => {} })
    await admin.unsafe(`create database ${name} template ${template}`)
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

/** A database's URL and a pool on it. */
export interface Handle {
  readonly url: string
  readonly sql: postgres.Sql
}

/**
 * A history's databases: the app's (its tables, the oracle's log, the slot, the publication)
 * and the service's (capture's state, the views, the record changes, the outbox). In the one
 * layout both are the same database; in the split one the service's is on a cluster of its own.
 */
export interface Databases {
  readonly layout: Layout
  readonly name: string
  readonly app: Handle
  readonly service: Handle
  /** The app's pool where it is not the service's database, as capture's AppSql takes it. */
  readonly appPool: postgres.Sql | undefined
  readonly appServer: ModelServer
  /** The cluster of the service's database: the app's in the one layout. */
  readonly serviceServer: ModelServer
}

/** The model's clusters: the app's, and the service's own for split histories (started at the first). */
export class ModelWorld {
  readonly app: ModelServer
  private service: Promise<ModelServer> | null = null
  private stopping: Promise<void> | null = null
  private constructor(app: ModelServer) {
    this.app = app
  }

  static async start(): Promise<ModelWorld> {
    return new ModelWorld(await ModelServer.start("app"))
  }

  private serviceServer(): Promise<ModelServer> {
    this.service ??= ModelServer.start("service")
    return this.service
  }

  async databases(name: string, layout: Layout): Promise<Databases> {
    if (layout === "one") {
      const db = await this.app.fresh(name, TEMPLATE)
      return { layout, name, app: db, service: db, appPool: undefined, appServer: this.app, serviceServer: this.app }
    }
    const serviceServer = await this.serviceServer()
    const app = await this.app.fresh(name, APP_TEMPLATE)
    const service = await serviceServer.fresh(name, SERVICE_TEMPLATE)
    return { layout, name, app, service, appPool: app.sql, appServer: this.app, serviceServer }
  }

  /** Ends the pools and drops the databases (slots first: they are the app's). */
  async drop(d: Databases): Promise<void> {
    await d.app.sql.end({ timeout: 2 }).catch(() => {})
    if (d.layout === "split") await d.service.sql.end({ timeout: 2 }).catch(() => {})
    await d.appServer.drop(d.name).catch(() => {})
    if (d.layout === "split") await d.serviceServer.drop(d.name).catch(() => {})
  }

  /** Once, whoever asks (a run's end, or a signal during it). */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const service = await this.service?.catch(() => null)
      await Promise.allSettled([this.app.stop(), service?.stop()])
    })()
    return this.stopping
  }
}

/** Capture as a child process: started, SIGKILLed, started again; its last log lines kept for a report. */
export class CaptureProcess {
  private child: ChildProcess | null = null
  readonly lines: string[] = []
  starts = 0
  kills = 0
  /** When its process was last started (Date.now()), 0 before the first. */
  startedAt = 0

  private readonly db: Databases
  private readonly slot: string
  private readonly config: ModelConfig

  constructor(db: Databases, slot: string, config: ModelConfig) {
    this.db = db
    this.slot = slot
    this.config = config
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null
  }

  start(): void {
    if (this.running) return
    this.starts++
    this.startedAt = Date.now()
    const child = spawn(process.execPath, [CHILD], {
      env: {
        ...process.env,
        CAPTURE_URL: this.db.service.url,
        // Empty: the app's tables are in the service's database (capture-child reads it so).
        CAPTURE_APP_URL: this.db.layout === "split" ? this.db.app.url : "",
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
