// The 11 event kinds (docs/events.md#event-kinds) and the resource whose record each carries.
import type { Resource } from "./resources.ts"

export const EVENT_KINDS = [
  "incident.created",
  "observation.created",
  "corrective_action.created",
  "corrective_action.closed",
  "audit.created",
  "inspection.failed",
  "training_record.created",
  "change.approved",
  "change.implemented",
  "permit.approved",
  "permit.closed"
] as const

export type EventKind = (typeof EVENT_KINDS)[number]

export const EVENT_RESOURCE: Readonly<Record<EventKind, Resource>> = {
  "incident.created": "incidents",
  "observation.created": "observations",
  "corrective_action.created": "corrective-actions",
  "corrective_action.closed": "corrective-actions",
  "audit.created": "audits",
  "inspection.failed": "inspections",
  "training_record.created": "training-records",
  "change.approved": "changes",
  "change.implemented": "changes",
  "permit.approved": "permits",
  "permit.closed": "permits"
}

/** When each event fires (docs/events.md#event-kinds), for the OpenAPI document's webhooks. */
export const EVENT_WHEN: Readonly<Record<EventKind, string>> = {
  "incident.created": "an incident is reported",
  "observation.created": "a safety observation is reported",
  "corrective_action.created": "a corrective action is raised",
  "corrective_action.closed": "a corrective action is completed or verified",
  "audit.created": "a site audit is saved",
  "inspection.failed": "an equipment inspection fails",
  "training_record.created": "a training record is added",
  "change.approved": "a change is approved",
  "change.implemented": "a change is implemented",
  "permit.approved": "a permit is approved",
  "permit.closed": "a permit is closed out"
}

/** The name of an event kind's payload schema in the OpenAPI document: incident.created -> IncidentCreatedEvent. */
export const eventSchemaName = (kind: EventKind): string =>
  `${kind
    .split(/[._]/)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("")}Event`

export const isEventKind = (s: string): s is EventKind => (EVENT_KINDS as ReadonlyArray<string>).includes(s)

/**
 * The alert events (docs/events.md#failure-alerts): about a webhook destination, not a record.
 * Chosen like any event; an API key hears only those about its own subscriptions.
 */
export const ALERT_KINDS = ["webhook.failing", "webhook.recovered", "webhook.switched_off"] as const

export type AlertKind = (typeof ALERT_KINDS)[number]

export const isAlertKind = (s: string): s is AlertKind => (ALERT_KINDS as ReadonlyArray<string>).includes(s)

export const ALERT_WHEN: Readonly<Record<AlertKind, string>> = {
  "webhook.failing":
    "a destination's delivery fails every attempt after a success (or since it was made), or its circuit opens",
  "webhook.recovered": "a destination delivers again after webhook.failing",
  "webhook.switched_off":
    "an endpoint is switched off after 15 fully failed deliveries, or an admin turns a destination off"
}

/** Every event a destination may choose: the record events, then the alerts. */
export const WEBHOOK_EVENTS = [...EVENT_KINDS, ...ALERT_KINDS] as const

export type WebhookEvent = EventKind | AlertKind

export const isWebhookEvent = (s: string): s is WebhookEvent => isEventKind(s) || isAlertKind(s)

/** The name of an alert kind's payload schema: webhook.switched_off -> WebhookSwitchedOffEvent. */
export const alertSchemaName = (kind: AlertKind): string =>
  `${kind
    .split(/[._]/)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join("")}Event`

/**
 * An alert event's row in the outbox names its destination where a record event names its
 * record: this resource (no module: alerts need none), and the destination's id.
 */
export const ALERT_RESOURCE = "webhooks"
