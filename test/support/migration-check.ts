// The lock check of the migrations (docs/design.md, "Online migrations"): squawk's rules for
// statements that block reads or writes of a table in use (an index built without
// CONCURRENTLY, a column added with a volatile default, a type changed, a NOT NULL set by a
// scan, a constraint validated under lock...) or that break what the release before still
// reads (a column or table dropped or renamed), plus the runner's own: a CONCURRENTLY statement
// only in a steps migration, each such statement safe to run again, no backfill in the
// transaction that altered its table. A migration may break a rule only if its header says
// which, what it blocks, for how long, and why (`-- migrate: allows`); an allowance that no
// longer matches anything is a finding too.
import { spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import {
  parseMigration,
  runsAlone,
  splitStatements,
  stepsOf,
  stripComments,
  type Migration
} from "../../src/platform/db/migrations.ts"

/** squawk's rules that are about style, or that the runner sees to itself (it sets lock_timeout). */
const NOT_CHECKED = [
  "require-lock-timeout",
  "require-statement-timeout",
  "require-timeout-settings",
  "prefer-robust-stmts",
  "prefer-bigint-over-int",
  "prefer-bigint-over-smallint",
  "prefer-identity",
  "prefer-text-field",
  "prefer-timestamptz",
  "ban-char-field"
]

/** Rules about a table's indexes and constraints: harmless on a table the same migration made (it is empty). */
const ON_ITS_TABLE = new Set([
  "require-concurrent-index-creation",
  "require-concurrent-index-deletion",
  "constraint-missing-not-valid",
  "adding-foreign-key-constraint",
  "adding-primary-key-constraint",
  "disallowed-unique-constraint",
  "adding-field-with-default",
  "adding-not-nullable-field",
  "adding-required-field",
  "changing-column-type"
])

export interface Finding {
  readonly migration: string
  readonly line: number
  readonly rule: string
  readonly message: string
}

/** squawk's binary for this platform: squawk-cli installs it as an optional dependency from the npm registry. */
const squawkBin = () => {
  const require = createRequire(import.meta.url)
  const pkg = `@squawk-cli/${process.platform}-${process.arch}`
  try {
    return join(
      dirname(require.resolve(`${pkg}/package.json`)),
      "bin",
      process.platform === "win32" ? "squawk.exe" : "squawk"
    )
  } catch {
    throw new Error(
      `the migrations' lock check needs squawk for this platform (${pkg}): npm install --include=optional`
    )
  }
}

type SquawkReport = { file: string; line: number; rule_name: string; message: string }

/** squawk's findings for each text, by its name. */
const squawk = (migrations: ReadonlyArray<Migration>): Array<Finding> => {
  const dir = mkdtempSync(join(tmpdir(), "srs-squawk-"))
  try {
    const findings: Finding[] = []
    for (const inTransaction of [true, false]) {
      const these = migrations.filter((m) => m.steps !== inTransaction)
      if (these.length === 0) continue
      const files = these.map((m) => {
        const file = join(dir, m.name)
        writeFileSync(file, m.sql)
        return file
      })
      const run = spawnSync(
        squawkBin(),
        [
          "--reporter=json",
          "--pg-version=15.0",
          `--exclude=${NOT_CHECKED.join(",")}`,
          ...(inTransaction ? ["--assume-in-transaction"] : []),
          ...files
        ],
        { encoding: "utf8" }
      )
      if (run.error !== undefined) throw run.error
      // 0: nothing found, 1: findings; anything else is squawk refusing its command line.
      if (run.status !== 0 && run.status !== 1) throw new Error(`squawk failed (${run.status}): ${run.stderr}`)
      const reports = JSON.parse(run.stdout || "[]") as Array<SquawkReport>
      for (const r of reports)
        findings.push({
          migration: r.file.slice(dir.length + 1),
          line: r.line + 1,
          rule: r.rule_name,
          message: r.message
        })
    }
    return findings
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const unquote = (name: string) => name.replace(/"/g, "").replace(/^service\./, "")

/** The tables a migration makes. */
const tablesMade = (sql: string): Set<string> =>
  new Set(
    [...stripComments(sql).matchAll(/\bcreate\s+(?:unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?([\w."]+)/gi)].map(
      (m) => unquote(m[1]!)
    )
  )

/** The table a statement works on (an index's or an altered table's), or null. */
const tableOf = (statement: string): string | null => {
  const s = stripComments(statement)
  const m =
    /^\s*create\s+(?:unique\s+)?index\b[\s\S]*?\bon\s+(?:only\s+)?([\w."]+)/i.exec(s) ??
    /^\s*alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?([\w."]+)/i.exec(s)
  return m === null ? null : unquote(m[1]!)
}

/** The statement that holds a line of the text (1-based). */
const statementAt = (sql: string, line: number): string => {
  let at = 0
  for (const s of splitStatements(sql)) {
    const start = sql.indexOf(s, at)
    const end = start + s.length
    at = end
    const first = sql.slice(0, start).split("\n").length
    const last = sql.slice(0, end).split("\n").length
    if (line >= first && line <= last) return s
  }
  return ""
}

/** The runner's own rules, which squawk does not know. */
const runnerFindings = (m: Migration): Array<Finding> => {
  const found: Finding[] = []
  const finding = (rule: string, statement: string, message: string) =>
    found.push({ migration: m.name, line: m.sql.slice(0, m.sql.indexOf(statement)).split("\n").length, rule, message })
  for (const s of splitStatements(m.sql)) {
    const text = stripComments(s)
    if (runsAlone(s) && !m.steps)
      finding("alone-outside-steps", s, "a statement that cannot run in a transaction needs `-- migrate: steps`")
    if (
      m.steps &&
      /^\s*create\s+(unique\s+)?index\s+concurrently\b/i.test(text) &&
      !/\bif\s+not\s+exists\b/i.test(text)
    )
      finding("steps-rerun", s, "a step may run again: CREATE INDEX CONCURRENTLY IF NOT EXISTS")
    if (m.steps && /^\s*drop\s+index\s+concurrently\b/i.test(text) && !/\bif\s+exists\b/i.test(text))
      finding("steps-rerun", s, "a step may run again: DROP INDEX CONCURRENTLY IF EXISTS")
  }
  // A backfill in the transaction that altered its table holds the ALTER's lock while it runs.
  const groups = m.steps ? stepsOf(m.sql).filter((g) => !g.alone) : [{ statements: splitStatements(m.sql) }]
  for (const g of groups) {
    const altered = new Set<string>()
    for (const s of g.statements) {
      const text = stripComments(s)
      if (/^\s*alter\s+table\b/i.test(text)) altered.add(tableOf(s) ?? "")
      const dml = /^\s*(?:update|delete\s+from)\s+(?:only\s+)?([\w."]+)/i.exec(text)
      const target = dml === null ? null : unquote(dml[1]!)
      if (target !== null && altered.has(target))
        finding(
          "backfill-under-lock",
          s,
          `rows of service.${target} written in the transaction that altered it: it holds the ALTER's lock until it ends (fill them in a step of their own, in committed batches)`
        )
    }
  }
  return found
}

/** Every finding a header does not allow, and every allowance that matches none, as "name:line rule: message". */
export const checkMigrations = (texts: ReadonlyArray<{ name: string; sql: string }>): Array<string> => {
  const problems: string[] = []
  const migrations: Migration[] = []
  for (const t of texts) {
    try {
      migrations.push(parseMigration(t.name, t.sql))
    } catch (e) {
      problems.push((e as Error).message)
    }
  }
  const byName = new Map(migrations.map((m) => [m.name, m] as const))
  const findings = [...squawk(migrations), ...migrations.flatMap(runnerFindings)].filter((f) => {
    const m = byName.get(f.migration)!
    if (!ON_ITS_TABLE.has(f.rule)) return true
    const table = tableOf(statementAt(m.sql, f.line))
    return table === null || !tablesMade(m.sql).has(table)
  })
  for (const m of migrations) {
    const own = findings.filter((f) => f.migration === m.name)
    for (const f of own)
      if (!m.allows.some((a) => a.rule === f.rule)) problems.push(`${m.name}:${f.line} ${f.rule}: ${f.message}`)
    for (const a of m.allows)
      if (!own.some((f) => f.rule === a.rule))
        problems.push(`${m.name}: allows ${a.rule}, which it no longer breaks: drop the allowance`)
  }
  return problems
}
