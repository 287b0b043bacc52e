// The 11 event kinds (spec 6.1) and the resource whose record each carries.
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

export const isEventKind = (s: string): s is EventKind => (EVENT_KINDS as ReadonlyArray<string>).includes(s)
