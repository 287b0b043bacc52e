// Requests that do not decode get a 400 naming what is wrong, instead of HttpApi's empty
// 400. The key is confirmed first (as a served request's statement would), so a key
// revoked a moment ago gets its 401 here too.
import { Effect, Layer } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { invalid } from "../../domain/errors.ts"
import { isResource } from "../../domain/resources.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { ApiKeys } from "../../access/keys/service.ts"
import { DELETIONS_PARAMS, EVENTS_PARAMS } from "../../read/lists.ts"
import { listParams, RequestErrors } from "./definition.ts"
import { HOOK_DELIVERIES_PARAMS } from "./hooks.ts"
import { describeQueryIssue } from "./query.ts"
import { STREAM_PARAMS } from "./stream-api.ts"

/** The query parameters an endpoint of the group takes, for the message about an unknown one. */
const queryParams = (group: string): ReadonlyArray<string> =>
  isResource(group)
    ? listParams(group)
    : group === "events"
      ? EVENTS_PARAMS
      : group === "deletions"
        ? DELETIONS_PARAMS
        : group === "hooks"
          ? HOOK_DELIVERIES_PARAMS
          : group === "stream"
            ? STREAM_PARAMS
            : []

export const RequestErrorsLive = Layer.unwrap(
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    return HttpApiMiddleware.layerSchemaErrorTransform(RequestErrors, (error, { group }) =>
      Effect.gen(function* () {
        const key = yield* Effect.serviceOption(CurrentKey)
        if (key._tag === "Some")
          yield* keys.standing(key.value, isResource(group.identifier) ? group.identifier : undefined)
        switch (error.kind) {
          case "Query":
            return yield* invalid(describeQueryIssue(error.cause.issue, queryParams(group.identifier)))
          case "Params":
          case "Headers":
            return yield* invalid(`invalid ${error.kind.toLowerCase()}: ${error.cause.message}`)
          case "Payload":
            return yield* invalid(`invalid request body: ${error.cause.message}`)
          default:
            return yield* Effect.fail(error)
        }
      })
    )
  })
)
