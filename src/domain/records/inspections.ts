// Equipment inspections: exactly the fields of docs/api.md#inspections, in its order (so no equipmentId,
// via or updatedAt). NEVER: inspections.signature, inspections.photos, inspection_items.photo,
// equipment.qr_code.
//
// equipment is null when the inspection has no equipment row (equipment_id null, or the
// row is gone): an object of nulls would claim equipment that does not exist. Inside the
// object, identifier, category and jobSite are null when absent, like any absent value.
import { byNumberThenCreatedThenId, CREATED, fields, type FieldSpec, pickFields, readField } from "./fields.ts"
import type { ApiRecord, Row, ShapeInput } from "./types.ts"

const HEAD: ReadonlyArray<FieldSpec> = [["id", "text"]]

const FIELDS = fields(`
  checklist performed_by performed_at:timestamp outcome notes
`)

const ITEM_FIELDS = fields("item result note")

const EQUIPMENT_FIELDS = fields("id name identifier category")

const shapeEquipment = (equipment: Row | null, jobSite: Row | null): ApiRecord | null =>
  equipment === null
    ? null
    : {
        ...pickFields(equipment, EQUIPMENT_FIELDS),
        jobSite: jobSite === null ? null : readField(jobSite, "name", "text")
      }

export const shapeInspection = ({ row, children, equipment, equipmentJobSite }: ShapeInput): ApiRecord => ({
  ...pickFields(row, HEAD),
  equipment: shapeEquipment(equipment, equipmentJobSite),
  ...pickFields(row, FIELDS),
  items: [...children].sort(byNumberThenCreatedThenId("position")).map((item) => pickFields(item, ITEM_FIELDS)),
  ...pickFields(row, CREATED)
})
