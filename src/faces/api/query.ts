// List query parameters (docs/api.md#lists): the schemas the HttpApi endpoints declare (so the
// OpenAPI document and the server's checks are one definition), and the pure parsers
// behind them. Every parameter arrives as text; a check failure names the parameter. Text
// that holds something else (a page size, a date) is parsed once, in the schema: the
// handler gets the number or the canonical timestamp.
import { Schema, SchemaIssue, SchemaTransformation } from "effect"
import { STATUS_FILTER } from "../../domain/resources.ts"
import { FILTER_DATE_FORMATS, filterDateRefusal, parseFilterDate } from "../../domain/dates.ts"
import { DEFAULT_LIMIT } from "../../read/lists.ts"

export const MAX_LIMIT = 200
export const MAX_NAME_LENGTH = 200

/** limit: an integer from 1 to 200 written in digits, or undefined when it is not one. */
export const parseLimit = (text: string): number | undefined => {
  if (!/^[0-9]{1,4}$/.test(text)) return undefined
  const n = Number(text)
  return n >= 1 && n <= MAX_LIMIT ? n : undefined
}

export const STATUS_VALUES = Object.keys(STATUS_FILTER)

const textParam = (
  check: (text: string) => true | string,
  annotations: { readonly description: string; readonly jsonSchema: Record<string, unknown> }
) =>
  Schema.String.check(
    Schema.makeFilter((text: string) => check(text), {
      description: annotations.description,
      toJsonSchema: () => annotations.jsonSchema
    })
  ).annotate({ description: annotations.description })

export const LimitParam = textParam((t) => parseLimit(t) !== undefined || `must be an integer from 1 to ${MAX_LIMIT}`, {
  description: `Page size: an integer from 1 to ${MAX_LIMIT}; ${DEFAULT_LIMIT} when absent.`,
  // Text that must be digits; the document says what it holds: an integer (document.ts
  // flattens this over the string the query parameter is).
  jsonSchema: { type: "integer", minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT }
}).pipe(
  // Decoded once: the check above guarantees the parse.
  Schema.decodeTo(
    Schema.Number,
    SchemaTransformation.transform({ decode: (t: string) => parseLimit(t)!, encode: String })
  )
)

/** A cursor: opaque text, checked by the list it belongs to (src/read/cursor.ts). */
export const cursorParam = (description: string) =>
  textParam((t) => t.length > 0 || "must not be empty", { description, jsonSchema: { minLength: 1 } })

const CURSOR_DESCRIPTION =
  "The nextCursor of the previous page, unchanged. It only works with the same resource and filters."
export const CursorParam = cursorParam(CURSOR_DESCRIPTION)

const DATE_JSON_SCHEMA = {
  pattern: "^\\d{4}-\\d{2}-\\d{2}([Tt]\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?([Zz]|[+-]\\d{2}:?\\d{2})?)?$"
}

/** A filter date, decoded into its canonical UTC timestamp (what PostgreSQL compares and cursors carry). */
export const dateParam = (description: string) =>
  textParam((t) => parseFilterDate(t) !== undefined || filterDateRefusal(t), {
    description,
    jsonSchema: DATE_JSON_SCHEMA
  }).pipe(
    Schema.decodeTo(
      Schema.String,
      SchemaTransformation.transform({ decode: (t: string) => parseFilterDate(t)!.iso, encode: (iso: string) => iso })
    )
  )

/**
 * limit and cursor, the paging every list takes; the cursor's description says what it must be
 * sent with. One definition so that every list pages alike.
 */
export const pagingQuery = (cursorDescription: string) =>
  ({
    limit: Schema.optional(LimitParam),
    cursor: Schema.optional(cursorParam(cursorDescription))
  }) as const

/** createdAfter and createdBefore, strict bounds on when `what` ("records created") came to be. */
export const createdQuery = (what: string, formats: string = FILTER_DATE_FORMATS) =>
  ({
    createdAfter: Schema.optional(dateParam(`Only ${what} strictly after this moment: ${formats}.`)),
    createdBefore: Schema.optional(dateParam(`Only ${what} strictly before this moment: ${formats}.`))
  }) as const

const CHANGED =
  "A record's change time is its updatedAt; for a record with no updatedAt (inspections), or whose change left updatedAt alone (an audit's item, a policy's acknowledgement, a subcontractor's document, the equipment or job site name inside an inspection), the time the service saw the change, which moves forward with every change. With sort=updatedAt the answer's nextUpdatedAfter carries it."

export const UpdatedAfterParam = dateParam(
  `Only records that changed strictly after this moment: ${FILTER_DATE_FORMATS}. Pass the nextUpdatedAfter of your last sync (or the updatedAt of the last record it saw) to get what changed since. ${CHANGED}`
)
export const UpdatedBeforeParam = dateParam(
  `Only records whose last change was strictly before this moment: ${FILTER_DATE_FORMATS}. ${CHANGED}`
)

/** A query parameter that takes one of `values`; anything else is a 400 naming them. */
export const oneOfParam = <const L extends ReadonlyArray<string>>(values: L, description: string) =>
  Schema.Literals(values).annotate({ description, message: `must be one of ${values.join(", ")}` })

export const SORT_VALUES = ["updatedAt"] as const

export const SortParam = Schema.Literals(SORT_VALUES).annotate({
  description:
    "updatedAt: oldest change first (by change time, then id), for keeping a copy in step; paging never skips nor repeats a record, also among records that changed at the same moment. Absent: newest created first.",
  message: `must be ${SORT_VALUES.join(", ")}`
})

export const NameParam = textParam(
  (t) =>
    t.trim().length === 0
      ? "must not be empty"
      : t.length > MAX_NAME_LENGTH
        ? `must be at most ${MAX_NAME_LENGTH} characters`
        : true,
  {
    description: "Only records whose name contains this text, ignoring case.",
    jsonSchema: { minLength: 1, maxLength: MAX_NAME_LENGTH }
  }
)

export const StatusParam = oneOfParam(
  STATUS_VALUES,
  "open (open or in_progress), closed (completed or verified), or exactly one of in_progress, completed, verified."
)

/** Query fields every list takes. */
export const BASE_QUERY = {
  ...pagingQuery(CURSOR_DESCRIPTION),
  ...createdQuery("records created"),
  updatedAfter: Schema.optional(UpdatedAfterParam),
  updatedBefore: Schema.optional(UpdatedBeforeParam),
  sort: Schema.optional(SortParam)
} as const

export const NAME_QUERY = { ...BASE_QUERY, name: Schema.optional(NameParam) } as const
export const STATUS_QUERY = { ...BASE_QUERY, status: Schema.optional(StatusParam) } as const

// -----------------------------------------------------------------------------
// Turning a failed query decode into one message that names the parameter

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** The first problem of a failed decode of query parameters, as "<param> <problem>". */
export const describeQueryIssue = (issue: SchemaIssue.Issue, known: ReadonlyArray<string>): string => {
  const first = formatIssues(issue).issues[0]
  const seg = first?.path?.[0]
  const param =
    typeof seg === "object" && seg !== null && "key" in seg
      ? String(seg.key)
      : seg === undefined
        ? undefined
        : String(seg)
  if (param === undefined) return "invalid query parameters"
  if (!known.includes(param)) {
    return `unknown query parameter "${param}"; this list takes ${known.join(", ")}`
  }
  const message = first?.message ?? "is invalid"
  if (/^Expected string/.test(message)) return `query parameter "${param}" must be given once`
  return `query parameter "${param}" ${message}`
}
