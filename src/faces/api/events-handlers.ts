// Handlers of GET /api/v1/events and /api/v1/events/{id}: answers built from the stored
// payloads (events-feed.ts), refusals worded like the rest of the API.
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { cursorKey as makeCursorKey } from "../../read/cursor.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ServiceApi } from "./definition.ts"
import { BadRequest, Forbidden, NotFound } from "../http/errors.ts"
import { refusedResponse } from "./handlers.ts"
import { KeyDirectory } from "../../access/keys/directory.ts"
import { ApiPool } from "../../platform/db/api-pool.ts"
import { settingSecret } from "../../read/views.ts"
import { getEvent, listEvents, type FeedAnswer } from "../../read/events.ts"

const json = (body: string) => HttpServerResponse.text(body, { contentType: "application/json" })

export const EventsHandlers = HttpApiBuilder.group(ServiceApi, "events", (handlers) =>
  Effect.gen(function* () {
    const { sql } = yield* ApiPool
    const directory = yield* KeyDirectory
    const cursorKey = makeCursorKey(yield* Effect.promise(() => settingSecret(sql, "cursor_hmac_key")))
    const answer = (a: FeedAnswer) =>
      Effect.gen(function* () {
        const key = yield* CurrentKey
        switch (a._tag) {
          case "Body":
            return json(a.body)
          case "Refused":
            return yield* refusedResponse(key, undefined, a.state).pipe(Effect.provideService(KeyDirectory, directory))
          case "BadRequest":
            return yield* new BadRequest({ error: a.message })
          case "Forbidden":
            return yield* new Forbidden({ error: a.message })
          case "NotFound":
            return yield* new NotFound({ error: a.message })
        }
      })
    return handlers
      .handle("list", ({ query }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* answer(yield* Effect.promise(() => listEvents(sql, cursorKey, key, query)))
        })
      )
      .handle("get", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* answer(yield* Effect.promise(() => getEvent(sql, key, params.id)))
        })
      )
  })
)
