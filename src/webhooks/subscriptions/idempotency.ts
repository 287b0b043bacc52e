// Idempotency-Key on POST /api/v1/hooks (docs/api.md#webhook-subscriptions): a client that
// timed out retries with the same key and gets the first answer, not a second subscription;
// the same key with another body is a 409, as at Stripe and Svix. Kept 24 hours, per API key
// (another key's Idempotency-Key never matches), in service.api_idempotency (sql/025) without
// the signing secret, which a replayed answer gets again from the key's stored secret.
import { createHash } from "node:crypto"
import { Effect } from "effect"
import { conflict, invalid } from "../../domain/errors.ts"
import { query, transaction } from "../../platform/db/Sql.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { type CreatedHook, createHook, type HookKey, type HookRecord, keySecret, withWebhooks } from "./hooks.ts"

export const IDEMPOTENCY_HOURS = 24
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255
/** Answers kept per API key at most: the oldest go first (a bounded store, whatever a key sends). */
export const MAX_IDEMPOTENT_ANSWERS_PER_KEY = 1_000

/** 1 to 255 visible ASCII characters (a UUID, say); else the 400's message. Pure. */
export const idempotencyKeyRefusal = (value: string): string | null =>
  /^[\x21-\x7e]{1,255}$/.test(value)
    ? null
    : `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} visible ASCII characters (a UUID, for example)`

/** JSON with every object's keys in order: the same body written in another order is the same request. Pure. */
export const canonicalJson = (value: unknown): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (typeof value === "object" && value !== null) {
    const o = value as Record<string, unknown>
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(",")}}`
  }
  return JSON.stringify(value) ?? "null"
}

export const requestHash = (body: unknown): string => createHash("sha256").update(canonicalJson(body)).digest("hex")

/**
 * POST /api/v1/hooks with an Idempotency-Key: the stored first answer for this API key and
 * Idempotency-Key (with the key's secret), or the subscribe itself, whose answer is stored.
 * The key's row is locked for the whole of it, so the same request sent twice at once makes
 * one subscription and one stored answer; a subscribe refused stores nothing.
 */
export const createHookOnce = Effect.fn("createHookOnce")(function* (
  deps: WebhookDeps,
  key: HookKey,
  body: unknown,
  idempotencyKey: string
) {
  // The key's own refusal (401, 403) comes before anything about the request.
  yield* withWebhooks(key, false)
  const refusal = idempotencyKeyRefusal(idempotencyKey)
  if (refusal !== null) return yield* invalid(refusal, { field: "Idempotency-Key" })
  const hash = requestHash(body)
  return yield* transaction(
    Effect.gen(function* () {
      yield* withWebhooks(key, true)
      // Expired answers go (this key's and any other's: an index on created_at makes it cheap).
      yield* query(
        (tx) =>
          tx`delete from service.api_idempotency where created_at < now() - ${IDEMPOTENCY_HOURS} * interval '1 hour'`
      )
      const [seen] = yield* query(
        (tx) => tx<{ request_hash: string; response: HookRecord }[]>`
        select request_hash, response from service.api_idempotency
        where key_id = ${key.keyId} and idempotency_key = ${idempotencyKey}`
      )
      if (seen) {
        if (seen.request_hash !== hash)
          return yield* conflict(
            `this Idempotency-Key was used in the last ${IDEMPOTENCY_HOURS} hours with another request body; send a new Idempotency-Key with a new request`
          )
        return {
          created: false,
          replayed: true,
          subscription: { ...seen.response, secret: yield* keySecret(deps, key.keyId) } satisfies CreatedHook
        }
      }
      const made = yield* createHook(deps, key, body)
      const { secret: _secret, ...kept } = made.subscription
      yield* query(async (tx) => {
        await tx`
          delete from service.api_idempotency where key_id = ${key.keyId} and idempotency_key in (
            select idempotency_key from service.api_idempotency where key_id = ${key.keyId}
            order by created_at desc offset ${MAX_IDEMPOTENT_ANSWERS_PER_KEY - 1})`
        await tx`
          insert into service.api_idempotency (key_id, idempotency_key, request_hash, status, response)
          values (${key.keyId}, ${idempotencyKey}, ${hash}, 201, ${JSON.stringify(kept)}::text::jsonb)`
      })
      return { ...made, replayed: false }
    })
  )
})
