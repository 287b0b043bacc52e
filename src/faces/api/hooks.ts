// /api/v1/hooks: a key subscribes itself to events (docs/api.md#webhook-subscriptions:
// its rules and records). The group is declared here and added to ServiceApi in definition.ts, behind the
// same authentication and rate limit as every other group; the handlers are in
// hooks-handlers.ts (they need ServiceApi, which imports this file).
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { WEBHOOK_EVENTS } from "../../domain/event-kinds.ts"
import { FIELD_OPERATORS, LOGICAL_OPERATORS, MAX_FILTER_BYTES, MAX_FILTER_DEPTH } from "../../domain/filters/filter.ts"
import { MAX_RATE_LIMIT, MIN_RATE_LIMIT, ORDERINGS, PAYLOAD_MODES } from "../../webhooks/endpoints/validate.ts"
import {
  DEFAULT_DELIVERIES_LIMIT,
  DELIVERY_ATTEMPTS,
  DELIVERY_STATUSES,
  LIST_ATTEMPTS,
  RECOVER_WINDOW_DAYS,
  RESPONSE_EXCERPT_CHARS
} from "../../webhooks/subscriptions/hook-deliveries.ts"
import { IDEMPOTENCY_HOURS, MAX_IDEMPOTENCY_KEY_LENGTH } from "../../webhooks/subscriptions/idempotency.ts"
import { FILTER_DATE_FORMATS } from "../../domain/dates.ts"
import { BadRequest, Conflict, Forbidden, NotFound, Unauthorized } from "../http/errors.ts"
import {
  CREATE_HOOK_EXAMPLE,
  HOOK_DELIVERY_DETAIL_EXAMPLE,
  HOOK_DELIVERY_EXAMPLE,
  HOOK_EXAMPLE,
  HOOK_RECOVERY_EXAMPLE
} from "./examples.ts"
import { pageOf } from "./paging.ts"
import { createdQuery, oneOfParam, pagingQuery } from "./query.ts"

const HOOKS_PATH = "/api/v1/hooks"
const REPLAYS_PATH = "/api/v1/replays"

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

/**
 * An event name: text to the server, which checks it itself (so that a bad one gets the
 * Webhooks service's own 400 or 403), and an enum of the eleven names in the document.
 */
const EventName = (description: string) =>
  Schema.String.check(Schema.makeFilter(() => true, { toJsonSchema: () => ({ enum: [...WEBHOOK_EVENTS] }) })).annotate({
    description
  })

/** rateLimit and ordering as the body gives them; their bounds are checked by the Webhooks service (400). */
const RateLimitInput = Schema.NullOr(Schema.Finite).annotate({
  description: `At most this many deliveries a second to the url (decimals allowed), from ${MIN_RATE_LIMIT} to ${MAX_RATE_LIMIT}; null or left out: no limit`
})
const OrderingInput = Schema.Literals(ORDERINGS).annotate({
  description:
    "record: the events of one record arrive in the order they happened (a later one waits while an earlier one is retried); none or left out: no order"
})

/** A content filter: any JSON object to the schema; the Webhooks service checks it against the event's fields (400). */
export const FilterInput = Schema.Record(Schema.String, Schema.Unknown)
  // Any values under any keys: said outright, so generated clients type it as an open object.
  .check(Schema.makeFilter(() => true, { toJsonSchema: () => ({ additionalProperties: {} }) }))
  .annotate({
    description: `A content filter over the fields of the event's data (docs: events, content filters): {"<field>": <value or {operator: value}>}, operators ${FIELD_OPERATORS.join(" ")}, combined with ${LOGICAL_OPERATORS.join(" ")}; a plain value means $eq. At most ${MAX_FILTER_BYTES} bytes, ${MAX_FILTER_DEPTH} levels deep. An event that does not match makes no delivery.`,
    examples: [{ severity: { $in: ["serious", "critical"] } }]
  })
export const PayloadInput = Schema.Literals(PAYLOAD_MODES).annotate({
  description:
    "full (the default): data is the record; thin: data is {id, companyId, url} only, url the record's API address (GET it with your key)"
})

const recordFields = {
  id: Schema.String,
  name: Schema.String.annotate({ description: "Equals the event name" }),
  url: Schema.String.annotate({ description: "The https:// address the events are sent to" }),
  event: EventName("The event the subscription receives"),
  active: Schema.Boolean,
  createdAt: Timestamp,
  rateLimit: Schema.optionalKey(Schema.Finite).annotate({
    description: "Deliveries per second at most: present only when the subscriber set one"
  }),
  ordering: Schema.optionalKey(Schema.Literal("record")).annotate({
    description: "record: present only when the subscriber asked for order per record"
  }),
  filter: Schema.optionalKey(FilterInput).annotate({ description: "The content filter: present only when set" }),
  payload: Schema.optionalKey(Schema.Literal("thin")).annotate({
    description: "thin: present only when the subscriber asked for thin payloads"
  })
}

/** A subscription as GET answers it: never the secret. */
export const HookRecord = Schema.Struct(recordFields).annotate({
  identifier: "HookSubscription",
  description: "A subscription of the key to one event, as GET answers it: never the secret",
  examples: [HOOK_EXAMPLE]
})

/** A subscription as subscribing answers it: with the key's signing secret. */
export const CreatedHookRecord = Schema.Struct({
  ...recordFields,
  secret: Schema.String.annotate({
    description:
      "The key's signing secret (whsec_...); every subscription of the key shares it. Returned on subscribing only."
  })
}).annotate({
  identifier: "HookSubscriptionWithSecret",
  description: "A subscription as subscribing answers it: with the key's signing secret",
  examples: [{ ...HOOK_EXAMPLE, secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }]
})

export const CreateHook = Schema.Struct({
  url: Schema.String.annotate({ description: "An https:// address on the public internet" }),
  event: EventName("An event about records the key can read (GET /api/v1/hooks lists them)"),
  rateLimit: Schema.optionalKey(RateLimitInput),
  ordering: Schema.optionalKey(OrderingInput),
  filter: Schema.optionalKey(Schema.NullOr(FilterInput)).annotate({
    description: "A content filter (null: none); subscribing again with another replaces it, left out it stays"
  }),
  payload: Schema.optionalKey(PayloadInput)
}).annotate({
  identifier: "CreateHook",
  description: "What to subscribe to, and where to send it",
  examples: [CREATE_HOOK_EXAMPLE]
})

export const HookList = Schema.Struct({
  data: Schema.Array(HookRecord).annotate({ description: "The key's subscriptions, newest first" }),
  events: Schema.Array(EventName("An event name")).annotate({
    description: "The events the key may subscribe to: those about records it can read now"
  })
}).annotate({
  identifier: "HookList",
  description: "The key's subscriptions and what it may subscribe to",
  examples: [{ data: [HOOK_EXAMPLE], events: ["incident.created", "observation.created", "corrective_action.closed"] }]
})

// -----------------------------------------------------------------------------
// A subscription's deliveries, Send Again, recovery (docs/api.md#your-deliveries)

const NullableTimestamp = (description: string) => Schema.NullOr(Timestamp).annotate({ description })

const attemptFields = {
  number: Schema.Number.annotate({ description: "1 for the first attempt; Send Again and recoveries count on" }),
  startedAt: Timestamp,
  durationMs: Schema.Number.annotate({ description: "How long the attempt took, in milliseconds" }),
  status: Schema.NullOr(Schema.Number).annotate({
    description: "The HTTP status your receiver answered; null when it did not answer (see errorKind)"
  }),
  errorKind: Schema.NullOr(Schema.String).annotate({
    description:
      "Why the attempt failed: http (a status other than 2xx), timeout, connect, tls, dns, address (refused by the address rules), redirect, response...; null when it succeeded"
  }),
  error: Schema.NullOr(Schema.String).annotate({ description: "The failure in words; null when it succeeded" })
}

export const HookAttempt = Schema.Struct(attemptFields).annotate({
  identifier: "HookDeliveryAttempt",
  description: "One attempt of a delivery"
})

export const HookAttemptDetail = Schema.Struct({
  ...attemptFields,
  response: Schema.NullOr(Schema.String).annotate({
    description: `The start of your receiver's answer, at most ${RESPONSE_EXCERPT_CHARS} characters; null when it sent none`
  })
}).annotate({
  identifier: "HookDeliveryAttemptDetail",
  description: "One attempt of a delivery, with the start of the receiver's answer"
})

const deliveryFields = {
  id: Schema.String.annotate({
    description:
      "The delivery id: the webhook-id (and Service-Delivery) header and the body's id your receiver got, the same on every attempt, a resend and a recovery"
  }),
  subscriptionId: Schema.String,
  eventId: Schema.String.annotate({
    description: "The event's id: GET /api/v1/events/{eventId} answers its payload while this key may read its records"
  }),
  event: EventName("The event's name"),
  status: Schema.Literals(["pending", "held", "succeeded", "failed"]).annotate({
    description:
      "pending: due, or waiting for its next attempt; held: not sent while the subscription may not receive (heldReason says why); succeeded: your receiver answered 2xx; failed: every attempt failed"
  }),
  heldReason: Schema.NullOr(Schema.String).annotate({ description: "Why it is held; null unless held" }),
  createdAt: Timestamp,
  attemptCount: Schema.Number.annotate({ description: "Attempts made in all" }),
  lastAttemptAt: NullableTimestamp("When it was last attempted; null before its first attempt"),
  nextAttemptAt: NullableTimestamp("When it is attempted next; null unless pending (and not on the wire right now)"),
  finishedAt: NullableTimestamp("When it succeeded or failed for good; null while pending or held")
}

export const HookDelivery = Schema.Struct({
  ...deliveryFields,
  attempts: Schema.Array(HookAttempt).annotate({
    description: `Its latest ${LIST_ATTEMPTS} attempts, oldest first (GET the delivery for more, and your receiver's answers)`
  })
}).annotate({
  identifier: "HookDelivery",
  description: "A delivery of an event to the subscription: never the event's payload",
  examples: [HOOK_DELIVERY_EXAMPLE]
})

export const HookDeliveryDetail = Schema.Struct({
  ...deliveryFields,
  attempts: Schema.Array(HookAttemptDetail).annotate({
    description: `Its latest ${DELIVERY_ATTEMPTS} attempts, oldest first, each with the start of your receiver's answer`
  })
}).annotate({
  identifier: "HookDeliveryDetail",
  description: "A delivery with its attempts and the start of each answer: never the event's payload",
  examples: [HOOK_DELIVERY_DETAIL_EXAMPLE]
})

export const HookRecovery = Schema.Struct({
  id: Schema.NullOr(Schema.String).annotate({
    description: "The recovery's id (GET /api/v1/replays/{id}); null when there was nothing to send, so no job was made"
  }),
  subscriptionId: Schema.String,
  state: Schema.Literals(["running", "finished", "cancelled"]).annotate({
    description: "running while it sends; finished; cancelled (by an admin)"
  }),
  since: Timestamp.annotate({ description: "From here (not before the subscription was made)" }),
  until: Timestamp.annotate({ description: "Up to here (exclusive): when it was asked for" }),
  createdAt: Timestamp,
  finishedAt: NullableTimestamp("When it finished or was cancelled"),
  matched: Schema.Number.annotate({ description: "Events of the subscription in the range" }),
  queued: Schema.Number.annotate({
    description:
      "Deliveries it sends: those that failed, are held or waiting, and events never sent (each under its own delivery id)"
  }),
  skippedDelivered: Schema.Number.annotate({ description: "Delivered already: not sent again" }),
  skippedInFlight: Schema.Number.annotate({ description: "Being attempted when it was asked for: left as they are" }),
  progress: Schema.Struct({
    sent: Schema.Number.annotate({ description: "Attempted since it handed them over" }),
    inEngine: Schema.Number.annotate({ description: "Handed over, not attempted yet" }),
    skipped: Schema.Number.annotate({ description: "Found delivered or on the wire when their turn came" }),
    remaining: Schema.Number.annotate({ description: "Not sent yet (while running); left unsent (once cancelled)" })
  }),
  waiting: Schema.NullOr(Schema.String).annotate({
    description: "Why it sends nothing now (the subscription is turned off, another replay of it runs first); else null"
  })
}).annotate({
  identifier: "HookRecovery",
  description:
    "A recovery of a subscription: what failed or never went is sent again on the replay lane, at the service's replay rate",
  examples: [HOOK_RECOVERY_EXAMPLE]
})

export const RecoverHook = Schema.Struct({
  since: Schema.String.annotate({
    description: `Send again what failed or never went since this moment: ${FILTER_DATE_FORMATS}; at most ${RECOVER_WINDOW_DAYS} days back (events are kept ${RECOVER_WINDOW_DAYS} days)`
  })
}).annotate({
  identifier: "RecoverHook",
  description: "From when to recover",
  examples: [{ since: "2026-03-04T00:00:00Z" }]
})

const DeliveryStatusParam = oneOfParam(
  DELIVERY_STATUSES,
  "succeeded, failed, or pending (not finished: pending or held)"
)

/** Query of GET /api/v1/hooks/{id}/deliveries, checked and parsed by the schemas (query.ts). */
export const HOOK_DELIVERIES_QUERY = {
  ...pagingQuery("The nextCursor of the previous page, unchanged (same status and dates)."),
  status: Schema.optional(DeliveryStatusParam),
  ...createdQuery("deliveries made")
} as const

/** The query parameters of the hooks group, for the message about an unknown one. */
export const HOOK_DELIVERIES_PARAMS = Object.keys(HOOK_DELIVERIES_QUERY)

const IdempotencyHeaders = {
  "idempotency-key": Schema.optional(
    Schema.String.annotate({
      description: `Any unique text (a UUID), 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters: the same Idempotency-Key and body sent again within ${IDEMPOTENCY_HOURS} hours answers the first request's 201 (with the secret, to this key only) and changes nothing; the same Idempotency-Key with another body is a 409`
    })
  )
}

const IdParam = { id: Schema.String }
const DeliveryParams = { id: Schema.String, deliveryId: Schema.String }

export class HooksGroup extends HttpApiGroup.make("hooks")
  .add(
    HttpApiEndpoint.post("create", HOOKS_PATH, {
      payload: CreateHook,
      headers: IdempotencyHeaders,
      success: CreatedHookRecord.pipe(HttpApiSchema.status(201)),
      error: [BadRequest, Unauthorized, Forbidden, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Subscribe to an event",
        description: `Needs a key with the webhooks permission. 201 with the subscription and the key's signing secret. Subscribing again to the same url and event answers the existing subscription (turned on again if an admin had turned it off), never a duplicate; the rateLimit and ordering it gives replace the subscription's, those it leaves out stay. A key holds at most 50 subscriptions: a 51st is refused with 400. A rateLimit or ordering the service does not take is refused with 400 and changes nothing. With an Idempotency-Key header, a retry of the same body within ${IDEMPOTENCY_HOURS} hours answers the first 201 exactly; the same key with another body is a 409, and changes nothing.`
      })
    ),
    HttpApiEndpoint.get("list", HOOKS_PATH, { success: HookList, error: [Unauthorized, Forbidden] }).annotateMerge(
      OpenApi.annotations({
        summary: "This key's subscriptions and the events it may subscribe to",
        description:
          "Needs a key with the webhooks permission. Every subscription made with this key, newest first, and the events it may subscribe to now (those about records it can read)."
      })
    ),
    HttpApiEndpoint.get("get", `${HOOKS_PATH}/:id`, {
      params: IdParam,
      success: HookRecord,
      error: [Unauthorized, Forbidden, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "One subscription of this key (never the secret)",
        description:
          "Needs a key with the webhooks permission. 404 for a subscription that does not exist or was made with another key."
      })
    ),
    HttpApiEndpoint.delete("delete", `${HOOKS_PATH}/:id`, {
      params: IdParam,
      success: HttpApiSchema.NoContent,
      error: [Unauthorized, Forbidden, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Unsubscribe",
        description:
          "Needs a key with the webhooks permission. 204 with no body. 404 for a subscription that does not exist or was made with another key."
      })
    ),
    HttpApiEndpoint.get("deliveries", `${HOOKS_PATH}/:id/deliveries`, {
      params: IdParam,
      query: HOOK_DELIVERIES_QUERY,
      success: pageOf(HookDelivery, "Newest first (by createdAt, then id)"),
      error: [BadRequest, Unauthorized, Forbidden, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "The subscription's deliveries",
        description: `Needs a key with the webhooks permission; only the key's own subscriptions (404 otherwise). Every delivery of the last ${RECOVER_WINDOW_DAYS} days, newest first, paged with nextCursor (limit up to 200, ${DEFAULT_DELIVERIES_LIMIT} by default), each with its latest attempts: when, the status your receiver answered or why it failed, how long it took. Never the event's payload: GET /api/v1/events/{eventId} answers it while the key may read its records.`
      })
    ),
    HttpApiEndpoint.get("delivery", `${HOOKS_PATH}/:id/deliveries/:deliveryId`, {
      params: DeliveryParams,
      success: HookDeliveryDetail,
      error: [Unauthorized, Forbidden, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "One delivery, with its attempts",
        description: `Its latest ${DELIVERY_ATTEMPTS} attempts with the first ${RESPONSE_EXCERPT_CHARS} characters of each answer. 404 for a delivery of another subscription, or a subscription of another key.`
      })
    ),
    HttpApiEndpoint.post("resend", `${HOOKS_PATH}/:id/deliveries/:deliveryId/resend`, {
      params: DeliveryParams,
      success: HookDeliveryDetail.pipe(HttpApiSchema.status(202)),
      error: [Unauthorized, Forbidden, NotFound, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Send a delivery again",
        description:
          "Attempts it again at once, under the same delivery id (your receiver drops repeats by webhook-id). 202 with the delivery, pending. 403 when the key may no longer read the event's records; 409 while it is being attempted, or when the subscription may not receive now (turned off, a module off: the message says why). Counts in the key's rate limit like any request."
      })
    ),
    HttpApiEndpoint.post("recover", `${HOOKS_PATH}/:id/recover`, {
      params: IdParam,
      payload: RecoverHook,
      success: HookRecovery.pipe(HttpApiSchema.status(202)),
      error: [BadRequest, Unauthorized, Forbidden, NotFound, Conflict]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Recover what your receiver missed",
        description: `Sends again, under their own delivery ids and in the order the events happened, every event of the subscription since since (at most ${RECOVER_WINDOW_DAYS} days back, and not before the subscription was made) that failed, is still waiting or held, or was never sent; what was delivered is not sent again. It runs as a job beside live deliveries, at the service's replay rate per subscription: 202 with its counts, and GET /api/v1/replays/{id} follows it. One recovery of a subscription at a time (409 while one runs); 403 when the key may no longer read the event's records.`
      })
    ),
    HttpApiEndpoint.get("recovery", `${REPLAYS_PATH}/:id`, {
      params: IdParam,
      success: HookRecovery,
      error: [Unauthorized, Forbidden, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "A recovery's progress",
        description:
          "A recovery this key started (POST /api/v1/hooks/{id}/recover): its state, counts and progress. 404 for any other replay, an admin's included. Kept 30 days after it ends."
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Webhook subscriptions made by the key itself" })) {}
