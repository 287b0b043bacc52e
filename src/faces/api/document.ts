// What the OpenAPI document says that the HttpApi schemas cannot: applied to the document
// generated from ServiceApi (definition.ts: OpenApi.annotations({ transform })), so the
// served /api/v1/openapi.json, the docs page and the client's generated types all have it.
//
// - response headers: RateLimit fields, Retry-After, WWW-Authenticate, ETag and the 304;
// - query parameters as what their text holds (limit: an integer; type: an event name);
// - the events feed's payload as a union discriminated by `event`;
// - the `webhooks` section: one entry per event kind, with its headers and payload.
import {
  ALERT_KINDS,
  ALERT_WHEN,
  alertSchemaName,
  EVENT_KINDS,
  EVENT_RESOURCE,
  EVENT_WHEN,
  eventSchemaName
} from "../../domain/event-kinds.ts"

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document is untyped JSON, walked by its keys
type Json = Record<string, any>

// -----------------------------------------------------------------------------
// Response headers

const RATE_LIMIT_HEADERS = {
  RateLimit: {
    description:
      'What the key has left in the current window and the seconds until that changes, e.g. "default";r=117;t=42 (IETF draft-ietf-httpapi-ratelimit-headers).',
    schema: { type: "string" }
  },
  "RateLimit-Policy": {
    description: 'The limit and its window in seconds, e.g. "default";q=120;w=60.',
    schema: { type: "string" }
  }
}

const ETAG_HEADER = {
  description:
    "A strong entity tag of this exact answer: send it as If-None-Match to get 304 while the answer is unchanged.",
  schema: { type: "string" }
}

/**
 * Adds the RateLimit fields to the answers, Retry-After to 429 and WWW-Authenticate to 401;
 * and to every GET the ETag of its 200 and its 304 for If-None-Match (fallback.ts, etag.ts).
 */
export const documentHeaders = (spec: Json): Json => {
  for (const item of Object.values<Json>(spec.paths ?? {})) {
    for (const [method, operation] of Object.entries<Json>(item)) {
      if (method === "get" && operation.responses?.["200"] !== undefined) {
        operation.responses["200"].headers = { ...operation.responses["200"].headers, ETag: ETAG_HEADER }
        operation.responses["304"] = {
          description:
            "Not Modified: the request's If-None-Match header named the ETag this answer has, so it is not sent again. No body; it still counts as a request.",
          headers: { ETag: ETAG_HEADER }
        }
      }
      for (const [status, response] of Object.entries<Json>(operation.responses ?? {})) {
        // Without a usable key there is no allowance to report, only the policy.
        const headers: Record<string, unknown> =
          status === "401" ? { "RateLimit-Policy": RATE_LIMIT_HEADERS["RateLimit-Policy"] } : { ...RATE_LIMIT_HEADERS }
        if (status === "429")
          headers["Retry-After"] = {
            description: "Seconds to wait before the next request.",
            schema: { type: "integer", minimum: 1 }
          }
        if (status === "401")
          headers["WWW-Authenticate"] = { description: 'Bearer realm="api"', schema: { type: "string" } }
        response.headers = { ...response.headers, ...headers }
      }
    }
  }
  return spec
}

// -----------------------------------------------------------------------------
// Text that holds something else

const FLATTENABLE = new Set(["type", "allOf", "description"])

/**
 * A query parameter or field that the server takes as text and checks itself is generated as
 * {type: "string", allOf: [<what the text holds>]}: limit {type: "integer", ...}, an event
 * name {enum: [...]}. Generators read that as an impossible intersection or as plain text,
 * so it is written as what it holds. Nothing else has that shape.
 */
export const flattenTextSchemas = (node: unknown): unknown => {
  if (Array.isArray(node)) return node.map(flattenTextSchemas)
  if (node === null || typeof node !== "object") return node
  const entries = Object.entries(node as Json).map(([k, v]) => [k, flattenTextSchemas(v)] as const)
  const o: Json = Object.fromEntries(entries)
  const inner = o.allOf?.[0]
  if (
    Array.isArray(o.allOf) &&
    o.allOf.length === 1 &&
    typeof o.type === "string" &&
    Object.keys(o).every((k) => FLATTENABLE.has(k)) &&
    inner !== null &&
    typeof inner === "object" &&
    inner.$ref === undefined
  ) {
    const { allOf: _allOf, ...outer } = o
    return { ...outer, ...inner }
  }
  return o
}

// -----------------------------------------------------------------------------
// Events: the union's discriminator, and the webhooks

const ref = (name: string) => `#/components/schemas/${name}`

/** The events feed's Event: oneOf the eleven payloads, told apart by `event`. */
export const documentEventUnion = (spec: Json): Json => {
  const event = spec.components?.schemas?.Event
  if (event?.oneOf !== undefined) {
    event.discriminator = {
      propertyName: "event",
      mapping: Object.fromEntries([
        ...EVENT_KINDS.map((k) => [k, ref(eventSchemaName(k))]),
        ...ALERT_KINDS.map((k) => [k, ref(alertSchemaName(k))])
      ])
    }
  }
  return spec
}

const text = (description: string, extra: Json = {}) => ({ description, schema: { type: "string", ...extra } })

const WEBHOOK_HEADERS = (kind: string): Array<Json> => [
  {
    name: "webhook-id",
    in: "header",
    required: true,
    ...text(
      "Standard Webhooks: the delivery's id, the same on every retry of this delivery (equals the body's id and Service-Delivery). Use it to drop repeats."
    )
  },
  {
    name: "webhook-timestamp",
    in: "header",
    required: true,
    ...text("Standard Webhooks: this attempt's time in unix seconds. Refuse one more than 5 minutes from now.", {
      pattern: "^[0-9]+$"
    })
  },
  {
    name: "webhook-signature",
    in: "header",
    required: true,
    ...text(
      'Standard Webhooks: "v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>">", keyed with the base64 decoding of what follows whsec_ in the signing secret. Compare in constant time. After a secret rotation, until its overlap ends, a second space-separated "v1,<base64>" made with the old secret follows: accept the delivery when any entry matches.',
      { pattern: "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$" }
    )
  },
  {
    name: "Service-Signature",
    in: "header",
    required: true,
    ...text(
      'Stripe\'s scheme: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256 of "<t>.<raw body>">, keyed with the whole whsec_... secret. Accept only a match compared in constant time with t within 5 minutes of now. After a secret rotation, until its overlap ends, a second ,v1=<hex> made with the old secret follows: accept the delivery when any v1 matches.',
      { pattern: "^t=[0-9]+(,v1=[0-9a-f]{64})+$" }
    )
  },
  {
    name: "Service-Event",
    in: "header",
    required: true,
    description: "The event name",
    schema: { type: "string", enum: [kind] }
  },
  {
    name: "Service-Delivery",
    in: "header",
    required: true,
    ...text("The delivery's id (equals the body's id and webhook-id)")
  },
  { name: "User-Agent", in: "header", required: true, ...text("Service-Webhooks/1", { enum: ["Service-Webhooks/1"] }) }
]

const WEBHOOK_DESCRIPTION = [
  "POSTed to the https:// address of every active subscription to this event (POST /api/v1/hooks) and of every admin-made endpoint that chose it, with Content-Type application/json.",
  "Verify a signature over the raw body, as received, before parsing it: either the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) or Service-Signature; both are made with the same whsec_... secret.",
  "Answer any 2xx within 10 seconds and do slow work after answering; redirects are not followed. A failed delivery is retried after 15 minutes, 1 hour, 4 hours, 12 hours and 1 day; a delivery may arrive more than once: webhook-id tells repeats. GET /api/v1/events has the same payloads for the last 30 days."
].join("\n\n")

const THIN_NOTE =
  'A destination with payload "thin" gets data {id, companyId, url} instead, url the record\'s API address; a destination with a filter gets only the events whose data matches it.'

/** OpenAPI 3.1 `webhooks`: the eleven record events and the three alerts, each with its headers and its payload. */
export const documentWebhooks = (spec: Json): Json => {
  const kinds = [
    ...EVENT_KINDS.map((kind) => ({
      kind: kind as string,
      schema: eventSchemaName(kind),
      summary: `${kind}: ${EVENT_WHEN[kind]}`,
      description: `Sent when ${EVENT_WHEN[kind]}; data is the ${EVENT_RESOURCE[kind]} record as GET /api/v1/${EVENT_RESOURCE[kind]}/{id} returned it then. ${THIN_NOTE}`
    })),
    ...ALERT_KINDS.map((kind) => ({
      kind: kind as string,
      schema: alertSchemaName(kind),
      summary: `${kind}: ${ALERT_WHEN[kind]}`,
      description: `Sent when ${ALERT_WHEN[kind]}; data says which destination and why. Never sent to the destination it is about; an API key hears only of its own subscriptions.`
    }))
  ]
  spec.webhooks = Object.fromEntries(
    kinds.map(({ kind, schema, summary, description }) => [
      kind,
      {
        post: {
          tags: ["webhooks"],
          operationId: `webhooks.${kind}`,
          summary,
          description: `${description}\n\n${WEBHOOK_DESCRIPTION}`,
          security: [],
          parameters: WEBHOOK_HEADERS(kind),
          requestBody: {
            required: true,
            description: "The delivery: id is the delivery's id.",
            content: { "application/json": { schema: { $ref: ref(schema) } } }
          },
          responses: {
            "2XX": { description: "Delivered. Any 2xx answered within 10 seconds; the body is not read." },
            "410": {
              description:
                "Gone: a subscription made through the API is deleted and the delivery not retried; to an admin's endpoint it is a failure like any other."
            },
            default: {
              description: "A failure (as are 3xx, a timeout and a refused connection): the delivery is retried later."
            }
          }
        }
      }
    ])
  )
  spec.tags = [
    ...(spec.tags ?? []),
    {
      name: "webhooks",
      description: "Deliveries the service POSTs to your receiver, one kind per event. Not requests you make."
    }
  ]
  return spec
}

/** Everything above, in order: the transform of ServiceApi's document. */
export const completeDocument = (spec: Json): Json =>
  documentWebhooks(documentEventUnion(flattenTextSchemas(documentHeaders(spec)) as Json))
