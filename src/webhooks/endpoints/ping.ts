// "Send test event": a signed ping to the endpoint now, with the receiver's answer shown.
// It is not a delivery of an event, so it is not retried; the activity log keeps its result.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { deliveryBody, PING_EVENT } from "../net/body.ts"
import { endpointSecretContext } from "../../platform/db/channels.ts"
import { decryptSecret } from "../../platform/secrets/secrets-key.ts"
import { send, type SendErrorKind } from "../net/sender.ts"
import { requireId } from "../../domain/ids.ts"
import { type Actor, writeActivity } from "../../access/activity.ts"
import { query } from "../../platform/db/Sql.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { checked } from "./validate.ts"
import { notFound } from "../../domain/errors.ts"

export type PingResult = {
  readonly ok: boolean
  /** The receiver's HTTP status, when it answered. */
  readonly status: number | null
  readonly durationMs: number
  /** Why it failed ("http 500", "timeout: ...", "refused: ..."); null on success. */
  readonly error: string | null
  /** Its kind ("tls", "refused" ...), for a face that says more about it; not shown. */
  readonly errorKind: SendErrorKind | null
  /** The start of the receiver's answer. */
  readonly response: string
  readonly deliveryId: string
}

const SHOWN_CHARS = 500

export const testEndpoint = Effect.fn("testEndpoint")(function* (
  deps: WebhookDeps,
  actor: Actor,
  input: { readonly id: string; readonly companyId?: string | undefined }
) {
  const id = yield* checked(() => requireId(input.id, "endpoint"))
  // Signed as a delivery would be now: with the previous secret too while its overlap lasts.
  const [e] = yield* query(
    (sql) => sql<
      { id: string; company_id: string; name: string; url: string; secret: Buffer; previous_secret: Buffer | null }[]
    >`
    select id::text, company_id::text, name, url, secret,
      case when previous_secret_expires_at > now() then previous_secret end as previous_secret
    from service.webhook_endpoints where id = ${id}`
  )
  if (!e || (input.companyId !== undefined && e.company_id !== input.companyId.toLowerCase()))
    return yield* notFound(`no endpoint ${id}`)
  const secret = decryptSecret(deps.secretsKey, e.secret, endpointSecretContext(e.id))
  const previousSecret =
    e.previous_secret === null ? null : decryptSecret(deps.secretsKey, e.previous_secret, endpointSecretContext(e.id))
  const deliveryId = randomUUID()
  const body = deliveryBody({
    deliveryId,
    event: PING_EVENT,
    createdAt: new Date().toISOString(),
    payload: JSON.stringify({
      endpointId: e.id,
      name: e.name,
      message: "A test event from the Safety Records Service."
    })
  })
  const r = yield* Effect.promise(() =>
    send(
      { url: e.url, secret, previousSecret },
      { deliveryId, event: PING_EVENT, body },
      {
        allowed: deps.allowed,
        ...(deps.lookup ? { lookup: deps.lookup } : {}),
        ...(deps.ca ? { ca: deps.ca } : {}),
        ...(deps.pingTimeoutMs ? { timeoutMs: deps.pingTimeoutMs } : {})
      }
    )
  )
  const result: PingResult = {
    ok: r.ok,
    status: r.status,
    durationMs: r.durationMs,
    error: r.error,
    errorKind: r.errorKind,
    response: r.responseSnippet.slice(0, SHOWN_CHARS),
    deliveryId
  }
  yield* writeActivity({
    companyId: e.company_id,
    actor,
    kind: "endpoint.tested",
    subjectId: e.id,
    details: { ok: r.ok, status: r.status, error: r.error, durationMs: r.durationMs }
  })
  return result
})
