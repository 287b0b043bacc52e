// Subcontractors with their documents and the overall document status.
// NEVER: contact_phone, contact_email, subcontractor_documents.file_url.
// Documents are ordered by createdAt, then id: oldest first, stable across reads.
import { byCreatedThenId, fields, pickFields, readField, STAMPS } from "./fields.ts"
import type { ApiRecord, Row, ShapeInput } from "./types.ts"

const FIELDS = fields("id company_id name trade status contact_name")

const DOCUMENT_FIELDS = fields("id kind status expires_at:timestamp")

export type DocumentStatus = "missing" | "non_compliant" | "pending" | "compliant"

/**
 * As docs/api.md#records defines it, from the documents' status only: an approved document
 * whose expires_at has passed counts as compliant until the app marks it expired (this
 * keeps the record a pure function of the rows, with no clock).
 */
export const documentStatus = (documents: ReadonlyArray<Row>): DocumentStatus => {
  if (documents.length === 0) return "missing"
  const statuses = documents.map((d) => readField(d, "status", "text"))
  if (statuses.some((s) => s === "rejected" || s === "expired")) return "non_compliant"
  if (statuses.some((s) => s === "pending")) return "pending"
  return "compliant"
}

export const shapeSubcontractor = ({ row, children }: ShapeInput): ApiRecord => ({
  ...pickFields(row, FIELDS),
  documents: [...children].sort(byCreatedThenId).map((d) => pickFields(d, DOCUMENT_FIELDS)),
  documentStatus: documentStatus(children),
  ...pickFields(row, STAMPS)
})
