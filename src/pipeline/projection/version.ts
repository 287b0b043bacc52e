// The version of the record shapes. Bump it with any change to what a view holds (a field
// added, renamed or reshaped): capture then rebuilds every view at its next start.
//   1: the first shapes
//   2: companyId on every record but corrective actions and inspections; a risk assessment's
//      hazards keep only their four keys
import { Effect } from "effect"
import { query } from "../../platform/db/Sql.ts"

export const PROJECTION_VERSION = 2

export const storedProjectionVersion = query(
  (sql) => sql<{ version: number }[]>`select version from service.projection`
).pipe(Effect.map(([row]) => row?.version ?? 0))

/** Inside a rebuild's or a bootstrap's transaction: the views and their version commit together. */
export const markProjectionVersion = (version = PROJECTION_VERSION) =>
  query(
    (sql) =>
      sql`insert into service.projection (version) values (${version}) on conflict (id) do update set version = excluded.version`
  ).pipe(Effect.asVoid)
