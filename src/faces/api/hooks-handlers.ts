// Handlers of /api/v1/hooks and /api/v1/replays/{id} (group in hooks.ts): thin wrappers over
// the Webhooks service, which checks the key's rights in the database at each request; its
// domain errors are the endpoints' answers. The deliveries list's cursor is the read API's
// (src/read/cursor.ts): signed, and bound to the subscription and the filters.
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { invalid } from "../../domain/errors.ts"
import { Webhooks } from "../../webhooks/service.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ApiPool } from "../../platform/db/api-pool.ts"
import {
  CURSOR_ERROR_MESSAGES,
  type CursorBinding,
  decodeCursor,
  encodeCursor,
  loadCursorKey
} from "../../read/cursor.ts"
import { ServiceApi } from "./definition.ts"
import { answering } from "../http/errors.ts"

export const HooksHandlers = HttpApiBuilder.group(ServiceApi, "hooks", (handlers) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    const { sql } = yield* ApiPool
    const cursorKey = yield* Effect.promise(() => loadCursorKey(sql))
    const own = Effect.map(Effect.service(CurrentKey), (key) => ({ keyId: key.keyId, companyId: key.companyId }))
    return handlers
      .handle("create", ({ payload, headers }) =>
        Effect.gen(function* () {
          const key = yield* own
          const idempotencyKey = headers["idempotency-key"]
          const r = yield* answering(
            idempotencyKey === undefined
              ? webhooks.createHook(key, payload)
              : webhooks.createHookOnce(key, payload, idempotencyKey)
          )
          // 201 also when the key already had this url and event (rule 3 of docs/api.md#webhook-subscriptions): the
          // answer is that subscription, on, as a retried subscribe expects.
          return r.subscription
        })
      )
      .handle("list", () => Effect.flatMap(own, (key) => answering(webhooks.listHooks(key))))
      .handle("get", ({ params }) => Effect.flatMap(own, (key) => answering(webhooks.getHook(key, params.id))))
      .handle("delete", ({ params }) => Effect.flatMap(own, (key) => answering(webhooks.deleteHook(key, params.id))))
      .handle("deliveries", ({ params, query }) =>
        Effect.gen(function* () {
          const key = yield* own
          const binding: CursorBinding = {
            companyId: key.companyId,
            resource: `hooks/${params.id.toLowerCase()}/deliveries`,
            filters: { status: query.status, createdAfter: query.createdAfter, createdBefore: query.createdBefore }
          }
          let after: { createdAt: string; id: string } | undefined
          if (query.cursor !== undefined) {
            const decoded = decodeCursor(cursorKey, binding, query.cursor)
            if ("error" in decoded) {
              // The key's own refusal (403, 404) comes first, as on every list.
              yield* answering(webhooks.getHook(key, params.id))
              return yield* invalid(CURSOR_ERROR_MESSAGES[decoded.error])
            }
            after = decoded.position
          }
          const page = yield* answering(
            webhooks.listHookDeliveries(key, params.id, {
              limit: query.limit,
              after,
              status: query.status,
              createdAfter: query.createdAfter,
              createdBefore: query.createdBefore
            })
          )
          return {
            data: page.data,
            nextCursor: page.next === null ? null : encodeCursor(cursorKey, binding, page.next)
          }
        })
      )
      .handle("delivery", ({ params }) =>
        Effect.flatMap(own, (key) => answering(webhooks.getHookDelivery(key, params.id, params.deliveryId)))
      )
      .handle("resend", ({ params }) =>
        Effect.flatMap(own, (key) => answering(webhooks.resendHookDelivery(key, params.id, params.deliveryId)))
      )
      .handle("recover", ({ params, payload }) =>
        Effect.flatMap(own, (key) => answering(webhooks.recoverHook(key, params.id, payload)))
      )
      .handle("recovery", ({ params }) =>
        Effect.flatMap(own, (key) => answering(webhooks.getHookRecovery(key, params.id)))
      )
  })
)
