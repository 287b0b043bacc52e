// What a read statement answers, and how that becomes the read model's answer. Every
// statement starts with the key's check (access/keys/key-check.ts): its rows are the JSON to
// send, or the key's state when the check refused it, or the read's own refusal (a cursor of
// another list, a type the key cannot read, no such record).
import { Effect } from "effect"
import type { Forbidden, Unauthorized } from "../domain/errors.ts"
import type { Resource } from "../domain/resources.ts"
import type { CurrentKeyShape } from "../access/keys/current-key.ts"
import type { RefusedState } from "../access/keys/key-check.ts"

/** A JSON answer: text, or the UTF-8 bytes exactly as PostgreSQL sent them. */
export type Json = string | Uint8Array

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
