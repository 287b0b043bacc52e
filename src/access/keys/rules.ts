// What an API key may do now, and the one wording of each refusal. A key is refused
// as a credential (Unauthorized: missing, unknown, revoked, expired, another company's) or
// for what it asks (Forbidden: the company's API and tier, the key's scopes and permissions,
// a module turned off). The directory decides from memory (directory.ts), each statement
// from the database (key-check.ts); both refusals are worded here. Pure.
import { forbidden, unauthorized, type Forbidden, type Unauthorized } from "../../domain/errors.ts"
import type { EventKind } from "../../domain/event-kinds.ts"
import { RESOURCES, type Resource } from "../../domain/resources.ts"
import type { RefusedState } from "./key-check.ts"

/** A key as the directory remembers it. */
export interface KeyEntry {
  readonly keyId: string
  readonly keyName: string
  readonly companyId: string
  readonly scopes: ReadonlySet<Resource>
  readonly webhooks: boolean
  /** Epoch milliseconds, or null for a key that does not expire. */
  readonly expiresAt: number | null
  readonly revoked: boolean
  /** The company as capture mirrors it; null before capture has seen it. */
  readonly company: {
    readonly name: string
    readonly tier: string
    readonly apiEnabled: boolean
    readonly modules: ReadonlySet<string>
  } | null
}

/** Why a key is refused. Details are given where they are known (a statement's check knows only the state). */
export type KeyRefusal =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Unknown" }
  | { readonly _tag: "Revoked" }
  | { readonly _tag: "Expired"; readonly at?: number | undefined }
  | { readonly _tag: "OtherCompany" }
  | { readonly _tag: "NoApi" }
  | { readonly _tag: "Tier"; readonly tier: string }
  | { readonly _tag: "ApiOff" }
  | { readonly _tag: "Scope"; readonly resource: Resource; readonly event?: EventKind | undefined }
  | { readonly _tag: "Module"; readonly resource?: Resource | undefined }
  | { readonly _tag: "NoWebhooks" }

/** The refusal's one wording, as the domain error an edge answers (401 or 403). */
export const keyRefused = (r: KeyRefusal): Unauthorized | Forbidden => {
  switch (r._tag) {
    case "Missing":
      return unauthorized("missing API key: send the header Authorization: Bearer mk_...")
    case "Unknown":
      return unauthorized("unknown API key")
    case "Revoked":
      return unauthorized("this API key was revoked")
    case "Expired":
      return unauthorized(
        r.at === undefined ? "this API key expired" : `this API key expired at ${new Date(r.at).toISOString()}`
      )
    case "OtherCompany":
      return unauthorized("this API key belongs to another company: use it at your company's own address")
    case "NoApi":
      return forbidden("the API is not available for this company")
    case "Tier":
      return forbidden(`the API belongs to the Company tier; this company is on the ${r.tier} tier`)
    case "ApiOff":
      return forbidden("the API is turned off for this company")
    case "Scope":
      return forbidden(
        r.event === undefined
          ? `this API key may not read ${r.resource}`
          : `this API key cannot read ${r.resource}, so it cannot see ${r.event} events`
      )
    case "Module":
      return forbidden(
        r.resource === undefined
          ? "this module is turned off for this company"
          : `the ${r.resource} module is turned off for this company`
      )
    case "NoWebhooks":
      return forbidden("this key does not have the webhooks permission")
  }
}

/** A refusal of the credential itself (401), as opposed to what the key asks (403). */
export const refusesCredential = (r: KeyRefusal): boolean =>
  r._tag === "Missing" ||
  r._tag === "Unknown" ||
  r._tag === "Revoked" ||
  r._tag === "Expired" ||
  r._tag === "OtherCompany"

/** About something that can change back (the company, its modules, the Host): worth confirming before refusing. */
export const mayChangeBack = (r: KeyRefusal): boolean =>
  r._tag === "OtherCompany" || r._tag === "NoApi" || r._tag === "Tier" || r._tag === "ApiOff" || r._tag === "Module"

/**
 * What a key may not do now, or undefined when it may: the rules in order (unknown, revoked,
 * expired, another company's address, the company's API and tier, the key's scopes, the module).
 */
export const refusalFor = (
  entry: KeyEntry | undefined,
  hostCompany: string | null,
  resource: Resource | undefined,
  now: number
): KeyRefusal | undefined => {
  if (entry === undefined) return { _tag: "Unknown" }
  if (entry.revoked) return { _tag: "Revoked" }
  if (entry.expiresAt !== null && entry.expiresAt <= now) return { _tag: "Expired", at: entry.expiresAt }
  if (hostCompany !== null && hostCompany !== entry.companyId) return { _tag: "OtherCompany" }
  const company = entry.company
  if (company === null) return { _tag: "NoApi" }
  if (company.tier !== "company") return { _tag: "Tier", tier: company.tier }
  if (!company.apiEnabled) return { _tag: "ApiOff" }
  if (resource !== undefined) {
    if (!entry.scopes.has(resource)) return { _tag: "Scope", resource }
    if (!company.modules.has(resource)) return { _tag: "Module", resource }
  }
  return undefined
}

const STATE_REFUSALS: Readonly<Record<RefusedState, KeyRefusal>> = {
  unknown: { _tag: "Unknown" },
  revoked: { _tag: "Revoked" },
  expired: { _tag: "Expired" },
  host: { _tag: "OtherCompany" },
  company: { _tag: "NoApi" },
  module: { _tag: "Module" }
}

/** The refusal a statement's key check reports, when nothing more is known. */
export const stateRefusal = (state: RefusedState): KeyRefusal => STATE_REFUSALS[state]

/** What a key can read: its scopes whose module is on, in RESOURCES order. */
export const readableBy = (scopes: ReadonlySet<string>, modules: ReadonlySet<string>): ReadonlyArray<Resource> =>
  RESOURCES.filter((r) => scopes.has(r) && modules.has(r))
