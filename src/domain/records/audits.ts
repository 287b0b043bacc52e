// Site audits with their items in position order and a numeric score.
// NEVER: audits.signature, audit_items.photos.
import { byNumberThenCreatedThenId, fields, pickFields, STAMPS } from "./fields.ts"
import type { ApiRecord, ShapeInput } from "./types.ts"

const FIELDS = fields(`
  id company_id title template job_site_id performed_by performed_at:timestamp score:number
  notes via
`)

const ITEM_FIELDS = fields("id item result note")

export const shapeAudit = ({ row, children }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  items: [...children].sort(byNumberThenCreatedThenId("position")).map((item) => pickFields(item, ITEM_FIELDS)),
  ...pickFields(row, STAMPS)
})
