// Content filters (docs/events.md#content-filters): a JSON object over the fields of an event's
// data. Checked once, when a destination is saved (parseFilter: a 400 naming what is wrong),
// then evaluated on each event's data as sent (matches), once per event and destination.
import { invalid } from "../errors.ts"
import type { WebhookEvent } from "../event-kinds.ts"
import { fieldsOf, refusedField, type FieldType } from "./fields.ts"

export type Filter = Readonly<Record<string, unknown>>

export const MAX_FILTER_BYTES = 2048
export const MAX_FILTER_DEPTH = 5
export const MAX_FILTER_LIST = 100

export const FIELD_OPERATORS = ["$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte", "$exists"] as const
export const LOGICAL_OPERATORS = ["$and", "$or", "$not"] as const

const refuse = (message: string): never => {
  throw invalid(`filter: ${message}`, { field: "filter" })
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** Nesting of objects and arrays: a plain value is 0, {"a": 1} is 1. */
const depthOf = (v: unknown): number => {
  if (Array.isArray(v)) return 1 + Math.max(0, ...v.map(depthOf))
  if (isObject(v)) return 1 + Math.max(0, ...Object.values(v).map(depthOf))
  return 0
}

const isScalar = (v: unknown) => v === null || ["string", "number", "boolean"].includes(typeof v)

/** Whether `v` fits a field of type `t` (null fits any: a field may be absent). */
const fits = (t: FieldType, v: unknown): boolean =>
  v === null ||
  t === "any" ||
  (t === "array"
    ? typeof v === "string"
    : typeof v === (t === "string" ? "string" : t === "number" ? "number" : "boolean"))

const typeWords = (t: FieldType) =>
  t === "array" ? "a string (an element of the list)" : t === "any" ? "a value" : `a ${t}`

/** Where a path is known, among the events: its type where the first of them has it. */
type Lookup = (path: string) => FieldType

const checkCondition = (path: string, type: FieldType, cond: unknown) => {
  if (!isObject(cond)) {
    if (!isScalar(cond)) refuse(`"${path}" must be a value or an object of operators (${FIELD_OPERATORS.join(" ")})`)
    if (!fits(type, cond)) refuse(`"${path}" must be compared with ${typeWords(type)}`)
    return
  }
  const ops = Object.entries(cond)
  if (ops.length === 0) refuse(`"${path}" has no operator`)
  for (const [op, v] of ops) {
    switch (op) {
      case "$eq":
      case "$ne":
        if (!isScalar(v) || !fits(type, v)) refuse(`${op} of "${path}" takes ${typeWords(type)}`)
        break
      case "$in":
      case "$nin":
        if (!Array.isArray(v) || v.length === 0 || v.length > MAX_FILTER_LIST)
          refuse(`${op} of "${path}" takes a list of 1 to ${MAX_FILTER_LIST} values`)
        for (const x of v as Array<unknown>)
          if (!isScalar(x) || !fits(type, x)) refuse(`${op} of "${path}" takes ${typeWords(type)} in its list`)
        break
      case "$gt":
      case "$gte":
      case "$lt":
      case "$lte":
        if (type === "array" || type === "boolean") refuse(`${op} cannot compare "${path}" (${type})`)
        if (typeof v !== "number" && typeof v !== "string") refuse(`${op} of "${path}" takes a number or a text`)
        if (type !== "any" && !fits(type, v)) refuse(`${op} of "${path}" takes ${typeWords(type)}`)
        break
      case "$exists":
        if (typeof v !== "boolean") refuse(`$exists of "${path}" takes true or false`)
        break
      default:
        refuse(`unknown operator "${op.slice(0, 40)}" on "${path}"; operators: ${FIELD_OPERATORS.join(" ")}`)
    }
  }
}

const checkFilter = (f: unknown, lookup: Lookup) => {
  if (!isObject(f)) refuse("must be a JSON object")
  for (const [key, value] of Object.entries(f as Record<string, unknown>)) {
    if (key === "$and" || key === "$or") {
      if (!Array.isArray(value) || value.length === 0) refuse(`${key} takes a list of filters`)
      for (const sub of value as Array<unknown>) checkFilter(sub, lookup)
    } else if (key === "$not") checkFilter(value, lookup)
    else if (key.startsWith("$"))
      refuse(`unknown operator "${key.slice(0, 40)}"; combine filters with ${LOGICAL_OPERATORS.join(" ")}`)
    else checkCondition(key, lookup(key), value)
  }
}

/**
 * A filter as a destination of these events may hold: `input` checked (a 400 naming the
 * field, operator or limit), or null for none. A field must be one of some chosen event's data.
 */
export const parseFilter = (input: unknown, events: ReadonlyArray<WebhookEvent>): Filter | null => {
  if (input === null) return null
  if (!isObject(input)) refuse('must be a JSON object, e.g. {"severity": {"$in": ["serious", "critical"]}}')
  const text = JSON.stringify(input)
  if (Buffer.byteLength(text) > MAX_FILTER_BYTES) refuse(`is longer than ${MAX_FILTER_BYTES} bytes`)
  if (depthOf(input) > MAX_FILTER_DEPTH) refuse(`is nested deeper than ${MAX_FILTER_DEPTH} levels`)
  const lookup: Lookup = (path) => {
    for (const e of events) {
      const why = refusedField(e, path)
      if (why === "withheld") refuse(`"${path}" is withheld from privacy cases: a filter may not read it`)
      if (why === "never sent") refuse(`"${path}" is never sent: a filter may not read it`)
    }
    for (const e of events) {
      const t = fieldsOf(e).get(path)
      if (t !== undefined) return t
    }
    return refuse(`unknown field "${path.slice(0, 80)}" of ${events.join(", ")}`)
  }
  checkFilter(input, lookup)
  return input as Filter
}

// ---------------------------------------------------------------------------------------------
// Evaluation: on the data as sent; a field the data lacks is absent ($exists false, $ne true).

const valueAt = (data: unknown, path: string): unknown => {
  let v: unknown = data
  for (const part of path.split(".")) {
    if (!isObject(v)) return undefined
    v = v[part]
  }
  return v
}

const equal = (v: unknown, x: unknown): boolean =>
  Array.isArray(v) ? v.includes(x) : x === null ? v === null || v === undefined : v === x

const ordered = (v: unknown, x: unknown, test: (c: number) => boolean): boolean => {
  if (typeof v === "number" && typeof x === "number") return test(v < x ? -1 : v > x ? 1 : 0)
  if (typeof v === "string" && typeof x === "string") return test(v < x ? -1 : v > x ? 1 : 0)
  return false
}

const condition = (v: unknown, cond: unknown): boolean => {
  if (!isObject(cond)) return equal(v, cond)
  for (const [op, x] of Object.entries(cond)) {
    const ok =
      op === "$eq"
        ? equal(v, x)
        : op === "$ne"
          ? !equal(v, x)
          : op === "$in"
            ? (x as Array<unknown>).some((y) => equal(v, y))
            : op === "$nin"
              ? !(x as Array<unknown>).some((y) => equal(v, y))
              : op === "$gt"
                ? ordered(v, x, (c) => c > 0)
                : op === "$gte"
                  ? ordered(v, x, (c) => c >= 0)
                  : op === "$lt"
                    ? ordered(v, x, (c) => c < 0)
                    : op === "$lte"
                      ? ordered(v, x, (c) => c <= 0)
                      : op === "$exists"
                        ? (v !== undefined) === x
                        : false
    if (!ok) return false
  }
  return true
}

/** Whether an event's data (parsed) matches a checked filter. */
export const matches = (filter: Filter, data: unknown): boolean => {
  for (const [key, value] of Object.entries(filter)) {
    const ok =
      key === "$and"
        ? (value as Array<Filter>).every((f) => matches(f, data))
        : key === "$or"
          ? (value as Array<Filter>).some((f) => matches(f, data))
          : key === "$not"
            ? !matches(value as Filter, data)
            : condition(valueAt(data, key), value)
    if (!ok) return false
  }
  return true
}
