// A mirror row its view stands for (docs/design.md, "A view that stands for its mirror row").
// Most records' API body is their row in camelCase: where the body, read back, gives exactly
// the row the mirror would store (every published column, each value the same JSON), the
// mirror stores nothing for it and reads it from the view instead. Only tables whose rows are
// records of their own and have no parent row qualify; a row that does not read back exactly
// (a withheld field, a value the API reformats, a column the record does not show) is stored.
import { camelCase } from "../../domain/records/fields.ts"
import { PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import type { ApiRecord, Row } from "../../domain/records/types.ts"
import { CHILD_RECORDS, RESOURCE_INFO, RESOURCES, resourceOfTable, type Resource } from "../../domain/resources.ts"
import { decodeMirrorData, rowOfValues } from "./mirror-codec.ts"

/** [app column, API field] of every published column, in the mirror's column order. */
type Fields = ReadonlyArray<readonly [column: string, field: string]>

const FIELDS = new Map<string, Fields>()
for (const resource of RESOURCES) {
  if (CHILD_RECORDS.has(resource)) continue
  const table = RESOURCE_INFO[resource].table
  FIELDS.set(
    table,
    PUBLISHED_COLUMNS[table]!.map((c) => [c, camelCase(c)] as const)
  )
}

/** The app tables whose rows a view may stand for, with their resource. */
export const VIEW_BACKED: ReadonlyMap<string, Resource> = new Map(
  [...FIELDS.keys()].map((table) => [table, resourceOfTable(table)!])
)

/** The table of a resource whose views may stand for their rows, or undefined. */
export const viewBackedTable = (resource: Resource): string | undefined => {
  const table = RESOURCE_INFO[resource].table
  return FIELDS.has(table) ? table : undefined
}

/** The same JSON: primitives by value, arrays and objects by their text. */
const sameJson = (shown: unknown, value: unknown): boolean => {
  if (shown === value) return true
  if (typeof shown !== "object" || typeof value !== "object" || shown === null || value === null) return false
  return JSON.stringify(shown) === JSON.stringify(value)
}

/**
 * Whether `record` (written as the view's body, of company `companyId`) reads back as exactly
 * `row`: the row holds every published column of its table and nothing else, company_id is
 * the view's company, and every other column's value is its field's, as JSON.
 */
export const standsFor = (table: string, record: ApiRecord, companyId: string, row: Row): boolean => {
  const fields = FIELDS.get(table)
  if (fields === undefined) return false
  let n = 0
  for (const _ in row) n++
  if (n !== fields.length) return false
  for (let i = 0; i < fields.length; i++) {
    const [column, field] = fields[i]!
    const value = row[column]
    if (value === undefined) return false
    if (column === "company_id") {
      if (value !== companyId) return false
      continue
    }
    const shown = record[field]
    if (shown === undefined || !sameJson(shown, value)) return false
  }
  return true
}

/**
 * The row a view stands for, from its body (its text) and its company. A column the body
 * lacks is left out, as a row stored before the column was published reads (mirror-codec.ts):
 * a view written by an earlier version. Null when the body is not a record of that id (a
 * view written by hand, or by a bug, stands for no row).
 */
export const rowFromView = (table: string, key: string, companyId: string | null, body: string): Row | null => {
  const fields = FIELDS.get(table)
  if (fields === undefined) return null
  const record = JSON.parse(body) as Record<string, unknown> | null
  if (typeof record !== "object" || record === null || record.id !== key) return null
  const values = new Array<unknown>(fields.length)
  for (let i = 0; i < fields.length; i++) {
    const [column, field] = fields[i]!
    const value = column === "company_id" ? companyId : record[field]
    if (value === undefined) return partialRow(fields, record, companyId)
    values[i] = value
  }
  return rowOfValues(table, values)
}

const partialRow = (fields: Fields, record: Record<string, unknown>, companyId: string | null): Row => {
  const out: Record<string, unknown> = {}
  for (const [column, field] of fields) {
    const value = column === "company_id" ? companyId : record[field]
    if (value !== undefined) out[column] = value
  }
  return out
}

/**
 * A mirror row's stored text, read: by position or as an object (mirror-codec.ts), or "v"
 * followed by a view's body, which a view stood for until a writer that does not keep the
 * mirror itself changed or removed that view (sql/032: the old body is kept in its place).
 */
export const decodeStoredRow = (table: string, key: string, text: string, companyId: string | null): Row => {
  if (text.charCodeAt(0) !== 118 /* v */) return decodeMirrorData(table, text)
  // Kept by the trigger whatever the body held: read with what it has, none made up.
  const body = text.slice(1)
  return (
    rowFromView(table, key, companyId, body) ?? partialRow(FIELDS.get(table) ?? [], JSON.parse(body) ?? {}, companyId)
  )
}
