// Requests that do not decode get a 400 naming what is wrong, instead of HttpApi's empty
// 400. The key is confirmed first (as a served request's statement would), so a key
// revoked a moment ago gets its 401 here too.
import { Effect, Layer } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { isResource } from "../../domain/resources.ts"
import { CurrentKey } from "../../access/keys/current-key.ts"
import { listParams, RequestErrors } from "./definition.ts"
import { errorResponse } from "../http/errors.ts"
import { refusedResponse } from "./handlers.ts"
import { KeyDirectory } from "../../access/keys/directory.ts"
import { describeQueryIssue } from "./query.ts"
import { EVENTS_PARAMS } from "../../read/events.ts"
import { DELETIONS_PARAMS } from "../../read/deletions.ts"
import { Views } from "../../read/views.ts"

/** The query parameters an endpoint of the group takes, for the message about an unknown one. */
const queryParams = (group: string): ReadonlyArray<string> =>
  isResource(group)
    ? listParams(group)
    : group === "events"
      ? EVENTS_PARAMS
      : group === "deletions"
        ? DELETIONS_PARAMS
        : []

export const RequestErrorsLive = Layer.unwrap(
  Effect.gen(function* () {
    const views = yield* Views
    const directory = yield* KeyDirectory
    return HttpApiMiddleware.layerSchemaErrorTransform(RequestErrors, (error, { group }) =>
      Effect.gen(function* () {
        const resource = isResource(group.identifier) ? group.identifier : undefined
        const key = yield* Effect.serviceOption(CurrentKey)
        if (key._tag === "Some") {
          const now = yield* views.check(key.value, resource)
          if (now.state !== "ok") {
            return yield* refusedResponse(key.value, resource, now.state).pipe(
              Effect.provideService(KeyDirectory, directory)
            )
          }
        }
        switch (error.kind) {
          case "Query":
            return errorResponse(400, describeQueryIssue(error.cause.issue, queryParams(group.identifier)))
          case "Params":
          case "Headers":
            return errorResponse(400, `invalid ${error.kind.toLowerCase()}: ${error.cause.message}`)
          case "Payload":
            return errorResponse(400, `invalid request body: ${error.cause.message}`)
          default:
            return yield* Effect.fail(error)
        }
      })
    )
  })
)
