// The authenticated API key of the current request, as the read API's middleware provides it
// to every handler under /api/v1, and as the read model takes it.
import { Context } from "effect"
import type { Resource } from "../../domain/resources.ts"
import { readableBy, type KeyEntry } from "./rules.ts"

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
  /** What the key can read now: its scopes whose module is on, in RESOURCES order. */
  readonly readable: ReadonlyArray<Resource>
  /** The request's Host (lower case, no port), for the Host binding check. */
  readonly host: string | undefined
}

export class CurrentKey extends Context.Service<CurrentKey, CurrentKeyShape>()("service/api/CurrentKey") {}

// The key as handlers see it, made once per remembered entry and Host: a reloaded key is a
// new entry, so nothing here outlives what it was made from.
const currentKeys = new WeakMap<KeyEntry, Map<string | undefined, CurrentKeyShape>>()

export const currentKeyOf = (entry: KeyEntry, host: string | undefined): CurrentKeyShape => {
  let byHost = currentKeys.get(entry)
  if (byHost === undefined) currentKeys.set(entry, (byHost = new Map()))
  let key = byHost.get(host)
  if (key === undefined) {
    const modules = entry.company?.modules ?? new Set<string>()
    key = {
      keyId: entry.keyId,
      keyName: entry.keyName,
      companyId: entry.companyId,
      companyName: entry.company?.name ?? "",
      expiresAt: entry.expiresAt === null ? null : new Date(entry.expiresAt).toISOString(),
      webhooks: entry.webhooks,
      scopes: entry.scopes,
      modules,
      readable: readableBy(entry.scopes, modules),
      host
    }
    if (byHost.size >= 64) byHost.clear() // Host headers are the client's to choose
    byHost.set(host, key)
  }
  return key
}
