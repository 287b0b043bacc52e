// @safety-records/client: a typed client of the Safety Records API, and webhook verification.
export { SafetyRecordsClient, type ClientOptions, type SyncRun } from "./client.ts"
export { MustRefetchError, SafetyRecordsError, WebhookVerificationError } from "./errors.ts"
export { verifyWebhook, type VerifyOptions, type WebhookHeaders } from "./webhooks.ts"
export type {
  ApiIndex,
  Consumer,
  CreateHook,
  Deletion,
  DeletionsPage,
  DeletionsParams,
  Event,
  EventName,
  EventOf,
  EventsPage,
  EventsParams,
  HookDeliveriesPage,
  HookDeliveriesParams,
  HookDelivery,
  HookDeliveryDetail,
  HookList,
  HookRecovery,
  HookSubscription,
  HookSubscriptionWithSecret,
  ListPage,
  ListParams,
  PingDelivery,
  RecordOf,
  Resource,
  StreamItem,
  StreamPage,
  StreamParams,
  WebhookDelivery
} from "./types.ts"
export type { components, operations, paths, webhooks } from "./schema.d.ts"
