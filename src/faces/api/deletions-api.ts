// GET /api/v1/deletions as an HttpApi group, for src/faces/api/definition.ts
// (ServiceApi.add(DeletionsGroup)); the handler is in deletions-handlers.ts, the listing in
// src/read/deletions.ts.
import { Schema } from "effect"
import { HttpApiGroup, OpenApi } from "effect/http-api"
import { FILTER_DATE_FORMATS } from "../../domain/dates.ts"
import { RESOURCES } from "../../domain/resources.ts"
import { DELETIONS_WINDOW_DAYS } from "../../read/lists.ts"
import { DELETION_EXAMPLE } from "./examples.ts"
import { feedList } from "./paging.ts"
import { CursorParam, dateParam, LimitParam, oneOfParam } from "./query.ts"

// Not imported from definition.ts: that module imports this one.
const PREFIX = "/api/v1"

const SinceParam = dateParam(
  `Only records deleted at or after this moment: ${FILTER_DATE_FORMATS}. Pass the deletedAt of the last deletion you saw (it comes again: deleting twice does no harm). Absent, or more than ${DELETIONS_WINDOW_DAYS} days ago: the last ${DELETIONS_WINDOW_DAYS} days.`
)

const ResourceParam = oneOfParam(
  RESOURCES,
  "Only deletions of this resource; absent: of every resource the key can read."
)

export const DELETIONS_QUERY = {
  resource: Schema.optional(ResourceParam),
  since: Schema.optional(SinceParam),
  limit: Schema.optional(LimitParam),
  cursor: Schema.optional(CursorParam)
} as const

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

export const Deletion = Schema.Struct({
  resource: Schema.Literals(RESOURCES),
  id: Schema.String.annotate({ description: "The deleted record's id" }),
  deletedAt: Timestamp.annotate({
    description:
      "When the deletion was committed (or, after the service rebuilt its views, when it found the record gone)"
  })
}).annotate({ identifier: "Deletion", description: "A record that was deleted", examples: [DELETION_EXAMPLE] })

/** GET /api/v1/deletions in the documents: its summary and the paragraphs of its description. */
const LIST_DOC = {
  summary: `Records deleted in the last ${DELETIONS_WINDOW_DAYS} days`,
  description: [
    `Records deleted in the last ${DELETIONS_WINDOW_DAYS} days that this key could read: of the resources in its scopes whose module is on now. Oldest first, paged like the record lists.`,
    "With the lists sorted by change (sort=updatedAt&updatedAfter=...) this keeps a copy in step: apply what changed, then drop what was deleted. A record deleted and then created again with the same id is no longer listed. A copy not synced for more than 30 days cannot learn every deletion: list everything again."
  ]
}

export class DeletionsGroup extends HttpApiGroup.make("deletions")
  .add(feedList(`${PREFIX}/deletions`, DELETIONS_QUERY, Deletion, "Oldest first (by deletedAt, then id)", LIST_DOC))
  .annotateMerge(OpenApi.annotations({ description: "Deleted records, for keeping a copy in step" })) {}
