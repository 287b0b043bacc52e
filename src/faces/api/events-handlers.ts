// Handlers of GET /api/v1/events and /api/v1/events/{id}: answers built from the stored
// payloads by the read model (src/read/events.ts).
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { EventsFeed } from "../../read/events.ts"
import { ServiceApi } from "./definition.ts"
import { json } from "./handlers.ts"

export const EventsHandlers = HttpApiBuilder.group(ServiceApi, "events", (handlers) =>
  Effect.gen(function* () {
    const feed = yield* EventsFeed
    return handlers
      .handle("list", ({ query }) =>
        Effect.flatMap(Effect.service(CurrentKey), (key) => Effect.map(feed.list(key, query), json))
      )
      .handle("get", ({ params }) =>
        Effect.flatMap(Effect.service(CurrentKey), (key) => Effect.map(feed.get(key, params.id), json))
      )
  })
)
