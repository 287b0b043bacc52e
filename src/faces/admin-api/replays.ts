// The admin HTTP API's replays (docs/operations.md#replays): a dry run that counts what would go where, a
// replay made and sent in its own lane (REPLAY_RATE per destination), its progress, the
// company's replays, cancel. Added to AdminApi in definition.ts; handlers in
// replays-handlers.ts.
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { BadRequest, Conflict, NotFound } from "../http/errors.ts"
import { FILTER_DATE_FORMATS } from "../../domain/dates.ts"
import { WEBHOOK_EVENTS } from "../../domain/event-kinds.ts"

// definition.ts's ADMIN_PREFIX (not imported: definition.ts imports this module).
const PREFIX = "/admin/v1"

const Timestamp = Schema.String.annotate({ format: "date-time", description: "ISO 8601 timestamp in UTC" })
const Count = Schema.Number
const Kind = Schema.Literals(["endpoint", "subscription"])

export const CreateReplay = Schema.Struct({
  endpointId: Schema.optional(Schema.String).annotate({ description: "The endpoint to replay to (or subscriptionId)" }),
  subscriptionId: Schema.optional(Schema.String).annotate({
    description: "The API subscription to replay to (or endpointId)"
  }),
  since: Schema.optional(Schema.String).annotate({
    description: `Events from this moment on: ${FILTER_DATE_FORMATS}. Default: when the destination was made`
  }),
  until: Schema.optional(Schema.String).annotate({
    description: `Events before this moment: ${FILTER_DATE_FORMATS}. Default: now`
  }),
  events: Schema.optional(Schema.Array(Schema.String)).annotate({
    description: `Only these events (${WEBHOOK_EVENTS.join(", ")}); default: all the destination takes`
  }),
  failedOnly: Schema.optional(Schema.Boolean).annotate({
    description: "Only events never delivered successfully to this destination; default false"
  }),
  dryRun: Schema.optional(Schema.Boolean).annotate({
    description: "Count what would be sent and where; send nothing. Default false"
  })
}).annotate({ identifier: "CreateWebhookReplay" })

export const ReplayPlanInfo = Schema.Struct({
  dryRun: Schema.Boolean.annotate({
    description: "true: a dry run; false: there was nothing to send, and no replay was made"
  }),
  destination: Schema.Struct({ kind: Kind, id: Schema.String, url: Schema.String, on: Schema.Boolean }),
  since: Timestamp,
  until: Timestamp,
  events: Schema.Array(Schema.String),
  failedOnly: Schema.Boolean,
  matched: Count.annotate({ description: "Events of the destination's kinds in the range" }),
  resend: Count.annotate({ description: "Existing deliveries that would go again with their own id" }),
  create: Count.annotate({ description: "Events the destination never had a delivery for: new deliveries" }),
  deliveries: Count.annotate({ description: "resend + create: what would be sent to the destination" }),
  skippedDelivered: Count.annotate({ description: "Already delivered (failedOnly)" }),
  skippedInFlight: Count.annotate({ description: "Being attempted right now: left alone" }),
  rate: Schema.Number.annotate({ description: "REPLAY_RATE: deliveries per second to one destination" }),
  estimatedSeconds: Count
}).annotate({ identifier: "WebhookReplayPlan" })

export const ReplayInfo = Schema.Struct({
  id: Schema.String,
  companyId: Schema.String,
  state: Schema.Literals(["running", "finished", "cancelled"]),
  destination: Schema.Struct({
    kind: Kind,
    id: Schema.String,
    url: Schema.NullOr(Schema.String),
    name: Schema.NullOr(Schema.String).annotate({ description: "The endpoint's name, or the subscription's event" }),
    on: Schema.Boolean
  }),
  since: Timestamp,
  until: Timestamp,
  events: Schema.Array(Schema.String),
  failedOnly: Schema.Boolean,
  source: Schema.String.annotate({ description: "Where it was made: api, pages or cli" }),
  createdBy: Schema.NullOr(Schema.String).annotate({
    description: "The admin's e-mail; null: the service (an operator's CLI replay), or an API key (byKey)"
  }),
  byKey: Schema.NullOr(Schema.Struct({ id: Schema.String, name: Schema.String })).annotate({
    description: "The API key that made it to recover its own subscription (POST /api/v1/hooks/{id}/recover); else null"
  }),
  createdAt: Timestamp,
  finishedAt: Schema.NullOr(Timestamp),
  cancelledBy: Schema.NullOr(Schema.String),
  plan: Schema.Struct({
    matched: Count,
    resend: Count,
    create: Count,
    skippedDelivered: Count,
    skippedInFlight: Count
  }).annotate({
    description: "What the dry run counted when it was made"
  }),
  progress: Schema.Struct({
    queued: Count.annotate({ description: "Deliveries the replay queued" }),
    sent: Count.annotate({ description: "Attempted since the replay handed them to the engine" }),
    inEngine: Count.annotate({ description: "Handed to the engine, not attempted yet" }),
    skipped: Count.annotate({
      description: "Being attempted, or (failedOnly) delivered, when their turn came; or gone"
    }),
    restored: Count.annotate({
      description: "Handed over but not attempted when it was cancelled: put back as they were"
    }),
    remaining: Count.annotate({ description: "Not sent: still to go while running; left unsent once cancelled" })
  }),
  waiting: Schema.NullOr(Schema.String).annotate({
    description: "Why a running replay sends nothing now (its destination is off, another replay to it runs first)"
  })
}).annotate({ identifier: "WebhookReplay" })

const IdParam = { id: Schema.String }

export class ReplaysGroup extends HttpApiGroup.make("replays")
  .add(
    HttpApiEndpoint.post("createReplay", `${PREFIX}/replays`, {
      payload: CreateReplay,
      success: [ReplayPlanInfo, ReplayInfo.pipe(HttpApiSchema.status(201))],
      error: [BadRequest, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        description:
          "With dryRun: counts what would be sent to the destination (200), and sends nothing. Without: makes the replay (201), sent at REPLAY_RATE per destination behind live deliveries; 200 with the plan when there is nothing to send."
      })
    ),
    HttpApiEndpoint.get("listReplays", `${PREFIX}/replays`, {
      success: Schema.Struct({ data: Schema.Array(ReplayInfo) })
    }).annotateMerge(OpenApi.annotations({ description: "The company's last 50 replays, newest first." })),
    HttpApiEndpoint.get("getReplay", `${PREFIX}/replays/:id`, {
      params: IdParam,
      success: ReplayInfo,
      error: NotFound
    }).annotateMerge(OpenApi.annotations({ description: "A replay and its progress." })),
    HttpApiEndpoint.post("cancelReplay", `${PREFIX}/replays/:id/cancel`, {
      params: IdParam,
      success: ReplayInfo,
      error: [NotFound, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        description:
          "Stops a running replay: what it has not sent yet is left as it was (unattempted deliveries it had handed over are put back); nothing sent is undone. 409 once it finished or was cancelled."
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Replays of a destination's events after an outage" })) {}
