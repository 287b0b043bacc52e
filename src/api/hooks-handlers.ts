// Handlers of /api/v1/hooks (group in hooks.ts): thin wrappers over the Webhooks service,
// which checks the key's rights in the database at each request.
import { Effect } from "effect"
import { HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Webhooks } from "../webhooks/service.ts"
import { CurrentKey } from "./current-key.ts"
import { ServiceApi } from "./definition.ts"
import { webhookErrorToHttp } from "./errors.ts"

export const HooksHandlers = HttpApiBuilder.group(ServiceApi, "hooks", (handlers) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          const r = yield* webhooks.createHook({ keyId: key.keyId, companyId: key.companyId }, payload).pipe(Effect.mapError(webhookErrorToHttp))
          // A repeated subscribe answers 200 with the existing subscription (201 is the schema's first success).
          if (!r.created) return HttpServerResponse.jsonUnsafe(r.subscription, { status: 200 })
          return r.subscription
        })
      )
      .handle("list", () =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* webhooks.listHooks({ keyId: key.keyId, companyId: key.companyId }).pipe(Effect.mapError(webhookErrorToHttp))
        })
      )
      .handle("get", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* webhooks.getHook({ keyId: key.keyId, companyId: key.companyId }, params.id).pipe(Effect.mapError(webhookErrorToHttp))
        })
      )
      .handle("delete", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* webhooks.deleteHook({ keyId: key.keyId, companyId: key.companyId }, params.id).pipe(Effect.mapError(webhookErrorToHttp))
        })
      )
  })
)
