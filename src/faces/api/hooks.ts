// /api/v1/hooks: a key subscribes itself to events (docs/api.md#webhook-subscriptions:
// its rules and records). The group is declared here and added to ServiceApi in definition.ts, behind the
// same authentication and rate limit as every other group; the handlers are in
// hooks-handlers.ts (they need ServiceApi, which imports this file).
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { EVENT_KINDS } from "../../domain/event-kinds.ts"
import { MAX_RATE_LIMIT, MIN_RATE_LIMIT, ORDERINGS } from "../../webhooks/endpoints/validate.ts"
import { BadRequest, Forbidden, NotFound, Unauthorized } from "../http/errors.ts"
import { CREATE_HOOK_EXAMPLE, HOOK_EXAMPLE } from "./examples.ts"

const HOOKS_PATH = "/api/v1/hooks"

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

/**
 * An event name: text to the server, which checks it itself (so that a bad one gets the
 * Webhooks service's own 400 or 403), and an enum of the eleven names in the document.
 */
const EventName = (description: string) =>
  Schema.String.check(Schema.makeFilter(() => true, { toJsonSchema: () => ({ enum: [...EVENT_KINDS] }) })).annotate({
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
  ordering: Schema.optionalKey(OrderingInput)
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

const IdParam = { id: Schema.String }

export class HooksGroup extends HttpApiGroup.make("hooks")
  .add(
    HttpApiEndpoint.post("create", HOOKS_PATH, {
      payload: CreateHook,
      success: CreatedHookRecord.pipe(HttpApiSchema.status(201)),
      error: [BadRequest, Unauthorized, Forbidden]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Subscribe to an event",
        description:
          "Needs a key with the webhooks permission. 201 with the subscription and the key's signing secret. Subscribing again to the same url and event answers the existing subscription (turned on again if an admin had turned it off), never a duplicate; the rateLimit and ordering it gives replace the subscription's, those it leaves out stay. A key holds at most 50 subscriptions: a 51st is refused with 400. A rateLimit or ordering the service does not take is refused with 400 and changes nothing."
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
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Webhook subscriptions made by the key itself" })) {}
