// The events feed as an HttpApi group, for src/faces/api/definition.ts (ServiceApi.add(EventsGroup)):
// GET /api/v1/events and GET /api/v1/events/{id}. The handlers are in events-handlers.ts.
// Query parameters are checked and parsed by their schemas, like the record lists': each 400
// names the parameter and what it must be (request-errors.ts).
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import {
  ALERT_KINDS,
  ALERT_WHEN,
  alertSchemaName,
  EVENT_KINDS,
  EVENT_RESOURCE,
  EVENT_WHEN,
  eventSchemaName,
  WEBHOOK_EVENTS,
  type AlertKind,
  type EventKind
} from "../../domain/event-kinds.ts"
import { RESOURCES, type Resource } from "../../domain/resources.ts"
import { NotFound } from "../http/errors.ts"
import { DELETED_RECORD_SCHEMAS, RECORD_SCHEMAS } from "./records.ts"
import { EVENTS_WINDOW_DAYS } from "../../read/lists.ts"
import { feedList } from "./paging.ts"
import { createdQuery, oneOfParam, pagingQuery } from "./query.ts"

// Not imported from definition.ts: that module imports this one.
const PREFIX = "/api/v1"

const DATE_FORMATS =
  "a date (YYYY-MM-DD, midnight UTC) or a date-time (YYYY-MM-DDThh:mm[:ss[.fff]] with Z or an offset; none means UTC)"

const TypeParam = oneOfParam(
  WEBHOOK_EVENTS,
  "Only events of this name; an unknown name is a 400, one about records the key cannot read a 403."
)

/** Checked and parsed by the schema (query.ts): the handler gets a number, canonical timestamps, an event name. */
export const EVENTS_QUERY = {
  ...pagingQuery("The nextCursor of the previous page, unchanged (same type and dates)."),
  ...createdQuery("events that happened", DATE_FORMATS),
  type: Schema.optional(TypeParam)
} as const

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

const EVENT_ID_DESCRIPTION =
  "The event's id. A webhook delivery of this event carries its delivery's id in the same place instead (one per event and destination, the same on every retry: webhook-id and Service-Delivery); match the two by event, data.id and createdAt."

const RECORD_EXAMPLES: Readonly<Record<Resource, unknown>> = Object.fromEntries(
  RESOURCES.map((r) => [r, (RECORD_SCHEMAS[r].ast.annotations?.examples as ReadonlyArray<unknown> | undefined)?.[0]])
) as Record<Resource, unknown>

/** One event kind's payload: the event name fixed, the record of its resource. */
const eventOf = <K extends EventKind>(kind: K) => {
  const payload = Schema.Struct({
    id: Schema.String.annotate({ description: EVENT_ID_DESCRIPTION }),
    event: Schema.Literal(kind),
    createdAt: Timestamp.annotate({
      description: "When the change that fired the event was committed; the same value as in its webhook deliveries"
    }),
    // Not annotated: that would make a second copy of the record's schema in the document. Its
    // record deleted since, the event keeps only its identifiers (docs/privacy.md).
    data: Schema.Union([
      RECORD_SCHEMAS[EVENT_RESOURCE[kind]] as (typeof RECORD_SCHEMAS)[(typeof EVENT_RESOURCE)[K]],
      DELETED_RECORD_SCHEMAS[EVENT_RESOURCE[kind]]
    ])
  })
  // The record example is its schema's own; the type cannot follow it through the generic kind.
  const example = {
    id: "7b0c2f59-1a60-4a0e-9d6c-3b1f3c1f2b10",
    event: kind,
    createdAt: "2026-03-08T10:15:42.317Z",
    data: RECORD_EXAMPLES[EVENT_RESOURCE[kind]]
  }
  return payload.annotate({
    identifier: eventSchemaName(kind),
    description: `${kind}: fired when ${EVENT_WHEN[kind]}. The body of its webhook deliveries, and an item of GET /api/v1/events. data is the ${EVENT_RESOURCE[kind]} record as it was when the event fired, exactly as GET /api/v1/${EVENT_RESOURCE[kind]}/{id} returned it then; once the record is deleted, its identifiers only (every other field null).`,
    examples: [example as unknown as typeof payload.Type]
  })
}

/** The payload schema of each event kind, by name. */
export const EVENT_SCHEMAS = Object.fromEntries(EVENT_KINDS.map((k) => [k, eventOf(k)])) as {
  readonly [K in EventKind]: ReturnType<typeof eventOf<K>>
}

const AlertData = Schema.Struct({
  destination: Schema.Struct({
    kind: Schema.Literals(["endpoint", "subscription"]),
    id: Schema.String,
    url: Schema.String,
    events: Schema.Array(Schema.Literals(WEBHOOK_EVENTS)).annotate({ description: "The events it takes" })
  }).annotate({ description: "The endpoint or subscription the alert is about" }),
  failedDeliveries: Schema.Int.annotate({
    description: "Its deliveries that failed every attempt since it began failing"
  }),
  lastError: Schema.NullOr(Schema.String).annotate({ description: "The error of the attempt that made the change" }),
  lastAttemptAt: Schema.NullOr(Timestamp),
  switchedOffAt: Schema.NullOr(Timestamp).annotate({ description: "webhook.switched_off: when; null otherwise" }),
  switchedOffBy: Schema.NullOr(Schema.String).annotate({
    description:
      'webhook.switched_off: "service" (15 fully failed deliveries in a row) or the admin who did it; null otherwise'
  })
}).annotate({ identifier: "WebhookAlert", description: "What an alert event says about a destination" })

/** One alert kind's payload: the event name fixed, the alert's data. */
const alertEventOf = <K extends AlertKind>(kind: K) =>
  Schema.Struct({
    id: Schema.String.annotate({ description: EVENT_ID_DESCRIPTION }),
    event: Schema.Literal(kind),
    createdAt: Timestamp.annotate({ description: "When the destination's state changed" }),
    data: AlertData
  }).annotate({
    identifier: alertSchemaName(kind),
    description: `${kind}: fired when ${ALERT_WHEN[kind]}. Sent to the company's endpoints that chose it (never to the destination it is about) and, for a subscription, to its key's own subscriptions to it.`
  })

/** The payload schema of each alert kind, by name. */
export const ALERT_SCHEMAS = Object.fromEntries(ALERT_KINDS.map((k) => [k, alertEventOf(k)])) as {
  readonly [K in AlertKind]: ReturnType<typeof alertEventOf<K>>
}

/** Any event: one of the event payloads, told apart by `event` (the document adds the discriminator). */
export const Event = Schema.Union(
  [...EVENT_KINDS.map((k) => EVENT_SCHEMAS[k]), ...ALERT_KINDS.map((k) => ALERT_SCHEMAS[k])],
  { mode: "oneOf" }
).annotate({
  identifier: "Event",
  description:
    "An event as webhooks deliver it, identified by the event's id: one of the event payloads (the eleven about records, the three alerts), told apart by event"
})

/** GET /api/v1/events in the documents: its summary and the paragraphs of its description. */
const LIST_DOC = {
  summary: `Events of the last ${EVENTS_WINDOW_DAYS} days`,
  description: [
    `Every event of the last ${EVENTS_WINDOW_DAYS} days this key could subscribe to: about records of the kinds it may read, in modules turned on now. Newest first, paged like the record lists.`,
    "Use it to catch up after your receiver was down: each event has the payload its webhooks carried. The webhooks permission is not needed."
  ]
}

export class EventsGroup extends HttpApiGroup.make("events")
  .add(
    feedList(`${PREFIX}/events`, EVENTS_QUERY, Event, "Newest first (by createdAt, then id)", LIST_DOC),
    HttpApiEndpoint.get("get", `${PREFIX}/events/:id`, {
      params: { id: Schema.String },
      success: Schema.Struct({ data: Event }),
      error: NotFound
    }).annotateMerge(
      OpenApi.annotations({
        summary: "One event",
        description: `404 when there is no such event of the last ${EVENTS_WINDOW_DAYS} days that this key can read.`
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Events, as webhooks deliver them" })) {}
