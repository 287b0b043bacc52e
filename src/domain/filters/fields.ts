// What a content filter may name (docs/events.md#content-filters): the fields of an event's
// data, as a receiver gets it. A record event's fields are read off the record's own shaper,
// fed a probe row with a value of each column's type, so they are the API's fields exactly
// and follow any change of a shaper; nested objects (an inspection's equipment) by dotted
// paths. An alert's data has its own fixed fields.
import { ALERT_KINDS, EVENT_KINDS, EVENT_RESOURCE, isAlertKind, type WebhookEvent } from "../event-kinds.ts"
import { APP_COLUMNS, NEVER_COLUMNS, type ColumnType } from "../records/columns.ts"
import { camelCase } from "../records/fields.ts"
import { PRIVACY_CASE_FIELDS } from "../records/incidents.ts"
import { shape, type Row } from "../records/index.ts"
import { RESOURCE_INFO, type Resource } from "../resources.ts"

/** A field's JSON type, as a filter's values are checked against it; "any" where the probe says null. */
export type FieldType = "string" | "number" | "boolean" | "array" | "any"

export type FieldCatalog = ReadonlyMap<string, FieldType>

const PROBE: Readonly<Record<ColumnType, unknown>> = {
  uuid: "00000000-0000-4000-8000-000000000000",
  text: "x",
  timestamptz: "2026-01-01T00:00:00.000Z",
  boolean: false,
  integer: 1,
  numeric: 1,
  "text[]": ["x"],
  jsonb: []
}

const probeRow = (table: string): Row =>
  Object.fromEntries(Object.entries(APP_COLUMNS[table] ?? {}).map(([column, type]) => [column, PROBE[type]]))

/** Child rows a record carries, by resource (their fields are inside an array: not filterable one by one). */
const CHILD_TABLES: Partial<Record<Resource, string>> = {
  audits: "audit_items",
  inspections: "inspection_items",
  subcontractors: "subcontractor_documents"
}

const typeOf = (value: unknown): FieldType =>
  Array.isArray(value)
    ? "array"
    : typeof value === "string"
      ? "string"
      : typeof value === "number"
        ? "number"
        : typeof value === "boolean"
          ? "boolean"
          : "any"

const walk = (value: Readonly<Record<string, unknown>>, prefix: string, out: Map<string, FieldType>) => {
  for (const [name, v] of Object.entries(value)) {
    if (v !== null && typeof v === "object" && !Array.isArray(v))
      walk(v as Record<string, unknown>, `${prefix}${name}.`, out)
    else out.set(`${prefix}${name}`, typeOf(v))
  }
}

const recordCatalog = (resource: Resource): FieldCatalog => {
  const table = RESOURCE_INFO[resource].table
  const child = CHILD_TABLES[resource]
  const record = shape(resource, {
    row: probeRow(table),
    children: child === undefined ? [] : [probeRow(child)],
    acknowledgementCount: 1,
    equipment: resource === "inspections" ? probeRow("equipment") : null,
    equipmentJobSite: resource === "inspections" ? probeRow("job_sites") : null
  })
  const out = new Map<string, FieldType>()
  walk(record, "", out)
  return out
}

/** An alert's data (docs/events.md#failure-alerts). */
const ALERT_CATALOG: FieldCatalog = new Map<string, FieldType>([
  ["destination.kind", "string"],
  ["destination.id", "string"],
  ["destination.url", "string"],
  ["destination.events", "array"],
  ["failedDeliveries", "number"],
  ["lastError", "string"],
  ["lastAttemptAt", "string"],
  ["switchedOffAt", "string"],
  ["switchedOffBy", "string"]
])

const CATALOGS = new Map<WebhookEvent, FieldCatalog>([
  ...EVENT_KINDS.map((k) => [k, recordCatalog(EVENT_RESOURCE[k])] as const),
  ...ALERT_KINDS.map((k) => [k, ALERT_CATALOG] as const)
])

/** The fields of an event's data a filter may name, with their types. */
export const fieldsOf = (event: WebhookEvent): FieldCatalog => CATALOGS.get(event)!

/**
 * Why a field may not be filtered on although the record had it once: withheld from privacy
 * cases, or never sent at all. Undefined for a field that is simply unknown.
 */
export const refusedField = (event: WebhookEvent, path: string): "withheld" | "never sent" | undefined => {
  if (isAlertKind(event)) return undefined
  const resource = EVENT_RESOURCE[event]
  if (resource === "incidents" && (PRIVACY_CASE_FIELDS as ReadonlyArray<string>).includes(path)) return "withheld"
  const tables = [
    RESOURCE_INFO[resource].table,
    CHILD_TABLES[resource],
    resource === "inspections" ? "equipment" : undefined
  ]
  const head = path.split(".").at(-1)!
  for (const t of tables)
    if (t !== undefined && (NEVER_COLUMNS[t] ?? []).some((c) => camelCase(c) === head)) return "never sent"
  return undefined
}
