// A test event to one of a key's subscriptions (the portal's "Send test event"): a signed ping
// with the key's secret, as an endpoint's test event is (src/webhooks/endpoints/ping.ts); not a
// delivery, so never retried; its result is in the activity log, under the key.
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { writeActivity } from "../../access/activity.ts"
import type { PingResult } from "../endpoints/ping.ts"
import type { WebhookDeps } from "../engine/settings.ts"
import { deliveryBody, PING_EVENT } from "../net/body.ts"
import { send } from "../net/sender.ts"
import { type HookKey, keySecret, own, withWebhooks } from "./hooks.ts"

const SHOWN_CHARS = 500

export const testHook = Effect.fn("testHook")(function* (deps: WebhookDeps, key: HookKey, id: unknown) {
  yield* withWebhooks(key, false)
  const sub = yield* own(key, id)
  const secret = yield* keySecret(deps, key.keyId)
  const deliveryId = randomUUID()
  const body = deliveryBody({
    deliveryId,
    event: PING_EVENT,
    createdAt: new Date().toISOString(),
    payload: JSON.stringify({
      subscriptionId: sub.id,
      event: sub.event,
      message: "A test event from the Safety Records Service."
    })
  })
  const r = yield* Effect.promise(() =>
    send(
      { url: sub.url, secret, previousSecret: null },
      { deliveryId, event: PING_EVENT, body },
      {
        allowed: deps.allowed,
        ...(deps.lookup ? { lookup: deps.lookup } : {}),
        ...(deps.ca ? { ca: deps.ca } : {}),
        ...(deps.pingTimeoutMs ? { timeoutMs: deps.pingTimeoutMs } : {})
      }
    )
  )
  yield* writeActivity({
    companyId: key.companyId,
    actor: { kind: "key", keyId: key.keyId },
    kind: "subscription.tested",
    subjectId: sub.id,
    details: { ok: r.ok, status: r.status, error: r.error, durationMs: r.durationMs }
  })
  return {
    ok: r.ok,
    status: r.status,
    durationMs: r.durationMs,
    error: r.error,
    errorKind: r.errorKind,
    response: r.responseSnippet.slice(0, SHOWN_CHARS),
    deliveryId
  } satisfies PingResult
})
