// The authenticated API key of the current request, as the auth middleware provides it to
// every handler under /api/v1 (resources now, hooks and events later).
import { Context } from "effect"
import type { Resource } from "../../domain/resources.ts"

export interface CurrentKeyShape {
  readonly keyId: string
  readonly keyName: string
  readonly companyId: string
  readonly companyName: string
  readonly expiresAt: string | null
  /** The key has the webhooks permission (it may subscribe itself to events). */
  readonly webhooks: boolean
  /** Resources the key was given. */
  readonly scopes: ReadonlySet<Resource>
  /** Modules turned on for the company. */
  readonly modules: ReadonlySet<string>
  /** What the key can read now: its scopes whose module is on, in spec order. */
  readonly readable: ReadonlyArray<Resource>
  /** The request's Host (lower case, no port), for the Host binding check. */
  readonly host: string | undefined
}

export class CurrentKey extends Context.Service<CurrentKey, CurrentKeyShape>()("service/api/CurrentKey") {}
