// Failures of admin operations that the person (or script) asking must see: the CLI prints
// the message and exits non-zero; the admin HTTP API answers with the matching status.
import { Schema } from "effect"

export const AdminErrorKind = Schema.Literals(["invalid", "not_found", "forbidden", "conflict"])
export type AdminErrorKind = typeof AdminErrorKind.Type

export class AdminError extends Schema.TaggedError<AdminError>()("AdminError", {
  kind: AdminErrorKind,
  message: Schema.String
}) {}

export const invalid = (message: string) => new AdminError({ kind: "invalid", message })
export const notFound = (message: string) => new AdminError({ kind: "not_found", message })
export const forbidden = (message: string) => new AdminError({ kind: "forbidden", message })
export const conflict = (message: string) => new AdminError({ kind: "conflict", message })

export const ADMIN_ERROR_STATUS: Readonly<Record<AdminErrorKind, 400 | 403 | 404 | 409>> = {
  invalid: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409
}
