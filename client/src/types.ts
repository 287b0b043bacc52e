// The client's types, all taken from the generated schema.d.ts (the API's OpenAPI document),
// so that a change of the API shows up here as a change of types.
import type { components, operations, paths } from "./schema.d.ts"

type Schemas = components["schemas"]
type At<P> = P extends keyof paths ? paths[P] : never
type JsonOf<R> = R extends { readonly content: { readonly "application/json": infer B } } ? B : never
type QueryOf<O> = O extends { readonly parameters: { readonly query?: infer Q } } ? NonNullable<Q> : never

/** The fourteen readable resources: every /api/v1/{resource}/{id} but hooks', events' and replays'. */
export type Resource = {
  [P in keyof paths]: P extends `/api/v1/${infer R}/{id}`
    ? R extends "hooks" | "events" | "replays"
      ? never
      : R
    : never
}[keyof paths]

type ListOperation<R extends Resource> = At<`/api/v1/${R}`>["get"]
type GetOperation<R extends Resource> = At<`/api/v1/${R}/{id}`>["get"]

/** A record of this resource, as GET /api/v1/{resource}/{id} returns it under data. */
export type RecordOf<R extends Resource> = JsonOf<GetOperation<R>["responses"][200]>["data"]

/** The query parameters of a resource's list: paging, dates, sort and its own filters (name, status). */
export type ListParams<R extends Resource> = QueryOf<ListOperation<R>>

/** One page of a resource's list. */
export type ListPage<R extends Resource> = JsonOf<ListOperation<R>["responses"][200]>

/** An event of the feed, or a webhook delivery's body: one of eleven payloads, told apart by `event`. */
export type Event = Schemas["Event"]
/** The eleven event names. */
export type EventName = Event["event"]
/** The payload of one event kind: EventOf<"permit.closed">["data"] is a permit. */
export type EventOf<K extends EventName> = Extract<Event, { readonly event: K }>
export type EventsParams = QueryOf<operations["events.list"]>
export type EventsPage = JsonOf<operations["events.list"]["responses"][200]>

export type Deletion = Schemas["Deletion"]
export type DeletionsParams = QueryOf<operations["deletions.list"]>
export type DeletionsPage = JsonOf<operations["deletions.list"]["responses"][200]>

export type HookSubscription = Schemas["HookSubscription"]
export type HookSubscriptionWithSecret = Schemas["HookSubscriptionWithSecret"]
export type CreateHook = Schemas["CreateHook"]
export type HookList = Schemas["HookList"]
/** A delivery to one of the key's subscriptions, with its latest attempts (never the payload). */
export type HookDelivery = Schemas["HookDelivery"]
/** One delivery with its latest attempts and the start of each answer. */
export type HookDeliveryDetail = Schemas["HookDeliveryDetail"]
export type HookDeliveriesParams = QueryOf<operations["hooks.deliveries"]>
export type HookDeliveriesPage = JsonOf<operations["hooks.deliveries"]["responses"][200]>
/** A recovery of a subscription (POST /api/v1/hooks/{id}/recover), as GET /api/v1/replays/{id} follows it. */
export type HookRecovery = Schemas["HookRecovery"]

/** GET /api/v1: the key's company, the key, what it can read and may subscribe to. */
export type ApiIndex = Schemas["ApiIndex"]

/** A webhook delivery's body: an event whose id is the delivery's id (webhook-id, Service-Delivery). */
export type WebhookDelivery = Event

/** The test event an admin sends to an endpoint from the admin pages; not one of the eleven. */
export interface PingDelivery {
  readonly id: string
  readonly event: "ping"
  readonly createdAt: string
  readonly data: { readonly endpointId: string; readonly name: string; readonly message: string }
}

/** A record's change in the stream (GET /api/v1/stream): in commit order, the record as GET shows it (null once deleted). */
export type StreamItem = Schemas["StreamItem"]
export type StreamParams = QueryOf<operations["stream.stream"]>
export type StreamPage = JsonOf<operations["stream.stream"]["responses"][200]>
/** A position in the stream the service keeps for the key. */
export type Consumer = Schemas["Consumer"]
