// The version of the record shapes. Bump it with any change to what a view holds (a field
// added, renamed or reshaped): capture then rebuilds every view at its next start.
//   1: the first shapes
//   2: companyId on every record but corrective actions and inspections; a risk assessment's
//      hazards keep only their four keys
import type { Sql } from "postgres"

export const PROJECTION_VERSION = 2

// A transaction's sql is called the same way; one type keeps the signatures compatible.
type AnySql = Pick<Sql, "unsafe">

export const storedProjectionVersion = async (sql: AnySql): Promise<number> => {
  const [row] = await sql.unsafe<{ version: number }[]>("select version from service.projection")
  return row?.version ?? 0
}

export const markProjectionVersion = async (sql: AnySql, version = PROJECTION_VERSION): Promise<void> => {
  await sql.unsafe("insert into service.projection (version) values ($1) on conflict (id) do update set version = excluded.version", [version])
}
