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
