// Picking API fields out of an app row by an explicit allow-list. Shapers never spread a
// row: a column reaches the API only if a shaper names it here, so a NEVER column that
// slipped into a row by mistake still produces no key at all.
import { toIsoUtcOrNull } from "../time.ts"
import type { Row } from "./types.ts"

/** How a column's value becomes JSON. */
export type FieldKind = "text" | "timestamp" | "boolean" | "number" | "textArray" | "json"

const FIELD_KINDS: ReadonlySet<string> = new Set<FieldKind>(["text", "timestamp", "boolean", "number", "textArray", "json"])

/** [app column, kind]; the API name is the column's camelCase. */
export type FieldSpec = readonly [column: string, kind: FieldKind]

const camelNames = new Map<string, string>()

/** The API name of a column. Memoised: shapers ask for the same few hundred names millions of times. */
export const camelCase = (column: string): string => {
  let name = camelNames.get(column)
  if (name === undefined) {
    name = column.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())
    if (camelNames.size < 10_000) camelNames.set(column, name)
  }
  return name
}

const fail = (column: string, kind: FieldKind, value: unknown): never => {
  throw new TypeError(`column ${column}: expected ${kind}, got ${typeof value}`)
}

/** One column's value as the API writes it; absent (missing or null) is null. */
export const readField = (row: Row, column: string, kind: FieldKind): unknown => {
  const value = row[column]
  if (value === null || value === undefined) return null
  switch (kind) {
    case "text":
      // ids are uuids but always strings in the API (spec 2.6)
      if (typeof value === "string") return value
      if (typeof value === "number" || typeof value === "bigint") return String(value)
      return fail(column, kind, value)
    case "timestamp":
      return toIsoUtcOrNull(value)
    case "boolean":
      if (typeof value === "boolean") return value
      // pgoutput's text form, in case a caller did not normalise it
      if (value === "t" || value === "true") return true
      if (value === "f" || value === "false") return false
      return fail(column, kind, value)
    case "number": {
      // numeric may arrive as a string to keep its precision; the API gives a JSON number
      const n = typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN
      return Number.isFinite(n) ? n : fail(column, kind, value)
    }
    case "textArray":
      // A NULL element (PostgreSQL allows one) says nothing: left out, so the API keeps its
      // documented array of strings rather than sending the text "null".
      return Array.isArray(value) ? value.filter((v) => v !== null && v !== undefined).map(String) : fail(column, kind, value)
    case "json":
      // jsonb is passed through as given
      return value
  }
}

/** A field list's API names, worked out once per list: shapers pick the same few lists for every record. */
const namesOf = new WeakMap<ReadonlyArray<FieldSpec>, ReadonlyArray<string>>()

/** The listed columns of a row, in list order, under their camelCase names; added to `out`
 *  when given (a record built from several lists is then one object, not spread copies). */
export const pickFields = (row: Row, specs: ReadonlyArray<FieldSpec>, out: Record<string, unknown> = {}): Record<string, unknown> => {
  let names = namesOf.get(specs)
  if (names === undefined) namesOf.set(specs, (names = specs.map(([column]) => camelCase(column))))
  for (let i = 0; i < specs.length; i++) {
    const spec = specs[i]!
    out[names[i]!] = readField(row, spec[0], spec[1])
  }
  return out
}

/** Every record ends with these, so createdAt/updatedAt come last in the output. */
export const CREATED: ReadonlyArray<FieldSpec> = [["created_at", "timestamp"]]
export const STAMPS: ReadonlyArray<FieldSpec> = [
  ["created_at", "timestamp"],
  ["updated_at", "timestamp"]
]

/** Orders rows by a numeric column, then created_at, then id, so equal positions stay stable. */
export const byNumberThenCreatedThenId =
  (column: string) =>
  (a: Row, b: Row): number =>
    Number(a[column] ?? 0) - Number(b[column] ?? 0) || byCreatedThenId(a, b)

/** created_at (absent first), then id: a total order over child rows. */
export const byCreatedThenId = (a: Row, b: Row): number => {
  const ca = toIsoUtcOrNull(a["created_at"]) ?? ""
  const cb = toIsoUtcOrNull(b["created_at"]) ?? ""
  if (ca !== cb) return ca < cb ? -1 : 1
  const ia = String(a["id"] ?? "")
  const ib = String(b["id"] ?? "")
  return ia < ib ? -1 : ia > ib ? 1 : 0
}

/**
 * A field list written as words, in output order: "id company_id occurred_at:timestamp ...";
 * a word without a kind is text.
 */
export const fields = (words: string): ReadonlyArray<FieldSpec> =>
  words
    .trim()
    .split(/\s+/)
    .map((word) => {
      const [column = "", kind = "text"] = word.split(":")
      if (!FIELD_KINDS.has(kind)) throw new TypeError(`field ${column}: unknown kind ${kind}`)
      return [column, kind as FieldKind] as const
    })
