// How each app table sits in the mirror: its key, its company and its parent (the row whose
// view or lookup it feeds). Pure data and functions.
import { APP_COLUMNS } from "../../domain/records/columns.ts"
import type { Row } from "../../domain/records/types.ts"

export interface TableInfo {
  readonly table: string
  /** Column whose value is the row's parent_id in the mirror, if any. */
  readonly parentColumn: string | null
  /** Whether the row carries company_id (child rows inherit their parent's). */
  readonly hasCompany: boolean
}

const info = (table: string, parentColumn: string | null = null, hasCompany = true): TableInfo => ({
  table,
  parentColumn,
  hasCompany
})

export const TABLES: Readonly<Record<string, TableInfo>> = {
  companies: info("companies"),
  company_modules: info("company_modules", "company_id"),
  users: info("users"),
  job_sites: info("job_sites"),
  workers: info("workers"),
  incidents: info("incidents"),
  observations: info("observations"),
  corrective_actions: info("corrective_actions"),
  audits: info("audits"),
  audit_items: info("audit_items", "audit_id", false),
  equipment: info("equipment", "job_site_id"),
  inspections: info("inspections", "equipment_id"),
  inspection_items: info("inspection_items", "inspection_id", false),
  training_records: info("training_records"),
  changes: info("changes"),
  permits: info("permits"),
  policies: info("policies"),
  policy_acknowledgements: info("policy_acknowledgements", "policy_id", false),
  sds: info("sds"),
  risk_assessments: info("risk_assessments"),
  subcontractors: info("subcontractors"),
  subcontractor_documents: info("subcontractor_documents", "subcontractor_id", false)
}

export const APP_TABLES = Object.keys(TABLES)

/** The mirror key of a row: its id, or company_id:module for company_modules. */
export const rowKey = (table: string, row: Row): string =>
  table === "company_modules" ? `${String(row.company_id)}:${String(row.module)}` : String(row.id)

export const rowCompany = (table: string, row: Row): string | null =>
  table === "companies"
    ? String(row.id)
    : TABLES[table]?.hasCompany
      ? ((row.company_id as string | null) ?? null)
      : null

export const rowParent = (table: string, row: Row): string | null => {
  const col = TABLES[table]?.parentColumn
  return col ? ((row[col] as string | null) ?? null) : null
}

/** Whether a row has every column the service reads of its table (one read while its table did not fit may lack some). */
export const hasEveryColumn = (table: string, row: Row): boolean => {
  const columns = APP_COLUMNS[table]
  if (columns === undefined) return true
  for (const c in columns) if (!(c in row)) return false
  return true
}
