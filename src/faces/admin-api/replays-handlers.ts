// Handlers of the admin HTTP API's replays group (replays.ts): the admin replay operations
// (src/webhooks/replay/manage.ts), always in the admin's own company.
import { userActor } from "../../access/activity.ts"
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { toHttpError } from "../http/errors.ts"
import { replaysOf, showReplay, startReplay, stopReplay } from "../../webhooks/replay/manage.ts"
import { AdminApi, CurrentAdmin } from "./definition.ts"

export const ReplaysHandlers = HttpApiBuilder.group(AdminApi, "replays", (handlers) =>
  handlers
    .handle("createReplay", ({ payload }) =>
      Effect.gen(function* () {
        const a = yield* CurrentAdmin
        const r = yield* startReplay(userActor(a), a.companyId, "api", payload)
        return "replay" in r ? r.replay : r.plan
      }).pipe(Effect.mapError(toHttpError))
    )
    .handle("listReplays", () =>
      Effect.gen(function* () {
        const a = yield* CurrentAdmin
        return { data: yield* replaysOf(a.companyId) }
      }).pipe(Effect.orDie)
    )
    .handle("getReplay", ({ params }) =>
      Effect.gen(function* () {
        const a = yield* CurrentAdmin
        return yield* showReplay(a.companyId, params.id)
      }).pipe(Effect.mapError(toHttpError))
    )
    .handle("cancelReplay", ({ params }) =>
      Effect.gen(function* () {
        const a = yield* CurrentAdmin
        return yield* stopReplay(userActor(a), a.companyId, params.id)
      }).pipe(Effect.mapError(toHttpError))
    )
)
