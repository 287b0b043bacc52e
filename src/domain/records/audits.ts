// Site audits with their items in position order and a numeric score.
// NEVER: audits.signature, audit_items.photos.
import { byNumberThenCreatedThenId, pickFields, STAMPS, type FieldSpec } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["company_id", "text"],
  ["title", "text"],
  ["template", "text"],
  ["job_site_id", "text"],
  ["performed_by", "text"],
  ["performed_at", "timestamp"],
  ["score", "number"],
  ["notes", "text"],
  ["via", "text"]
]

const ITEM_FIELDS: ReadonlyArray<FieldSpec> = [
  ["id", "text"],
  ["item", "text"],
  ["result", "text"],
  ["note", "text"]
]

export const shapeAudit = ({ row, children }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  items: [...children].sort(byNumberThenCreatedThenId("position")).map((item) => pickFields(item, ITEM_FIELDS)),
  ...pickFields(row, STAMPS)
})
