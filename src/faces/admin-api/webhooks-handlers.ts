// Handlers of the admin HTTP API's webhooks group (webhooks.ts): the Webhooks service,
// always scoped to the admin's own company.
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { userActor, type Actor as WebhookActor } from "../../access/activity.ts"
import { Webhooks } from "../../webhooks/service.ts"
import type { AdminUser } from "../../access/identity.ts"
import { AdminApi, CurrentAdmin } from "./definition.ts"
import { toHttpError } from "../http/errors.ts"


const ACTIVITY_LIMIT = 200

export const WebhooksHandlers = HttpApiBuilder.group(AdminApi, "webhooks", (handlers) =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    const admin = CurrentAdmin
    return handlers
      .handle("listEndpoints", () =>
        Effect.gen(function* () {
          const a = yield* admin
          return { data: yield* w.listEndpoints({ companyId: a.companyId }) }
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("createEndpoint", ({ payload }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.createEndpoint(userActor(a), { companyId: a.companyId, name: payload.name, url: payload.url, events: payload.events })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("getEndpoint", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.getEndpoint({ id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("updateEndpoint", ({ params, payload }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.updateEndpoint(userActor(a), { id: params.id, companyId: a.companyId, name: payload.name, url: payload.url, events: payload.events })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("rotateSecret", ({ params, payload }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.rotateEndpointSecret(userActor(a), { id: params.id, companyId: a.companyId, overlap: payload?.overlap })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("deleteEndpoint", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          yield* w.deleteEndpoint(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("enableEndpoint", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.enableEndpoint(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("testEndpoint", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.testEndpoint(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("endpointDeliveries", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return { data: yield* w.listEndpointDeliveries({ endpointId: params.id, companyId: a.companyId }) }
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("getDelivery", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.getDelivery({ id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("resendDelivery", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.resendDelivery(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("listSubscriptions", () =>
        Effect.gen(function* () {
          const a = yield* admin
          return { data: yield* w.listSubscriptions({ companyId: a.companyId }) }
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("disableSubscription", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.disableSubscription(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("enableSubscription", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return yield* w.enableSubscription(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("deleteSubscription", ({ params }) =>
        Effect.gen(function* () {
          const a = yield* admin
          yield* w.deleteSubscription(userActor(a), { id: params.id, companyId: a.companyId })
        }).pipe(Effect.mapError(toHttpError))
      )
      .handle("activity", ({ query }) =>
        Effect.gen(function* () {
          const a = yield* admin
          return { data: yield* w.listActivity({ companyId: a.companyId, limit: ACTIVITY_LIMIT, kind: query.kind }) }
        }).pipe(Effect.mapError(toHttpError))
      )
  })
)
