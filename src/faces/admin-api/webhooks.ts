// The admin HTTP API's webhook operations (docs/api.md#the-admin-api): endpoints (create, update, rotate the
// secret, delete, Turn On, send a test event, the last 25 deliveries), Send Again, the
// subscriptions keys made through the API (list, turn off or on, delete) and the activity
// log. Always the admin's own company. Added to AdminApi in definition.ts; the handlers are
// in webhooks-handlers.ts (they need AdminApi, which imports this file).
import { ACTIVITY_FILTERS } from "../../access/activity.ts"
import { Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { BadRequest, Conflict, Forbidden, NotFound } from "../http/errors.ts"
import { WEBHOOK_EVENTS } from "../../domain/event-kinds.ts"
import { MAX_RATE_LIMIT, MIN_RATE_LIMIT, ORDERINGS, PAYLOAD_MODES } from "../../webhooks/endpoints/validate.ts"
import { FilterInput, PayloadInput } from "../api/hooks.ts"

// definition.ts's ADMIN_PREFIX (not imported: definition.ts imports this module).
const PREFIX = "/admin/v1"

const Timestamp = Schema.String.annotate({ format: "date-time", description: "ISO 8601 timestamp in UTC" })
const Events = Schema.Array(Schema.String).annotate({ description: `Event names: ${WEBHOOK_EVENTS.join(", ")}` })

/** rateLimit and ordering as the body gives them; their bounds are checked by the Webhooks service (400). */
const RateLimitInput = Schema.NullOr(Schema.Finite).annotate({
  description: `At most this many deliveries a second to the url (decimals allowed), from ${MIN_RATE_LIMIT} to ${MAX_RATE_LIMIT}; null or left out: no limit`
})
const OrderingInput = Schema.Literals(ORDERINGS).annotate({
  description:
    "record: the events of one record arrive in the order they happened (a later one waits while an earlier one is retried); none or left out: no order"
})

export const CircuitInfo = Schema.Struct({
  state: Schema.Literals(["closed", "open", "half-open"]).annotate({
    description:
      "closed: deliveries go; open (after 5 timeouts or refused connections in a row): deliveries that fall due are recorded as not sent until a probe gets an answer; half-open: the probe is on its way"
  }),
  failures: Schema.Number.annotate({ description: "Timeouts or refused connections in a row that opened it" }),
  openedAt: Schema.NullOr(Timestamp),
  nextProbeAt: Schema.NullOr(Timestamp).annotate({ description: "The next delivery due from then is the probe" }),
  probes: Schema.Number.annotate({ description: "Probes that got no answer since it opened" }),
  lastError: Schema.NullOr(Schema.String)
}).annotate({ identifier: "WebhookCircuit", description: "The destination's circuit breaker" })

const deliveryOptions = {
  rateLimit: Schema.NullOr(Schema.Finite).annotate({ description: "Deliveries per second at most; null: no limit" }),
  ordering: Schema.Literals(ORDERINGS).annotate({
    description: "record: the events of one record arrive in the order they happened; none: no order"
  }),
  circuit: CircuitInfo,
  filter: Schema.NullOr(FilterInput).annotate({ description: "The content filter; null: every event it takes" }),
  payload: Schema.Literals(PAYLOAD_MODES).annotate({
    description: "full: data is the record; thin: data is {id, companyId, url} only"
  })
}

export const EndpointInfo = Schema.Struct({
  id: Schema.String,
  companyId: Schema.String,
  name: Schema.String,
  url: Schema.String,
  events: Events,
  enabled: Schema.Boolean.annotate({
    description: "false once switched off after 15 failed deliveries in a row, until Turn On"
  }),
  disabledReason: Schema.NullOr(Schema.String),
  disabledAt: Schema.NullOr(Timestamp),
  consecutiveFailures: Schema.Number,
  createdAt: Timestamp,
  createdBy: Schema.NullOr(Schema.String),
  updatedAt: Timestamp,
  secretRotatedAt: Schema.NullOr(Timestamp),
  previousSecretExpiresAt: Schema.NullOr(Timestamp).annotate({
    description:
      "Until when the secret the last rotation replaced still signs deliveries beside the current one; null when it no longer does"
  }),
  ...deliveryOptions
}).annotate({ identifier: "WebhookEndpoint" })

export const EnabledEndpoint = Schema.Struct({
  ...EndpointInfo.fields,
  replayWhatFailed: Schema.NullOr(
    Schema.Struct({
      endpointId: Schema.String,
      since: Timestamp,
      until: Timestamp,
      events: Events,
      failedOnly: Schema.Literal(true)
    })
  ).annotate({
    description:
      "Set when this Turn On turned it on: the failing streak and the time it was off. POST it to /admin/v1/replays (with dryRun first) to send what failed or was missed meanwhile"
  })
}).annotate({ identifier: "EnabledWebhookEndpoint" })

export const CreateEndpoint = Schema.Struct({
  name: Schema.String,
  url: Schema.String.annotate({ description: "An https:// address on the public internet" }),
  events: Events,
  rateLimit: Schema.optionalKey(RateLimitInput),
  ordering: Schema.optionalKey(OrderingInput),
  filter: Schema.optionalKey(Schema.NullOr(FilterInput)),
  payload: Schema.optionalKey(PayloadInput)
}).annotate({ identifier: "CreateWebhookEndpoint" })

export const CreatedEndpoint = Schema.Struct({
  id: Schema.String,
  secret: Schema.String.annotate({ description: "The signing secret (whsec_...): shown this once" }),
  endpoint: EndpointInfo
}).annotate({ identifier: "CreatedWebhookEndpoint" })

export const UpdateEndpoint = Schema.Struct({
  name: Schema.optional(Schema.String),
  url: Schema.optional(Schema.String),
  events: Schema.optional(Events),
  rateLimit: Schema.optionalKey(RateLimitInput),
  ordering: Schema.optionalKey(OrderingInput),
  filter: Schema.optionalKey(Schema.NullOr(FilterInput)).annotate({
    description: "null removes it; left out: unchanged"
  }),
  payload: Schema.optionalKey(PayloadInput)
}).annotate({ identifier: "UpdateWebhookEndpoint" })

export const RotateSecret = Schema.Struct({
  overlap: Schema.optional(
    Schema.String.annotate({
      description:
        "How long the old secret keeps signing deliveries beside the new one, so the receiver can switch when it likes: e.g. 24h (the default), 90m, 7d (the most), 3600s, 1h30m, or 0 for none",
      examples: ["24h", "0"]
    })
  )
}).annotate({ identifier: "RotateWebhookSecret" })

export const RotatedSecret = Schema.Struct({
  id: Schema.String,
  secret: Schema.String.annotate({
    description: "The new signing secret: shown this once; deliveries are signed with it at once"
  }),
  previousSecretExpiresAt: Schema.NullOr(Timestamp).annotate({
    description:
      "Until when the old secret still signs every delivery beside the new one (two v1 signatures in each header); null with no overlap"
  })
}).annotate({ identifier: "RotatedWebhookSecret" })

export const PingInfo = Schema.Struct({
  ok: Schema.Boolean,
  status: Schema.NullOr(Schema.Number).annotate({ description: "The receiver's HTTP status, when it answered" }),
  durationMs: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response: Schema.String.annotate({ description: "The start of the receiver's answer" }),
  deliveryId: Schema.String
}).annotate({ identifier: "WebhookPing" })

const deliveryFields = {
  id: Schema.String,
  event: Schema.String,
  eventId: Schema.String,
  recordId: Schema.String,
  endpointId: Schema.NullOr(Schema.String),
  subscriptionId: Schema.NullOr(Schema.String),
  state: Schema.String.annotate({ description: "pending, held, succeeded or failed" }),
  attempts: Schema.Number,
  lastStatus: Schema.NullOr(Schema.Number),
  lastError: Schema.NullOr(Schema.String),
  heldReason: Schema.NullOr(Schema.String),
  createdAt: Timestamp,
  lastAttemptAt: Schema.NullOr(Timestamp),
  nextAttemptAt: Schema.NullOr(Timestamp),
  finishedAt: Schema.NullOr(Timestamp)
}

export const DeliveryInfo = Schema.Struct(deliveryFields).annotate({ identifier: "WebhookDelivery" })

export const DeliveryDetail = Schema.Struct({
  ...deliveryFields,
  attemptLog: Schema.Array(
    Schema.Struct({
      number: Schema.Number,
      startedAt: Timestamp,
      durationMs: Schema.Number,
      status: Schema.NullOr(Schema.Number),
      error: Schema.NullOr(Schema.String),
      errorKind: Schema.NullOr(Schema.String),
      response: Schema.NullOr(Schema.String)
    })
  )
}).annotate({ identifier: "WebhookDeliveryDetail" })

export const SubscriptionInfo = Schema.Struct({
  id: Schema.String,
  companyId: Schema.String,
  keyId: Schema.String,
  keyName: Schema.NullOr(Schema.String),
  url: Schema.String,
  event: Schema.String,
  active: Schema.Boolean,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  ...deliveryOptions
}).annotate({ identifier: "WebhookSubscription" })

export const ActivityInfo = Schema.Struct({
  id: Schema.String,
  at: Timestamp,
  kind: Schema.String,
  subjectId: Schema.NullOr(Schema.String),
  actorId: Schema.NullOr(Schema.String),
  actorEmail: Schema.NullOr(Schema.String),
  details: Schema.Record(Schema.String, Schema.Unknown)
}).annotate({ identifier: "ActivityEntry" })

const IdParam = { id: Schema.String }
const data = <S extends Schema.Top>(item: S) => Schema.Struct({ data: Schema.Array(item) })

export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.get("listEndpoints", `${PREFIX}/endpoints`, { success: data(EndpointInfo), error: [BadRequest] }),
    HttpApiEndpoint.post("createEndpoint", `${PREFIX}/endpoints`, {
      payload: CreateEndpoint,
      success: CreatedEndpoint.pipe(HttpApiSchema.status(201)),
      error: [BadRequest, Forbidden, NotFound, Conflict]
    }).annotateMerge(OpenApi.annotations({ description: "The signing secret is in this answer only." })),
    HttpApiEndpoint.get("getEndpoint", `${PREFIX}/endpoints/:id`, {
      params: IdParam,
      success: EndpointInfo,
      error: NotFound
    }),
    HttpApiEndpoint.patch("updateEndpoint", `${PREFIX}/endpoints/:id`, {
      params: IdParam,
      payload: UpdateEndpoint,
      success: EndpointInfo,
      error: [BadRequest, Forbidden, NotFound, Conflict]
    }),
    HttpApiEndpoint.post("rotateSecret", `${PREFIX}/endpoints/:id/rotate-secret`, {
      params: IdParam,
      // The body may be left out (it is then null): the default overlap (24h) applies.
      payload: [RotateSecret, Schema.Null],
      success: RotatedSecret,
      error: [BadRequest, NotFound, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        description:
          "A new signing secret, shown this once; deliveries are signed with it at once. Until the overlap ends (24h unless the body says otherwise, at most 7d) they are signed with the old secret too, so the receiver switches when it likes.",
        // The body may be left out.
        transform: (op) =>
          op.requestBody === undefined ? op : { ...op, requestBody: { ...op.requestBody, required: false } }
      })
    ),
    HttpApiEndpoint.delete("deleteEndpoint", `${PREFIX}/endpoints/:id`, {
      params: IdParam,
      success: HttpApiSchema.NoContent,
      error: [NotFound, Conflict]
    }),
    HttpApiEndpoint.post("enableEndpoint", `${PREFIX}/endpoints/:id/enable`, {
      params: IdParam,
      success: EnabledEndpoint,
      error: [Forbidden, NotFound, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        description:
          "Turn On: the endpoint receives deliveries again; replayWhatFailed offers the replay of what it missed."
      })
    ),
    HttpApiEndpoint.post("testEndpoint", `${PREFIX}/endpoints/:id/test`, {
      params: IdParam,
      success: PingInfo,
      error: [BadRequest, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        description: "Sends a signed ping event now and shows the receiver's status, time and the start of its answer."
      })
    ),
    HttpApiEndpoint.get("endpointDeliveries", `${PREFIX}/endpoints/:id/deliveries`, {
      params: IdParam,
      success: data(DeliveryInfo),
      error: NotFound
    }).annotateMerge(OpenApi.annotations({ description: "The endpoint's last 25 deliveries, newest first." })),
    HttpApiEndpoint.get("getDelivery", `${PREFIX}/deliveries/:id`, {
      params: IdParam,
      success: DeliveryDetail,
      error: NotFound
    }),
    HttpApiEndpoint.post("resendDelivery", `${PREFIX}/deliveries/:id/resend`, {
      params: IdParam,
      success: DeliveryInfo,
      error: [NotFound, Conflict]
    }).annotate(OpenApi.Description, "Send Again: one attempt at once, with the same delivery id."),
    HttpApiEndpoint.get("listSubscriptions", `${PREFIX}/subscriptions`, {
      success: data(SubscriptionInfo),
      error: [BadRequest]
    }),
    HttpApiEndpoint.post("disableSubscription", `${PREFIX}/subscriptions/:id/disable`, {
      params: IdParam,
      success: SubscriptionInfo,
      error: NotFound
    }),
    HttpApiEndpoint.post("enableSubscription", `${PREFIX}/subscriptions/:id/enable`, {
      params: IdParam,
      success: SubscriptionInfo,
      error: NotFound
    }),
    HttpApiEndpoint.delete("deleteSubscription", `${PREFIX}/subscriptions/:id`, {
      params: IdParam,
      success: HttpApiSchema.NoContent,
      error: NotFound
    }),
    HttpApiEndpoint.get("activity", `${PREFIX}/activity`, {
      query: {
        kind: Schema.optional(Schema.Literals(ACTIVITY_FILTERS)).annotate({
          description: "Only this kind (e.g. endpoint.created), or a family (endpoint)"
        })
      },
      success: data(ActivityInfo),
      error: [BadRequest]
    }).annotateMerge(
      OpenApi.annotations({
        description: "The company's activity log, newest first: every change to an endpoint or subscription."
      })
    )
  )
  // A field the body does not take is refused (400), never silently dropped: {"name": "x",
  // "enabled": false} must not rename the endpoint and leave it on.
  .annotate(HttpApi.PayloadParseOptions, { onExcessProperty: "error", errors: "first" })
  .annotateMerge(
    OpenApi.annotations({
      description: "Webhook endpoints, deliveries, API-made subscriptions and the activity log of the admin's company"
    })
  ) {}
