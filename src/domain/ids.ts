// Ids from outside (paths, flags, forms) are UUIDs: checked here, before any lookup, so a
// malformed one is a clear refusal rather than a database cast error.
import { invalid, notFound } from "./errors.ts"

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (s: unknown): s is string => typeof s === "string" && UUID.test(s)

/** An id that can only be missing when malformed: 404, not a database cast error. */
export const requireId = (id: unknown, what: string): string => {
  if (!isUuid(id)) throw notFound(`no ${what} ${typeof id === "string" ? JSON.stringify(id.slice(0, 60)) : ""}`.trim())
  return id.toLowerCase()
}

export const requireCompanyId = (id: unknown): string => {
  if (!isUuid(id)) throw invalid("company must be a company id (a UUID)", { field: "company" })
  return id.toLowerCase()
}
