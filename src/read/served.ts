// What a read statement answers, and how that becomes the read model's answer. Every
// statement starts with the key's check (access/keys/key-check.ts): its rows are the JSON to
// send, or the key's state when the check refused it, or the read's own refusal (a cursor of
// another list, a type the key cannot read, no such record).
import { Effect } from "effect"
import type postgres from "postgres"
import { invalid, type Forbidden, type Invalid, type Unauthorized } from "../domain/errors.ts"
import type { Resource } from "../domain/resources.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import { checkKey, type KeyState, type RefusedState } from "../access/keys/key-check.ts"
import { ApiKeys } from "../access/keys/service.ts"
import { ApiPool } from "../platform/db/api-pool.ts"
import { Database } from "../platform/db/Database.ts"
import { ReadReplicas } from "../platform/db/read-replicas.ts"
import { type CursorKey, loadCursorKey } from "./cursor.ts"
import { type KeySeen, makeReadRouter, type ReadOn } from "./routing.ts"
import { type KeyRefusal, keyRefused } from "../access/keys/rules.ts"

/** A JSON answer: text, or the UTF-8 bytes exactly as PostgreSQL sent them. */
export type Json = string | Uint8Array

/** A read's answer: the JSON, or its own error, or the key's refusal. */
export type Read<E> = Effect.Effect<Json, E | Unauthorized | Forbidden>

export type Served<E> =
  | { readonly _tag: "Body"; readonly body: Json }
  | { readonly _tag: "Refused"; readonly state: RefusedState }
  | { readonly _tag: "Failed"; readonly error: E }

/** Why the key is refused now, worded as it stands (ApiKeys.refusal). */
export type RefusalOf = (
  key: CurrentKeyShape,
  resource: Resource | undefined,
  state: RefusedState
) => Effect.Effect<Unauthorized | Forbidden>

/** The JSON, or the failure: the key's refusal, or the read's own error. */
export const answer = <E>(
  served: Served<E>,
  refusal: RefusalOf,
  key: CurrentKeyShape,
  resource: Resource | undefined
): Effect.Effect<Json, E | Unauthorized | Forbidden> =>
  served._tag === "Body"
    ? Effect.succeed(served.body)
    : served._tag === "Refused"
      ? Effect.flatMap(refusal(key, resource, served.state), Effect.fail)
      : Effect.fail(served.error)

/** The key check's columns a feed's statement reads beside its rows (keyStateRelation). */
export interface KeyStateRow {
  readonly state: KeyState
  readonly k_scopes: ReadonlyArray<string> | null
  readonly c_modules: ReadonlyArray<string> | null
}

/** to_char's format for a timestamp as the API writes it: UTC, milliseconds, Z. */
export const ISO_MILLIS = `'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'`

/** A statement's first row as the key's refusal, when its check refused the key (no row: the key is gone). */
export const refusedBy = (first: { readonly state: KeyState } | undefined): Served<never> | undefined =>
  first === undefined
    ? { _tag: "Refused", state: "unknown" }
    : first.state !== "ok"
      ? { _tag: "Refused", state: first.state }
      : undefined

/**
 * A feed's list (events, deletions): one page for the key, read on `sql`, its cursors signed with
 * `cursorKey`; `seen` (when given) is told the key's scopes and modules once its check passed.
 */
export type FeedList<Key, Query> = (
  sql: postgres.Sql,
  cursorKey: CursorKey,
  key: Key,
  query: Query,
  seen?: (key: KeySeen) => void
) => Promise<Served<Invalid | Forbidden>>

/**
 * What a list's first row says before its page is written: the key's refusal, or, for a list of
 * one resource, a 403 when the key's scopes lack it (worded by `scope`); undefined to go on.
 * The key is reported seen once its check passed.
 */
export const listRefusal = (
  first: KeyStateRow | undefined,
  seen: ((key: KeySeen) => void) | undefined,
  resource: Resource | undefined,
  scope: (resource: Resource) => KeyRefusal
): Served<Forbidden> | undefined => {
  const refused = refusedBy(first)
  if (refused !== undefined) return refused
  seen?.(first!)
  if (resource !== undefined && !(first!.k_scopes ?? []).includes(resource))
    return { _tag: "Failed", error: keyRefused(scope(resource)) as Forbidden }
  return undefined
}

/** A cursor the list did not issue: the key's own refusal comes first, if it has one now. */
export const badCursor = async (
  sql: postgres.Sql,
  key: { readonly keyId: string; readonly host: string | undefined },
  resource: Resource | undefined,
  message: string
): Promise<Served<Invalid>> =>
  refusedBy(await checkKey(sql, key.keyId, key.host, resource)) ?? { _tag: "Failed", error: invalid(message) }

/**
 * What each read service is built on: the API's pool, the key that signs cursors (kept on the
 * primary), the router that runs a read on a standby or the primary (routing.ts), and `serve`,
 * which routes a read and answers its result (the key's refusal worded by the keys service).
 */
export const readSetup = Effect.gen(function* () {
  const { sql } = yield* ApiPool
  // Lists filtered by name are planned for their pattern: the shared pool plans per execution.
  const { sql: planned } = yield* Database
  const keys = yield* ApiKeys
  const replicas = yield* ReadReplicas
  const cursorKey = yield* Effect.promise(() => loadCursorKey(sql))
  const router = makeReadRouter({ sql, planned }, replicas)
  const serve = <E>(key: CurrentKeyShape, resource: Resource | undefined, read: ReadOn<E>) =>
    Effect.flatMap(
      Effect.promise(() => router.run(key, resource, read)),
      (served) => answer(served, keys.refusal, key, resource)
    )
  return { sql, keys, cursorKey, router, serve }
})
