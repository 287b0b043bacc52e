// Handler of GET /api/v1/deletions (group and listing in deletions.ts): refusals worded
// like the rest of the API.
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { cursorKey as makeCursorKey } from "../../read/cursor.ts"
import { ServiceApi } from "./definition.ts"
import { listDeletions } from "../../read/deletions.ts"
import { BadRequest, Forbidden } from "../http/errors.ts"
import { refusedResponse } from "./handlers.ts"
import { KeyDirectory } from "../../access/keys/directory.ts"
import { ApiPool } from "../../platform/db/api-pool.ts"
import { settingSecret } from "../../read/views.ts"

export const DeletionsHandlers = HttpApiBuilder.group(ServiceApi, "deletions", (handlers) =>
  Effect.gen(function* () {
    const { sql } = yield* ApiPool
    const directory = yield* KeyDirectory
    const cursorKey = makeCursorKey(yield* Effect.promise(() => settingSecret(sql, "cursor_hmac_key")))
    return handlers.handle("list", ({ query }) =>
      Effect.gen(function* () {
        const key = yield* CurrentKey
        const a = yield* Effect.promise(() => listDeletions(sql, cursorKey, key, query))
        switch (a._tag) {
          case "Body":
            return HttpServerResponse.text(a.body, { contentType: "application/json" })
          case "Refused":
            return yield* refusedResponse(key, a.resource, a.state).pipe(Effect.provideService(KeyDirectory, directory))
          case "BadRequest":
            return yield* new BadRequest({ error: a.message })
          case "Forbidden":
            return yield* new Forbidden({ error: a.message })
        }
      })
    )
  })
)
