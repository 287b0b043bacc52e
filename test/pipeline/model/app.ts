// Plays the app for the model: each step's operations as SQL on the app's tables, one
// transaction after the other from one connection (so the oracle's log is in commit order).
// Records are named by kind and position among those still there; ids, times and texts are
// made from a counter, and every text is a marker (`Z<field>.<n>Z`) that nothing else can
// hold, so the leak scan's hits are real.
import { createHash } from "node:crypto"
import type postgres from "postgres"
import { FIXED } from "./world.ts"
import { type AppOp, KINDS, type Kind, RENAMES } from "./steps.ts"

const TABLE: Readonly<Record<Kind, string>> = {
  incident: "incidents",
  action: "corrective_actions",
  inspection: "inspections",
  audit: "audits",
  change: "changes",
  permit: "permits",
  observation: "observations"
}

const ACTION_STATUS = ["open", "in_progress", "completed", "verified", "in_progress", "completed"] as const
const OUTCOME = ["pass", "fail", "needs_attention", "fail", "pass", "fail"] as const
const CHANGE_STATUS = ["draft", "submitted", "approved", "implemented", "closed", "approved"] as const
const PERMIT_STATUS = ["requested", "approved", "active", "closed", "cancelled", "approved"] as const

type Tx = postgres.TransactionSql

const BASE = Date.parse("2026-06-01T00:00:00.000Z")

export class App {
  /** Records still there, per kind, in the order made. */
  readonly live: Record<Kind, string[]> = Object.fromEntries(KINDS.map((k) => [k, []])) as unknown as Record<
    Kind,
    string[]
  >
  private counter = 0
  /** Columns renamed out of shape now: table -> columns. */
  readonly renamed = new Map<string, Set<string>>()
  private readonly siteMoved = [false, false]
  /** Incidents whose description is stored out of line now. */
  private readonly long = new Set<string>()

  private readonly sql: postgres.Sql

  constructor(sql: postgres.Sql) {
    this.sql = sql
  }

  private next(): number {
    return ++this.counter
  }

  private id(prefix: string): string {
    return `${prefix}000000-0000-4000-8000-${this.next().toString(16).padStart(12, "0")}`
  }

  private marker(field: string): string {
    return `Z${field}.${this.next()}Z`
  }

  /**
   * An incident's description: its marker, and for a long one text after it that does not
   * compress (4 KB of hex), which PostgreSQL stores out of line and sends as unchanged when an
   * update leaves it.
   */
  private description(long: boolean): string {
    const m = this.marker("description")
    if (!long) return m
    let text = ""
    for (let i = 0; text.length < 4096; i++) text += createHash("sha256").update(`${m}:${i}`).digest("hex")
    return `${m} ${text}`
  }

  private at(): string {
    return new Date(BASE + this.next() * 1000).toISOString()
  }

  /** A column's name in the app now (renamed out of shape, or not). */
  private col(table: string, column: string): string {
    return this.renamed.get(table)?.has(column) ? `${column}_x` : column
  }

  /** A row with its columns named as the app's table names them now. */
  private row(table: string, values: Record<string, unknown>): Record<string, unknown> {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(values)) out[this.col(table, k)] = v
    return out
  }

  private pick(kind: Kind, n: number): string | undefined {
    const ids = this.live[kind]
    return ids.length === 0 ? undefined : ids[n % ids.length]
  }

  /** Runs one transaction of the app's. */
  async transaction(ops: ReadonlyArray<AppOp>, pad = 0): Promise<void> {
    await this.sql.begin(async (tx) => {
      for (const op of ops) await this.apply(tx, op)
      for (let i = 0; i < pad; i++) await this.create(tx, "observation", i, false)
    })
  }

  /**
   * After a crash cut transactions short: forgets the records they made that are not there (an
   * item for one would fail), and reads where the equipment stands. A delete the crash undid
   * leaves its record there, forgotten: nothing of the app's touches it again.
   */
  async reconcile(): Promise<void> {
    for (const kind of KINDS) {
      const ids = this.live[kind]
      if (ids.length === 0) continue
      const there = await this.sql<{ id: string }[]>`
        select id::text as id from ${this.sql(`app.${TABLE[kind]}`)} where id = any(${ids}::uuid[])`
      const kept = new Set(there.map((r) => r.id))
      this.live[kind] = ids.filter((id) => kept.has(id))
    }
    for (let i = 0; i < 2; i++) {
      const [e] = await this.sql<{ site: string }[]>`
        select job_site_id::text as site from app.equipment where id = ${FIXED.equipment[i]!}`
      this.siteMoved[i] = e?.site !== FIXED.sites[i]
    }
  }

  /** Renames a column out of the service's shape (the app's DDL). */
  async rename(which: number): Promise<readonly [string, string] | null> {
    const [table, column] = RENAMES[which % RENAMES.length]!
    const cols = this.renamed.get(table) ?? new Set<string>()
    if (cols.has(column)) return null
    await this.sql.unsafe(`alter table app.${table} rename column ${column} to ${column}_x`)
    cols.add(column)
    this.renamed.set(table, cols)
    return [table, column]
  }

  /** Renames every renamed column back; the tables they were in. */
  async unrename(): Promise<string[]> {
    const tables: string[] = []
    for (const [table, cols] of this.renamed) {
      for (const column of cols)
        await this.sql.unsafe(`alter table app.${table} rename column ${column}_x to ${column}`)
      if (cols.size > 0) tables.push(table)
    }
    this.renamed.clear()
    return tables
  }

  private async apply(tx: Tx, op: AppOp): Promise<void> {
    switch (op.op) {
      case "create":
        return this.create(tx, op.kind, op.variant, op.long === true)
      case "edit":
        return this.edit(tx, op.kind, op.n, op.variant)
      case "privacy": {
        const id = this.pick("incident", op.n)
        // A privacy case that ends while PostgreSQL sends the description as unchanged (stored
        // out of line) holds the record until capture has read its row again (docs/design.md,
        // "Quarantine"), which the oracle does not know yet: not played.
        if (id === undefined || (!op.on && this.long.has(id))) return
        await tx`update app.incidents set privacy_case = ${op.on}, updated_at = ${this.at()} where id = ${id}`
        return
      }
      case "poison": {
        const id = this.pick("audit", op.n)
        if (id !== undefined)
          await tx`update app.audits set score = ${op.bad ? "NaN" : 42}::numeric, updated_at = ${this.at()} where id = ${id}`
        return
      }
      case "item": {
        const id = this.pick(op.kind, op.n)
        if (id === undefined) return
        const table = op.kind === "audit" ? "audit_items" : "inspection_items"
        const parent = op.kind === "audit" ? "audit_id" : "inspection_id"
        await tx`insert into ${tx(`app.${table}`)} ${tx({
          id: this.id("1f"),
          [parent]: id,
          position: this.next(),
          item: this.marker("item"),
          result: "fail",
          note: this.marker("note"),
          created_at: this.at()
        })}`
        return
      }
      case "delete": {
        const id = this.pick(op.kind, op.n)
        if (id === undefined) return
        await tx`delete from ${tx(`app.${TABLE[op.kind]}`)} where id = ${id}`
        this.live[op.kind] = this.live[op.kind].filter((x) => x !== id)
        return
      }
      case "site":
        await tx`update app.job_sites set name = ${this.marker("site")}, updated_at = ${this.at()}
          where id = ${FIXED.sites[op.n % 2]!}`
        return
      case "move": {
        const i = op.n % 2
        this.siteMoved[i] = !this.siteMoved[i]
        await tx`update app.equipment set job_site_id = ${FIXED.sites[this.siteMoved[i] ? 1 - i : i]!}, updated_at = ${this.at()}
          where id = ${FIXED.equipment[i]!}`
        return
      }
      case "module":
        await tx`update app.company_modules set enabled = ${op.on} where company_id = ${FIXED.company} and module = 'incidents'`
        return
      case "truncate":
        if (op.table === "permits") {
          await tx`truncate app.permits`
          this.live.permit = []
        } else {
          // Corrective actions point at incidents: CASCADE empties them too.
          await tx`truncate app.incidents cascade`
          this.live.incident = []
          this.live.action = []
        }
        return
    }
  }

  private async create(tx: Tx, kind: Kind, v: number, long: boolean): Promise<void> {
    const at = this.at()
    const common = { company_id: FIXED.company, created_at: at, updated_at: at }
    const insert = async (table: string, prefix: string, values: Record<string, unknown>) => {
      const id = this.id(prefix)
      await tx`insert into ${tx(`app.${table}`)} ${tx(this.row(table, { id, ...common, ...values }))}`
      this.live[kind].push(id)
      return id
    }
    switch (kind) {
      case "incident": {
        const id = await insert("incidents", "1a", {
          reference: `INC-${this.next()}`,
          type: "injury",
          title: this.marker("title"),
          description: this.description(long),
          occurred_at: at,
          location: this.marker("location"),
          person_name: this.marker("person"),
          body_part: this.marker("bodypart"),
          injury_type: this.marker("injury"),
          severity: "serious",
          privacy_case: v % 2 === 1
        })
        if (long) this.long.add(id)
        return
      }
      case "action":
        await insert("corrective_actions", "1b", {
          title: this.marker("title"),
          source: "manual",
          status: ACTION_STATUS[v % ACTION_STATUS.length]!,
          priority: "high",
          owner: this.marker("owner")
        })
        return
      case "inspection":
        await insert("inspections", "1c", {
          equipment_id: FIXED.equipment[v % 2]!,
          checklist: this.marker("checklist"),
          performed_by: this.marker("inspector"),
          performed_at: at,
          outcome: OUTCOME[v % OUTCOME.length]!
        })
        return
      case "audit": {
        const id = await insert("audits", "1d", {
          title: this.marker("title"),
          performed_at: at,
          score: v === 5 ? "NaN" : v * 10,
          notes: this.marker("notes")
        })
        for (let i = 0; i < v % 3; i++)
          await tx`insert into app.audit_items ${tx({
            id: this.id("1f"),
            audit_id: id,
            position: i,
            item: this.marker("item"),
            result: "pass",
            created_at: at
          })}`
        return
      }
      case "change":
        await insert("changes", "1e", {
          title: this.marker("title"),
          status: CHANGE_STATUS[v % CHANGE_STATUS.length]!
        })
        return
      case "permit":
        await insert("permits", "2a", {
          type: "hot_work",
          title: this.marker("title"),
          status: PERMIT_STATUS[v % PERMIT_STATUS.length]!
        })
        return
      case "observation":
        await insert("observations", "2b", { type: "unsafe_act", title: this.marker("title"), observed_at: at })
        return
    }
  }

  private async edit(tx: Tx, kind: Kind, n: number, v: number): Promise<void> {
    const id = this.pick(kind, n)
    if (id === undefined) return
    const table = TABLE[kind]
    const set = (values: Record<string, unknown>) =>
      tx`update ${tx(`app.${table}`)} set ${tx(this.row(table, { ...values, updated_at: this.at() }))} where id = ${id}`
    switch (kind) {
      case "incident":
        await set({ description: this.description(false), person_name: this.marker("person") })
        this.long.delete(id)
        return
      case "action":
        await set({ status: ACTION_STATUS[v % ACTION_STATUS.length]! })
        return
      case "inspection":
        await set({ outcome: OUTCOME[v % OUTCOME.length]! })
        return
      case "audit":
        await set({ notes: this.marker("notes") })
        return
      case "change":
        await set({ status: CHANGE_STATUS[v % CHANGE_STATUS.length]! })
        return
      case "permit":
        await set({ status: PERMIT_STATUS[v % PERMIT_STATUS.length]! })
        return
      case "observation":
        await set({ title: this.marker("title") })
        return
    }
  }
}
