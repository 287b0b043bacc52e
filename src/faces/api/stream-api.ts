// GET /api/v1/stream and /api/v1/consumers as an HttpApi group, for src/faces/api/definition.ts;
// the handlers are in stream-handlers.ts, the reads in src/read/stream.ts. The rules:
// docs/integrators.md#following-the-stream.
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { RESOURCES } from "../../domain/resources.ts"
import { MAX_CONSUMERS } from "../../read/stream-consumers.ts"
import { STREAM_DEFAULT_LIMIT, STREAM_MAX_LIMIT, STREAM_MAX_WAIT, STREAM_WINDOW_DAYS } from "../../read/stream.ts"
import { BadRequest, Conflict, Forbidden, NotFound, TooManyRequests } from "../http/errors.ts"

const PREFIX = "/api/v1"

const Timestamp = Schema.String.annotate({
  description: "ISO 8601 timestamp in UTC with milliseconds",
  format: "date-time"
})

// Kept as text: the handler parses it (a plain schema keeps the document's integer type).
export const WaitParam = Schema.String.check(
  Schema.makeFilter(
    (t: string) =>
      (/^[0-9]{1,2}$/.test(t) && Number(t) >= 1 && Number(t) <= STREAM_MAX_WAIT) ||
      `must be an integer from 1 to ${STREAM_MAX_WAIT}`,
    {
      toJsonSchema: () => ({ type: "integer", minimum: 1, maximum: STREAM_MAX_WAIT })
    }
  )
).annotate({
  description: `Long-poll: when nothing is new, wait up to this many seconds (1 to ${STREAM_MAX_WAIT}) for a change the key may read; the answer comes as soon as one is committed, or at the end with no items and the same nextOffset. A waiting request counts once against the rate limit.`
})
export const StreamLimitParam = Schema.String.check(
  Schema.makeFilter(
    (t: string) =>
      (/^[0-9]{1,4}$/.test(t) && Number(t) >= 1 && Number(t) <= STREAM_MAX_LIMIT) ||
      `must be an integer from 1 to ${STREAM_MAX_LIMIT}`,
    {
      toJsonSchema: () => ({ type: "integer", minimum: 1, maximum: STREAM_MAX_LIMIT, default: STREAM_DEFAULT_LIMIT })
    }
  )
).annotate({ description: `Most items in the answer: 1 to ${STREAM_MAX_LIMIT}; ${STREAM_DEFAULT_LIMIT} when absent.` })

const ResourcesParam = Schema.String.check(
  Schema.makeFilter(
    (t: string) =>
      (t.length > 0 && t.split(",").every((r) => (RESOURCES as ReadonlyArray<string>).includes(r))) ||
      `must be resources separated by commas, of ${RESOURCES.join(", ")}`,
    { toJsonSchema: () => ({ pattern: `^(${RESOURCES.join("|")})(,(${RESOURCES.join("|")}))*$` }) }
  )
).annotate({
  description:
    "Only changes of these resources, separated by commas (incidents,corrective-actions); absent: every resource the key may read. A resource the key may not read is a 403."
})

const AfterParam = Schema.String.check(
  Schema.makeFilter((t: string) => t.length > 0 || "must not be empty", { toJsonSchema: () => ({ minLength: 1 }) })
).annotate({
  description:
    "Resume strictly after this offset (an item's offset or an answer's nextOffset, unchanged, of a stream with the same resources); now: no items, and the present offset (after copying the lists); absent: from the oldest change kept. With Accept: text/event-stream, the Last-Event-ID header does the same."
})

export const STREAM_QUERY = {
  resources: Schema.optional(ResourcesParam),
  after: Schema.optional(AfterParam),
  wait: Schema.optional(WaitParam),
  limit: Schema.optional(StreamLimitParam)
} as const

/** The stream's query parameters, for the message about an unknown one. */
export const STREAM_PARAMS = ["resources", "after", "wait", "limit"] as const

export const CONSUMER_STREAM_QUERY = {
  wait: Schema.optional(WaitParam),
  limit: Schema.optional(StreamLimitParam)
} as const

const ITEM_EXAMPLE = {
  offset:
    "czF8dlRqTjJ5N3pkd3w0Y2I1ZmQ5ZGY0fDAwMDAwMDAwMDE2QjM4Mjh8M3xpbmNpZGVudHN8MGY4ZTJhNGMtNmIxZC00ZTNmLWE1YzctOWQxYjNmNWE3YzkwfDE3NzI5NjQ5NDIzMTc.bXb2x1f3eA2lQnGp",
  resource: "incidents",
  id: "0f8e2a4c-6b1d-4e3f-a5c7-9d1b3f5a7c90",
  op: "upsert",
  record: { id: "0f8e2a4c-6b1d-4e3f-a5c7-9d1b3f5a7c90", title: "Slip near loading dock" },
  committedAt: "2026-03-08T10:15:42.317Z"
}

export const StreamItem = Schema.Struct({
  offset: Schema.String.annotate({
    description: "Where this change is in commit order: pass it as after (or Last-Event-ID) to resume after it"
  }),
  resource: Schema.Literals(RESOURCES),
  id: Schema.String.annotate({ description: "The record's id" }),
  op: Schema.Literals(["upsert", "delete"]).annotate({
    description: "upsert: the record as it is after this commit; delete: it is gone"
  }),
  record: Schema.NullOr(Schema.Unknown).annotate({
    description:
      "The record exactly as GET /api/v1/<resource>/<id> shows it after this commit (the record schemas of each resource); null for a delete"
  }),
  committedAt: Timestamp.annotate({ description: "When the change was committed" })
}).annotate({ identifier: "StreamItem", description: "A record's change", examples: [ITEM_EXAMPLE as never] })

export const StreamPage = Schema.Struct({
  data: Schema.Array(StreamItem).annotate({ description: "In commit order" }),
  nextOffset: Schema.String.annotate({ description: "Pass as after next time; the same as after when nothing was new" })
}).annotate({ identifier: "StreamPage" })

/** 409: the stream cannot be continued from the offset given. */
export const MustRefetch = Schema.Struct({
  error: Schema.String,
  mustRefetch: Schema.Literal(true),
  since: Timestamp.annotate({ description: "The commit time of the offset given: your copy is complete up to it" })
})
  .annotate({
    identifier: "MustRefetch",
    description: `The stream cannot be continued exactly from this offset (older than the ${STREAM_WINDOW_DAYS} days kept; the service rebuilt its views after a lost replication slot, a fresh snapshot or rebuild-views; the resources the key may read changed). Copy the records again from the lists, then follow from after=now.`
  })
  .pipe(HttpApiSchema.status(409))

const Consumer = Schema.Struct({
  name: Schema.String,
  resources: Schema.NullOr(Schema.Array(Schema.Literals(RESOURCES))).annotate({
    description: "null: every resource the key may read"
  }),
  position: Schema.NullOr(Schema.String).annotate({
    description: "The offset last acknowledged; its stream answers from there (null: from the oldest change kept)"
  }),
  createdAt: Timestamp,
  updatedAt: Timestamp
}).annotate({ identifier: "Consumer", description: "A position in the stream the service keeps for this key" })

const NameParams = { name: Schema.String }

const PutConsumer = Schema.Struct({
  resources: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))).annotate({
    description: "The resources it follows; absent or null: every resource the key may read"
  }),
  after: Schema.optional(Schema.NullOr(Schema.String)).annotate({
    description:
      'Where it starts: "now" (the default for a new consumer, or one whose resources change), an offset of this consumer, or null for the oldest change kept. Absent on an existing consumer with the same resources: it keeps its position.'
  })
})

const Ack = Schema.Struct({
  offset: Schema.String.annotate({ description: "An item's offset or a nextOffset its stream answered" })
})

export class StreamGroup extends HttpApiGroup.make("stream")
  .add(
    HttpApiEndpoint.get("stream", `${PREFIX}/stream`, {
      query: STREAM_QUERY,
      success: StreamPage,
      error: [BadRequest, Forbidden, MustRefetch, TooManyRequests]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Every change the key may read, in commit order",
        description: [
          "The changes of the records the key may read, across the resources it names, in the order they were committed: each the record as GET /api/v1/<resource>/<id> shows it after that commit, or null once deleted. A record that changed several times between two reads may come once, at its latest change; a change is never skipped nor comes out of commit order, and once nextOffset is past a commit no later answer brings an earlier change.",
          `wait=<seconds> long-polls. Accept: text/event-stream streams the same items as server-sent events (event: change, id: the offset; resume with Last-Event-ID; a comment every 15 s), ending with event: must-refetch or event: error when it cannot go on. 409 with mustRefetch when the offset cannot be continued: copy the records again from the lists, then follow from after=now. A key has at most a bounded number of requests waiting at once (429 beyond).`
        ].join("\n\n")
      })
    ),
    HttpApiEndpoint.get("consumers", `${PREFIX}/consumers`, {
      success: Schema.Struct({ data: Schema.Array(Consumer) })
    }).annotateMerge(
      OpenApi.annotations({
        summary: "This key's consumers",
        description: "Every consumer made with this key, by name, with its resources and acknowledged position."
      })
    ),
    HttpApiEndpoint.put("put", `${PREFIX}/consumers/:name`, {
      params: NameParams,
      payload: PutConsumer,
      success: Consumer,
      error: [BadRequest, Conflict, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Create or change a consumer",
        description: `A position in the stream that the service keeps for this key (at most ${MAX_CONSUMERS} per key; a ${MAX_CONSUMERS + 1}st is a 409). Name: 1 to 64 letters, digits, dots, hyphens, underscores.`
      })
    ),
    HttpApiEndpoint.get("get", `${PREFIX}/consumers/:name`, {
      params: NameParams,
      success: Consumer,
      error: [BadRequest, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "One consumer of this key",
        description:
          "Its resources and acknowledged position. 404 for a consumer that does not exist or belongs to another key."
      })
    ),
    HttpApiEndpoint.delete("delete", `${PREFIX}/consumers/:name`, {
      params: NameParams,
      success: HttpApiSchema.NoContent,
      error: [BadRequest, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Delete a consumer",
        description: "204 with no body. 404 for a consumer that does not exist or belongs to another key."
      })
    ),
    HttpApiEndpoint.get("consumerStream", `${PREFIX}/consumers/:name/stream`, {
      params: NameParams,
      query: CONSUMER_STREAM_QUERY,
      success: StreamPage,
      error: [BadRequest, Forbidden, NotFound, MustRefetch, TooManyRequests]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "The consumer's changes from its position",
        description:
          "As GET /api/v1/stream, from the consumer's acknowledged position (the same items again until acknowledged), of its resources. 409 with mustRefetch as for the stream: copy again, then PUT the consumer with after=now."
      })
    ),
    HttpApiEndpoint.post("ack", `${PREFIX}/consumers/:name/ack`, {
      params: NameParams,
      payload: Ack,
      success: Consumer,
      error: [BadRequest, NotFound]
    }).annotateMerge(
      OpenApi.annotations({
        summary: "Acknowledge up to an offset",
        description:
          "Moves the consumer's position to this offset: never backwards (an older one leaves it where it is); an offset its stream never served is a 400."
      })
    )
  )
  .annotateMerge(OpenApi.annotations({ description: "Every change in commit order, for keeping a copy in step" })) {}
