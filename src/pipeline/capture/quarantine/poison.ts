// What counts as poison: an error thrown while shaping that is the data's fault (its record is
// held), not the database's, the connection's or a bug's (the run ends and is retried).
import { ProjectionBug } from "../../projection/store.ts"

/**
 * Whether an error thrown while shaping is the data's fault (the record is held) rather than
 * the database's, the connection's or a bug's (the run ends and is retried, as before).
 * Shapers throw plain errors (TypeError: a value of the wrong type); postgres.js errors carry
 * a code; a row read before it was loaded is capture's own bug.
 */
export const isPoison = (e: unknown): boolean => {
  if (e instanceof ProjectionBug) return false
  if (!(e instanceof Error)) return true
  const code = (e as { code?: unknown }).code
  if (typeof code !== "string") return true
  // SQLSTATE classes 22 (data exception) and 23 (integrity) are the data's; the rest
  // (connection, resources, operator intervention) are not.
  return /^2[23][0-9A-Z]{3}$/.test(code)
}

export const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e))
