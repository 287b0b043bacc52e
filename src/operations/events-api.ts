// The events feed as an HttpApi group, for src/api/definition.ts (ServiceApi.add(EventsGroup)):
// GET /api/v1/events and GET /api/v1/events/{id}. The handlers are in events-handlers.ts.
// Query parameters are declared as plain text and checked by the handler (events-feed.ts),
// so that each 400 names the parameter and what it must be.
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { EVENT_KINDS, EVENT_RESOURCE } from "../domain/event-kinds.ts"
import { BadRequest, Forbidden, NotFound } from "../api/errors.ts"
import { RECORD_SCHEMAS } from "../api/records.ts"
import { EVENTS_WINDOW_DAYS } from "./events-feed.ts"

// Not imported from definition.ts: that module imports this one.
const PREFIX = "/api/v1"

const documented = (description: string, jsonSchema: Record<string, unknown>) =>
  Schema.String.check(Schema.makeFilter(() => true, { description, toJsonSchema: () => jsonSchema })).annotate({ description })

const DATE_PATTERN = "^\\d{4}-\\d{2}-\\d{2}([Tt]\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?([Zz]|[+-]\\d{2}:?\\d{2})?)?$"
const DATE_FORMATS = "a date (YYYY-MM-DD, midnight UTC) or a date-time (YYYY-MM-DDThh:mm[:ss[.fff]] with Z or an offset; none means UTC)"

export const EVENTS_QUERY = {
  limit: Schema.optional(documented("Page size: an integer from 1 to 200; 50 when absent.", { pattern: "^[0-9]+$" })),
  cursor: Schema.optional(documented("The nextCursor of the previous page, unchanged (same type and dates).", { minLength: 1 })),
  createdAfter: Schema.optional(documented(`Only events that happened strictly after this moment: ${DATE_FORMATS}.`, { pattern: DATE_PATTERN })),
  createdBefore: Schema.optional(documented(`Only events that happened strictly before this moment: ${DATE_FORMATS}.`, { pattern: DATE_PATTERN })),
  type: Schema.optional(documented("Only events of this name; an unknown name is a 400, one about records the key cannot read a 403.", { enum: [...EVENT_KINDS] }))
} as const

const Timestamp = Schema.String.annotate({ description: "ISO 8601 timestamp in UTC with milliseconds", format: "date-time" })

const EVENT_RECORDS = [...new Set(Object.values(EVENT_RESOURCE))].map((r) => RECORD_SCHEMAS[r])

export const Event = Schema.Struct({
  id: Schema.String.annotate({
    description:
      "The event's id. A webhook delivery of this event carries its delivery's id in the same place instead (one per event and destination); match the two by event, data.id and createdAt."
  }),
  event: Schema.Literals(EVENT_KINDS),
  createdAt: Timestamp.annotate({ description: "When the change that fired the event was committed; the same value as in its webhook deliveries" }),
  data: Schema.Union(EVENT_RECORDS).annotate({ description: "The record as it was when the event fired, exactly as delivered by webhook" })
}).annotate({ identifier: "Event", description: "An event as webhooks deliver it (spec 6.2), identified by the event's id" })

export class EventsGroup extends HttpApiGroup.make("events")
  .add(
    HttpApiEndpoint.get("list", `${PREFIX}/events`, {
      query: EVENTS_QUERY,
      success: Schema.Struct({
        data: Schema.Array(Event).annotate({ description: "Newest first (by createdAt, then id)" }),
        nextCursor: Schema.NullOr(Schema.String).annotate({ description: "Pass as cursor for the next page; null on the last page" })
      }),
      error: [BadRequest, Forbidden]
    }).annotateMerge(
      OpenApi.annotations({
        summary: `Events of the last ${EVENTS_WINDOW_DAYS} days`,
        description: [
          `Every event of the last ${EVENTS_WINDOW_DAYS} days this key could subscribe to: about records of the kinds it may read, in modules turned on now. Newest first, paged like the record lists.`,
          "Use it to catch up after your receiver was down: each event has the payload its webhooks carried. The webhooks permission is not needed."
        ].join("\n\n")
      })
    ),
    HttpApiEndpoint.get("get", `${PREFIX}/events/:id`, {
      params: { id: Schema.String },
      success: Schema.Struct({ data: Event }),
      error: NotFound
    }).annotateMerge(OpenApi.annotations({ summary: "One event", description: `404 when there is no such event of the last ${EVENTS_WINDOW_DAYS} days that this key can read.` }))
  )
  .annotateMerge(OpenApi.annotations({ description: "Events, as webhooks deliver them" })) {}
