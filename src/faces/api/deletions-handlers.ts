// Handler of GET /api/v1/deletions (group in deletions-api.ts, listing in src/read/deletions.ts).
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { Deletions } from "../../read/deletions.ts"
import { ServiceApi } from "./definition.ts"
import { json } from "./handlers.ts"

export const DeletionsHandlers = HttpApiBuilder.group(ServiceApi, "deletions", (handlers) =>
  Effect.gen(function* () {
    const deletions = yield* Deletions
    return handlers.handle("list", ({ query }) =>
      Effect.flatMap(Effect.service(CurrentKey), (key) => Effect.map(deletions.list(key, query), json))
    )
  })
)
