// The service's migrations as files (sql/NNN_name.sql): their text, what their header asks of
// the runner, and their statements. A header line `-- migrate: <directive>` is read by the
// runner and left out of the checksum, so a directive can be added to a migration that
// deployments have already applied without it being taken for an edit
// (docs/design.md, "Online migrations").
//
//   -- migrate: steps                  statements that cannot run in a transaction (CREATE or
//                                      DROP INDEX CONCURRENTLY, a DO block that commits its
//                                      batches) each run alone; the statements between them
//                                      run in one transaction per run of them
//   -- migrate: equivalent-to <sha256> the text of this migration the releases before applied,
//                                      which left the schema as this one does: accepted, and
//                                      recorded when this one is applied (so they accept it)
//   -- migrate: accepts <sha256>       another earlier text that left the same schema (a comment
//                                      since changed): accepted, never recorded
//   -- migrate: fence <x.y.z>          processes of releases before x.y.z would write by rules
//                                      this migration changes: they may write no more once it runs
//   -- migrate: allows <rule> (<what it blocks, for how long>): <why>
//                                      a rule of the lock check this migration breaks, and why
import { createHash } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"

const SQL_DIR = fileURLToPath(new URL("../../../sql/", import.meta.url))

/** A rule of the lock check a migration breaks on purpose: what it blocks, for how long, and why. */
export interface Allowance {
  readonly rule: string
  readonly blocks: string
  readonly why: string
}

export interface Migration {
  readonly name: string
  /** Its number: the schema generation a database reaches with it. */
  readonly number: number
  readonly sql: string
  /** SHA-256 of its text without its directive lines. */
  readonly checksum: string
  /** Checksums of the texts the releases before applied, which left the same schema (equivalent-to). */
  readonly equivalents: ReadonlyArray<string>
  /** Checksums of other earlier texts that left the same schema (accepts). */
  readonly accepted: ReadonlyArray<string>
  readonly steps: boolean
  /** The oldest release that writes by its rules, or null when it changes none. */
  readonly fence: string | null
  readonly allows: ReadonlyArray<Allowance>
}

/** The checksum recorded when it is applied: its first earlier text's, so that releases that know only that text accept it. */
export const recordedChecksum = (m: Migration): string => m.equivalents[0] ?? m.checksum

/** Whether a recorded checksum is this migration's, in its text now or an equivalent earlier one. */
export const accepts = (m: Migration, recorded: string): boolean =>
  recorded === m.checksum || m.equivalents.includes(recorded) || m.accepted.includes(recorded)

/** A release number as the fence compares them: MAJOR.MINOR.PATCH. */
export const RELEASE_PATTERN = /^(\d+)\.(\d+)\.(\d+)$/

const DIRECTIVE = /^-- migrate: (.*)(?:\r?\n|$)/gm
const SHA256 = /^[0-9a-f]{64}$/
const ALLOWS = /^allows ([a-z0-9-]+) \((.+)\): (.+)$/
/** "How long" in an allowance is a measure: a number and a unit. */
const DURATION = /\d+(?:[.,]\d+)?\s*(?:ms|s|seconds?|minutes?|min)\b/

const invalidDirective = (name: string, text: string, why: string) =>
  new Error(`Migration ${name}: "-- migrate: ${text}" ${why}`)

/** Reads a migration's text: its directives (a bad one is an error naming it) and its checksum. */
export const parseMigration = (name: string, sql: string): Migration => {
  const number = /^(\d+)_/.exec(name)
  if (number === null) throw new Error(`Migration ${name}: its name must start with its number (NNN_name.sql)`)
  const equivalents: string[] = []
  const accepted: string[] = []
  const allows: Allowance[] = []
  let steps = false
  let fence: string | null = null
  for (const [, raw] of sql.matchAll(DIRECTIVE)) {
    const text = raw!.trim()
    const [word, ...rest] = text.split(/\s+/)
    const arg = rest.join(" ")
    if (word === "steps" && arg === "") steps = true
    else if (word === "equivalent-to" || word === "accepts") {
      if (!SHA256.test(arg)) throw invalidDirective(name, text, "needs the earlier text's SHA-256, 64 hex digits")
      if (word === "accepts") accepted.push(arg)
      else equivalents.push(arg)
    } else if (word === "fence") {
      if (!RELEASE_PATTERN.test(arg)) throw invalidDirective(name, text, "needs a release, MAJOR.MINOR.PATCH")
      fence = arg
    } else if (word === "allows") {
      const m = ALLOWS.exec(text)
      if (m === null)
        throw invalidDirective(name, text, "must read: allows <rule> (<what it blocks, for how long>): <why>")
      if (!/\bblock/i.test(m[2]!) || !DURATION.test(m[2]!))
        throw invalidDirective(
          name,
          text,
          "must say in its parentheses what it blocks and for how long (a number and a unit)"
        )
      allows.push({ rule: m[1]!, blocks: m[2]!, why: m[3]! })
    } else throw invalidDirective(name, text, "is not a directive: steps, equivalent-to, accepts, fence or allows")
  }
  const checksum = createHash("sha256").update(sql.replace(DIRECTIVE, "")).digest("hex")
  return { name, number: Number(number[1]), sql, checksum, equivalents, accepted, steps, fence, allows }
}

export const loadMigrations = (dir = SQL_DIR): ReadonlyArray<Migration> =>
  readdirSync(dir)
    .filter((f) => /^\d+_.*\.sql$/.test(f))
    .sort()
    .map((name) => parseMigration(name, readFileSync(dir + name, "utf8")))

/** The schema generation a build's migrations reach: the highest number among them. */
export const generationOf = (migrations: ReadonlyArray<Migration>): number =>
  migrations.reduce((n, m) => Math.max(n, m.number), 0)

/**
 * The statements of a migration's text, each without its trailing semicolon: split at the
 * semicolons outside quotes, dollar quotes and comments. Comments before a statement stay
 * with it; a piece holding only comments is dropped.
 */
export const splitStatements = (sql: string): Array<string> => {
  const out: string[] = []
  let start = 0
  let i = 0
  const n = sql.length
  const push = (end: number) => {
    const text = sql.slice(start, end).trim()
    if (stripComments(text).trim() !== "") out.push(text)
  }
  while (i < n) {
    const c = sql[i]!
    if (c === "-" && sql[i + 1] === "-") {
      const eol = sql.indexOf("\n", i)
      i = eol === -1 ? n : eol + 1
    } else if (c === "/" && sql[i + 1] === "*") {
      i = skipBlockComment(sql, i)
    } else if (c === "'" || c === '"') {
      i = skipQuoted(sql, i, c, c === "'" && /[eE]/.test(sql[i - 1] ?? "") && !/\w/.test(sql[i - 2] ?? ""))
    } else if (c === "$") {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i))
      if (tag !== null && !/[\w$]/.test(sql[i - 1] ?? "")) {
        const close = sql.indexOf(tag[0], i + tag[0].length)
        i = close === -1 ? n : close + tag[0].length
      } else i++
    } else if (c === ";") {
      push(i)
      start = ++i
    } else i++
  }
  push(n)
  return out
}

const skipBlockComment = (sql: string, from: number): number => {
  let depth = 0
  let i = from
  while (i < sql.length) {
    if (sql[i] === "/" && sql[i + 1] === "*") {
      depth++
      i += 2
    } else if (sql[i] === "*" && sql[i + 1] === "/") {
      depth--
      i += 2
      if (depth === 0) return i
    } else i++
  }
  return i
}

const skipQuoted = (sql: string, from: number, quote: string, backslashes: boolean): number => {
  let i = from + 1
  while (i < sql.length) {
    if (backslashes && sql[i] === "\\") i += 2
    else if (sql[i] === quote && sql[i + 1] === quote) i += 2
    else if (sql[i] === quote) return i + 1
    else i++
  }
  return i
}

/** The text without its comments (quotes left as they are), for looking at a statement's words. */
export const stripComments = (sql: string): string => sql.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/--[^\n]*/g, " ")

/**
 * Whether a statement runs alone in a steps migration: one that cannot run inside a
 * transaction (an index built or dropped concurrently, a REINDEX CONCURRENTLY, a VACUUM, a DO
 * block or CALL that commits its own batches), or a VALIDATE CONSTRAINT, whose scan must not
 * hold the locks of the statements around it.
 */
export const runsAlone = (statement: string): boolean => {
  const s = stripComments(statement).trim()
  if (/^(create\s+(unique\s+)?index|drop\s+index)\s+concurrently\b/i.test(s)) return true
  if (/^(reindex\b[\s\S]*\bconcurrently\b|vacuum\b)/i.test(s)) return true
  if (/^alter\s+table\b[\s\S]*\bvalidate\s+constraint\b/i.test(s)) return true
  return /^(do|call)\b/i.test(s) && /\bcommit\b/i.test(s)
}

/** Whether a statement's own locks leave reads and writes of its table alone, so it may wait for them as long as it takes. */
export const waitsWithoutBlocking = (statement: string): boolean =>
  /\bconcurrently\b/i.test(stripComments(statement)) ||
  /^\s*alter\s+table\b[\s\S]*\bvalidate\s+constraint\b/i.test(stripComments(statement))

/** How a steps migration runs: runs of statements that share a transaction, and statements that run alone. */
export type Step = { readonly alone: boolean; readonly statements: ReadonlyArray<string> }

export const stepsOf = (sql: string): Array<Step> => {
  const steps: Step[] = []
  let group: string[] = []
  for (const s of splitStatements(sql)) {
    if (runsAlone(s)) {
      if (group.length > 0) steps.push({ alone: false, statements: group })
      group = []
      steps.push({ alone: true, statements: [s] })
    } else group.push(s)
  }
  if (group.length > 0) steps.push({ alone: false, statements: group })
  return steps
}
