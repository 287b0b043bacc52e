// Handlers of /api/v1/hooks (group in hooks.ts): thin wrappers over the Webhooks service,
// which checks the key's rights in the database at each request; its domain errors are the
// endpoints' answers.
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Webhooks } from "../../webhooks/service.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ServiceApi } from "./definition.ts"
import { answering } from "../http/errors.ts"

export const HooksHandlers = HttpApiBuilder.group(ServiceApi, "hooks", (handlers) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          const r = yield* answering(webhooks.createHook({ keyId: key.keyId, companyId: key.companyId }, payload))
          // 201 also when the key already had this url and event (rule 3 of docs/api.md#webhook-subscriptions): the
          // answer is that subscription, on, as a retried subscribe expects.
          return r.subscription
        })
      )
      .handle("list", () =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* answering(webhooks.listHooks({ keyId: key.keyId, companyId: key.companyId }))
        })
      )
      .handle("get", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          return yield* answering(webhooks.getHook({ keyId: key.keyId, companyId: key.companyId }, params.id))
        })
      )
      .handle("delete", ({ params }) =>
        Effect.gen(function* () {
          const key = yield* CurrentKey
          yield* answering(webhooks.deleteHook({ keyId: key.keyId, companyId: key.companyId }, params.id))
        })
      )
  })
)
