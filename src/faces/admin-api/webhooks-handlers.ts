// Handlers of the admin HTTP API's webhooks group (webhooks.ts): the Webhooks service,
// always scoped to the admin's own company.
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { userActor, type Actor as WebhookActor } from "../../access/activity.ts"
import { Webhooks } from "../../webhooks/service.ts"
import type { DomainError } from "../../domain/errors.ts"
import { AdminApi } from "./definition.ts"
import { byAdmin } from "./definition.ts"

const ACTIVITY_LIMIT = 200

/** Runs an operation as the admin calling, in their company; its domain errors are the endpoint's answers. */
const asAdmin = <A, R>(run: (actor: WebhookActor, companyId: string) => Effect.Effect<A, DomainError, R>) =>
  byAdmin((a) => run(userActor(a), a.companyId))

export const WebhooksHandlers = HttpApiBuilder.group(AdminApi, "webhooks", (handlers) =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    return handlers
      .handle("listEndpoints", () =>
        asAdmin((_, companyId) => Effect.map(w.listEndpoints({ companyId }), (data) => ({ data })))
      )
      .handle("createEndpoint", ({ payload }) =>
        asAdmin((actor, companyId) => w.createEndpoint(actor, { ...payload, companyId }))
      )
      .handle("getEndpoint", ({ params }) => asAdmin((_, companyId) => w.getEndpoint({ id: params.id, companyId })))
      .handle("updateEndpoint", ({ params, payload }) =>
        asAdmin((actor, companyId) => w.updateEndpoint(actor, { ...payload, id: params.id, companyId }))
      )
      .handle("rotateSecret", ({ params, payload }) =>
        asAdmin((actor, companyId) =>
          w.rotateEndpointSecret(actor, { id: params.id, companyId, overlap: payload?.overlap })
        )
      )
      .handle("deleteEndpoint", ({ params }) =>
        asAdmin((actor, companyId) => Effect.asVoid(w.deleteEndpoint(actor, { id: params.id, companyId })))
      )
      .handle("enableEndpoint", ({ params }) =>
        asAdmin((actor, companyId) => w.enableEndpoint(actor, { id: params.id, companyId }))
      )
      .handle("testEndpoint", ({ params }) =>
        asAdmin((actor, companyId) => w.testEndpoint(actor, { id: params.id, companyId }))
      )
      .handle("endpointDeliveries", ({ params }) =>
        asAdmin((_, companyId) =>
          Effect.map(w.listEndpointDeliveries({ endpointId: params.id, companyId }), (data) => ({ data }))
        )
      )
      .handle("getDelivery", ({ params }) => asAdmin((_, companyId) => w.getDelivery({ id: params.id, companyId })))
      .handle("resendDelivery", ({ params }) =>
        asAdmin((actor, companyId) => w.resendDelivery(actor, { id: params.id, companyId }))
      )
      .handle("listSubscriptions", () =>
        asAdmin((_, companyId) => Effect.map(w.listSubscriptions({ companyId }), (data) => ({ data })))
      )
      .handle("disableSubscription", ({ params }) =>
        asAdmin((actor, companyId) => w.disableSubscription(actor, { id: params.id, companyId }))
      )
      .handle("enableSubscription", ({ params }) =>
        asAdmin((actor, companyId) => w.enableSubscription(actor, { id: params.id, companyId }))
      )
      .handle("deleteSubscription", ({ params }) =>
        asAdmin((actor, companyId) => Effect.asVoid(w.deleteSubscription(actor, { id: params.id, companyId })))
      )
      .handle("activity", ({ query }) =>
        asAdmin((_, companyId) =>
          Effect.map(w.listActivity({ companyId, limit: ACTIVITY_LIMIT, kind: query.kind }), (data) => ({ data }))
        )
      )
  })
)
