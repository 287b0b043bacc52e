// Picking API fields out of an app row by an explicit allow-list. Shapers never spread a
// row: a column reaches the API only if a shaper names it here, so a NEVER column that
// slipped into a row by mistake still produces no key at all.
import { toIsoUtcOrNull } from "../time.ts"
import type { Row } from "./types.ts"

/** How a column's value becomes JSON. */
export type FieldKind = "text" | "timestamp" | "boolean" | "number" | "textArray" | "json"

const FIELD_KINDS: ReadonlySet<string> = new Set<FieldKind>([
  "text",
  "timestamp",
  "boolean",
  "number",
  "textArray",
  "json"
])

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
      // ids are uuids but always strings in the API (docs/api.md#records)
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
      const n =
        typeof value === "number" ? value : typeof value === "string" && value.trim() !== "" ? Number(value) : NaN
      return Number.isFinite(n) ? n : fail(column, kind, value)
    }
    case "textArray":
      // A NULL element (PostgreSQL allows one) says nothing: left out, so the API keeps its
      // documented array of strings rather than sending the text "null".
      return Array.isArray(value)
        ? value.filter((v) => v !== null && v !== undefined).map(String)
        : fail(column, kind, value)
    case "json":
      // jsonb is passed through as given
      return value
  }
}

/**
 * How a field list becomes a record, worked out once per list: its API names, and a function
 * that makes the record from the values in list order as one object literal. V8 then gives the
 * record fixed properties; added one by one under computed names, a record of more than about
 * 16 fields turns into a dictionary, which JSON.stringify (every view body) reads at half the
 * speed. The names are the service's own column names (fields() lists), quoted as JSON strings.
 */
interface Picker {
  readonly names: ReadonlyArray<string>
  readonly make: (values: ReadonlyArray<unknown>) => Record<string, unknown>
  /** The values of the record being made (pickFields is synchronous and never reentered). */
  readonly values: unknown[]
}
const pickers = new WeakMap<ReadonlyArray<FieldSpec>, Picker>()

const pickerOf = (specs: ReadonlyArray<FieldSpec>): Picker => {
  let picker = pickers.get(specs)
  if (picker === undefined) {
    const names = specs.map(([column]) => camelCase(column))
    const literal = names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(", ")
    const make = new Function("v", `return { ${literal} }`) as Picker["make"]
    pickers.set(specs, (picker = { names, make, values: new Array<unknown>(specs.length) }))
  }
  return picker
}

/** The listed columns of a row, in list order, under their camelCase names; added to `out`
 *  when given (a record built from several lists is then one object, not spread copies). */
export const pickFields = (
  row: Row,
  specs: ReadonlyArray<FieldSpec>,
  out?: Record<string, unknown>
): Record<string, unknown> => {
  const { names, make, values } = pickerOf(specs)
  if (out !== undefined) {
    for (let i = 0; i < specs.length; i++) out[names[i]!] = readField(row, specs[i]![0], specs[i]![1])
    return out
  }
  for (let i = 0; i < specs.length; i++) values[i] = readField(row, specs[i]![0], specs[i]![1])
  const record = make(values)
  values.fill(undefined) // holds no row's values after
  return record
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
