// PUBLISHED_COLUMNS and NEVER_COLUMNS against sql/demo/app.sql, so a column added to the app
// schema cannot silently be left out of (or leak through) the publication and the shapers.
import { readFileSync } from "node:fs"
import { describe, expect, it } from "vitest"
import { camelCase, fields } from "../../src/domain/records/fields.ts"
import { NEVER_COLUMNS, PUBLISHED_COLUMNS, shape } from "../../src/domain/records/index.ts"
import { RESOURCE_INFO, RESOURCES, type Resource } from "../../src/domain/resources.ts"
import { FIXTURES } from "./fixtures.ts"

interface SqlTable {
  readonly columns: ReadonlyArray<string>
  /** Columns whose definition line carries a "-- NEVER" comment. */
  readonly never: ReadonlyArray<string>
}

const CONSTRAINT_WORDS = new Set(["primary", "unique", "check", "constraint", "foreign", "exclude"])

/** Splits on commas outside parentheses and quotes. */
const topLevelParts = (body: string): string[] => {
  const parts: string[] = []
  let depth = 0
  let quoted = false
  let current = ""
  for (const ch of body) {
    if (ch === "'") quoted = !quoted
    else if (!quoted && ch === "(") depth++
    else if (!quoted && ch === ")") depth--
    if (ch === "," && depth === 0 && !quoted) {
      parts.push(current)
      current = ""
    } else current += ch
  }
  parts.push(current)
  return parts
}

const parseAppTables = (sql: string): Map<string, SqlTable> => {
  const tables = new Map<string, SqlTable>()
  const create = /create table app\.(\w+) \(\n([\s\S]*?)\n\);/g
  for (const [, name, body] of sql.matchAll(create)) {
    const never = body!
      .split("\n")
      .filter((line) => /--.*\bNEVER\b/.test(line))
      .map((line) => line.trim().split(/\s+/)[0]!)
    const withoutComments = body!.replace(/--[^\n]*/g, "")
    const columns = topLevelParts(withoutComments)
      .map((part) => part.trim().split(/\s+/)[0]!.toLowerCase())
      .filter((word) => word !== "" && !CONSTRAINT_WORDS.has(word))
    tables.set(name!, { columns, never })
  }
  return tables
}

const SQL = parseAppTables(readFileSync(new URL("../../sql/demo/app.sql", import.meta.url), "utf8"))

describe("sql/demo/app.sql parser", () => {
  it("finds every app table and reads multi-line definitions correctly", () => {
    expect(SQL.size).toBe(22)
    expect(SQL.get("company_modules")!.columns).toEqual(["company_id", "module", "enabled"])
    expect(SQL.get("changes")!.columns).toContain("status")
    expect(SQL.get("workers")!.never).toEqual([
      "phone",
      "email",
      "photo_url",
      "qr_code",
      "work_restrictions",
      "medical_notes"
    ])
  })
})

describe("PUBLISHED_COLUMNS and NEVER_COLUMNS", () => {
  it("cover exactly the app tables", () => {
    const tables = [...SQL.keys()].sort()
    expect(Object.keys(PUBLISHED_COLUMNS).sort()).toEqual(tables)
    expect(Object.keys(NEVER_COLUMNS).sort()).toEqual(tables)
  })

  it.each([...SQL.keys()])("%s: every column is in exactly one of the two lists", (table) => {
    const { columns, never } = SQL.get(table)!
    const published = PUBLISHED_COLUMNS[table]!
    const neverListed = NEVER_COLUMNS[table]!
    expect([...published, ...neverListed].sort()).toEqual([...columns].sort())
    expect(published.filter((c) => neverListed.includes(c))).toEqual([])
    expect(new Set(published).size).toBe(published.length)
    // the publication lists columns in table order
    expect(published).toEqual(columns.filter((c) => published.includes(c)))
    // the NEVER list agrees with the schema's own NEVER markers
    expect([...neverListed].sort()).toEqual([...never].sort())
  })

  it("every record table is published with its id and company_id", () => {
    for (const resource of RESOURCES) {
      expect(PUBLISHED_COLUMNS[RESOURCE_INFO[resource].table]).toEqual(expect.arrayContaining(["id", "company_id"]))
    }
  })
})

// A shaper's keys are the camelCase of its table's published columns (without company_id)
// plus its extra fields: a new published column fails here until a shaper decides about it.
const EXTRAS: Readonly<
  Record<Resource, { readonly add: ReadonlyArray<string>; readonly omit: ReadonlyArray<string> }>
> = {
  incidents: { add: [], omit: [] },
  observations: { add: [], omit: [] },
  // exactly the fields of docs/api.md#corrective-actions: no companyId
  "corrective-actions": { add: [], omit: ["company_id"] },
  audits: { add: ["items"], omit: [] },
  // exactly the fields of docs/api.md#inspections: the equipment as an object, and no via or updatedAt
  inspections: { add: ["equipment", "items"], omit: ["company_id", "equipment_id", "via", "updated_at"] },
  "training-records": { add: [], omit: [] },
  workers: { add: [], omit: [] },
  "job-sites": { add: [], omit: [] },
  changes: { add: [], omit: [] },
  permits: { add: [], omit: [] },
  policies: { add: ["acknowledgementCount"], omit: [] },
  sds: { add: [], omit: [] },
  "risk-assessments": { add: [], omit: [] },
  subcontractors: { add: ["documents", "documentStatus"], omit: [] }
}

describe("shapers against the published columns", () => {
  it.each(RESOURCES)("%s", (resource) => {
    const { add, omit } = EXTRAS[resource]
    const expected = PUBLISHED_COLUMNS[RESOURCE_INFO[resource].table]!.filter((c) => !omit.includes(c))
      .map(camelCase)
      .concat(add)
    expect(Object.keys(shape(resource, FIXTURES[resource])).sort()).toEqual(expected.sort())
  })
})

describe("fields(): a shaper's field list written as words", () => {
  it.each([
    ["id company_id title", { id: "text", company_id: "text", title: "text" }],
    [
      "\n  occurred_at:timestamp privacy_case:boolean\n  score:number tags:textArray data:json\n",
      { occurred_at: "timestamp", privacy_case: "boolean", score: "number", tags: "textArray", data: "json" }
    ]
  ])("%j, in order, text by default", (words, expected) => {
    // The object's keys keep the order they are written in.
    expect(fields(words)).toEqual(Object.entries(expected))
  })

  it("refuses a kind it does not know, so a typo fails at load rather than shaping text", () => {
    expect(() => fields("id occurred_at:timestmap")).toThrow("field occurred_at: unknown kind timestmap")
  })
})
