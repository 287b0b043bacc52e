// Handlers of the read API. Records are answered from stored JSON (src/read/views.ts), so the
// handlers return prebuilt responses: the endpoints' schemas document them (and the tests
// check every answer against that document), but are never run on them. GET /api/v1 is
// small and goes through its schema. A refusal is the read model's domain error, answered by
// HttpApi as the endpoint declares it.
import { Effect, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder, type HttpApiGroup } from "effect/http-api"
import { ALERT_KINDS, EVENT_KINDS, EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { RESOURCES, type Resource } from "../../domain/resources.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ApiKeys } from "../../access/keys/service.ts"
import type { Json } from "../../read/served.ts"
import { Views } from "../../read/views.ts"
import { API_PREFIX, ServiceApi } from "./definition.ts"

/** Stored JSON, as text or as the bytes PostgreSQL sent. */
export const json = (body: Json) =>
  typeof body === "string"
    ? HttpServerResponse.text(body, { contentType: "application/json" })
    : HttpServerResponse.uint8Array(body, { contentType: "application/json" })

export const RootHandlers = HttpApiBuilder.group(ServiceApi, "api", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    return handlers.handle("index", () =>
      Effect.gen(function* () {
        const key = yield* CurrentKey
        // Read from the database just now, not from memory: what the key can read at this moment.
        const now = yield* keys.standing(key, undefined)
        return {
          company: { id: key.companyId, name: now.companyName },
          key: {
            id: key.keyId,
            name: now.keyName,
            expiresAt: now.expiresAt === null ? null : now.expiresAt.toISOString(),
            webhooks: now.webhooks
          },
          resources: now.readable.map((name) => ({ name, path: `${API_PREFIX}/${name}` })),
          events: now.webhooks
            ? [...EVENT_KINDS.filter((e) => now.readable.includes(EVENT_RESOURCE[e])), ...ALERT_KINDS]
            : []
        }
      })
    )
  })
)

/**
 * The list and get handlers of one resource. Every resource group has the same two
 * endpoints; only the record schema (documentation) and the filters differ, and the
 * handlers answer with stored text, so one implementation serves all fourteen.
 */
const resourceHandlers = (resource: Resource) =>
  HttpApiBuilder.group(ServiceApi, resource as "incidents", (handlers) =>
    Effect.gen(function* () {
      const views = yield* Views
      // The two hottest endpoints: plain combinators, no generator per request.
      return handlers
        .handle("list", ({ query }) =>
          Effect.flatMap(Effect.service(CurrentKey), (key) => Effect.map(views.list(key, resource, query), json))
        )
        .handle("get", ({ params }) =>
          Effect.flatMap(Effect.service(CurrentKey), (key) => Effect.map(views.get(key, resource, params.id), json))
        )
    })
  )

/** The handlers of all fourteen resource groups. */
export const ResourceHandlers = Layer.mergeAll(
  ...(RESOURCES.map(resourceHandlers) as [ReturnType<typeof resourceHandlers>])
) as Layer.Layer<HttpApiGroup.Service<"service", Resource>, never, Views>
