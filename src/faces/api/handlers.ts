// Handlers of the read API. Records are answered from stored JSON (Views), so the handlers
// return prebuilt responses: the endpoints' schemas document them (and the tests check every
// answer against that document), but are never run on them. GET /api/v1 is small and goes
// through its schema.
import { Effect, Layer } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder, type HttpApiGroup } from "effect/http-api"
import { EVENT_KINDS, EVENT_RESOURCE } from "../../domain/event-kinds.ts"
import { isResource, RESOURCES, type Resource } from "../../domain/resources.ts"
import { UNAUTHORIZED_HEADERS } from "./auth.ts"
import { CurrentKey, type CurrentKeyShape } from "../../access/keys/current-key.ts"
import { API_PREFIX, ServiceApi } from "./definition.ts"
import { errorResponse, NotFound } from "../http/errors.ts"
import type { KeyState } from "../../access/keys/key-check.ts"
import { KeyDirectory } from "../../access/keys/directory.ts"
import { Views } from "../../read/views.ts"

/** Stored JSON, as text or as the bytes PostgreSQL sent. */
const json = (body: string | Uint8Array) =>
  typeof body === "string"
    ? HttpServerResponse.text(body, { contentType: "application/json" })
    : HttpServerResponse.uint8Array(body, { contentType: "application/json" })

const STATE_REFUSALS: Readonly<
  Record<Exclude<KeyState, "ok">, { readonly status: 401 | 403; readonly message: string }>
> = {
  unknown: { status: 401, message: "unknown API key" },
  revoked: { status: 401, message: "this API key was revoked" },
  expired: { status: 401, message: "this API key expired" },
  host: { status: 401, message: "this API key belongs to another company: use it at your company's own address" },
  company: { status: 403, message: "the API is not available for this company" },
  module: { status: 403, message: "this module is turned off for this company" }
}

/** The answer when the statement's own check refused the key (it changed since it was remembered). */
export const refusedResponse = (key: CurrentKeyShape, resource: Resource | undefined, state: Exclude<KeyState, "ok">) =>
  Effect.gen(function* () {
    const directory = yield* KeyDirectory
    const refusal = (yield* directory.explain(key.keyId, key.host, resource)) ?? STATE_REFUSALS[state]
    return errorResponse(refusal.status, refusal.message, refusal.status === 401 ? UNAUTHORIZED_HEADERS : undefined)
  })

export const RootHandlers = HttpApiBuilder.group(ServiceApi, "api", (handlers) =>
  Effect.gen(function* () {
    const views = yield* Views
    const directory = yield* KeyDirectory
    return handlers.handle("index", () =>
      Effect.gen(function* () {
        const key = yield* CurrentKey
        const now = yield* views.check(key, undefined)
        if (now.state !== "ok") {
          return yield* refusedResponse(key, undefined, now.state).pipe(Effect.provideService(KeyDirectory, directory))
        }
        // Read from the database just now, not from memory: what the key can read at this moment.
        const scopes = new Set((now.k_scopes ?? []).filter(isResource))
        const modules = new Set(now.c_modules ?? [])
        const readable = RESOURCES.filter((r) => scopes.has(r) && modules.has(r))
        const webhooks = now.k_webhooks === true
        return {
          company: { id: key.companyId, name: now.c_name ?? key.companyName },
          key: {
            id: key.keyId,
            name: now.k_name ?? key.keyName,
            expiresAt: now.k_expires_at === null ? null : now.k_expires_at.toISOString(),
            webhooks
          },
          resources: readable.map((name) => ({ name, path: `${API_PREFIX}/${name}` })),
          events: webhooks ? EVENT_KINDS.filter((e) => readable.includes(EVENT_RESOURCE[e])) : []
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
      const directory = yield* KeyDirectory
      const refused = (key: CurrentKeyShape, state: Exclude<KeyState, "ok">) =>
        refusedResponse(key, resource, state).pipe(Effect.provideService(KeyDirectory, directory))
      // The two hottest endpoints: plain combinators, no generator per request.
      return handlers
        .handle("list", ({ query }) =>
          Effect.flatMap(Effect.service(CurrentKey), (key) =>
            Effect.flatMap(views.list(key, resource, query), (served) =>
              served._tag === "Body"
                ? Effect.succeed(json(served.body))
                : refused(key, served.state as Exclude<KeyState, "ok">)
            )
          )
        )
        .handle("get", ({ params }) =>
          Effect.flatMap(Effect.service(CurrentKey), (key) =>
            Effect.flatMap(views.get(key, resource, params.id), (served) => {
              if (served === undefined)
                return Effect.fail(new NotFound({ error: `no ${resource} record with id ${params.id}` }))
              return served._tag === "Body"
                ? Effect.succeed(json(served.body))
                : refused(key, served.state as Exclude<KeyState, "ok">)
            })
          )
        )
    })
  )

/** The handlers of all fourteen resource groups. */
export const ResourceHandlers = Layer.mergeAll(
  ...(RESOURCES.map(resourceHandlers) as [ReturnType<typeof resourceHandlers>])
) as Layer.Layer<HttpApiGroup.Service<"service", Resource>, never, Views | KeyDirectory>
