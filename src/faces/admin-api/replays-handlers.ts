// Handlers of the admin HTTP API's replays group (replays.ts): the admin replay operations
// (src/webhooks/replay/manage.ts), always in the admin's own company.
import { userActor } from "../../access/activity.ts"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { byAdmin } from "./definition.ts"
import { replaysOf, showReplay, startReplay, stopReplay } from "../../webhooks/replay/manage.ts"
import { AdminApi, CurrentAdmin } from "./definition.ts"

export const ReplaysHandlers = HttpApiBuilder.group(AdminApi, "replays", (handlers) =>
  handlers
    .handle("createReplay", ({ payload }) =>
      byAdmin((a) =>
        Effect.map(startReplay(userActor(a), a.companyId, "api", payload), (r) => ("replay" in r ? r.replay : r.plan))
      )
    )
    .handle("listReplays", () =>
      Effect.gen(function* () {
        const a = yield* CurrentAdmin
        return { data: yield* replaysOf(a.companyId) }
      }).pipe(Effect.orDie)
    )
    .handle("getReplay", ({ params }) => byAdmin((a) => showReplay(a.companyId, params.id)))
    .handle("cancelReplay", ({ params }) => byAdmin((a) => stopReplay(userActor(a), a.companyId, params.id)))
)
