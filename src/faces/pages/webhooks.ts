// The webhooks pages: endpoints (add, edit, rotate the secret, delete, Turn On, send a test
// event, the last 25 deliveries with Send Again) and the subscriptions keys made through the
// API (turn off or on, delete). Every change goes through the Webhooks service, exactly as
// the admin API's handlers call it (src/faces/admin-api/webhooks-handlers.ts), so the rules and
// the error messages are the same.
import { isUuid } from "../../domain/ids.ts"
import { userActor, type Actor } from "../../access/activity.ts"
import { Effect, Layer } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import type { DeliveryView } from "../../webhooks/deliveries/deliveries.ts"
import { endpointHealth, SWITCH_OFF_AT, type EndpointView } from "../../webhooks/endpoints/endpoints.ts"
import type { ReplayView } from "../../webhooks/replay/jobs.ts"
import type { SubscriptionView } from "../../webhooks/subscriptions/subscriptions.ts"
import { DEFAULT_OVERLAP } from "../../webhooks/endpoints/overlap.ts"
import type { CircuitView } from "../../webhooks/endpoints/circuit.ts"
import { EMPTY, endpointFields, endpointFormOf, filterOf, rateOf, type EndpointForm } from "./endpoint-form.ts"
import { Webhooks, type WebhooksShape } from "../../webhooks/service.ts"
import type { DomainError } from "../../domain/errors.ts"
import { httpMessage, httpStatus } from "../http/errors.ts"
import { healthCharts } from "./charts.ts"
import { circuitNote, subscriptionPage, subscriptionsSection } from "./subscriptions.ts"
import type { DeliveryHealth } from "../../webhooks/deliveries/health.ts"
import { html, type Html } from "./html.ts"
import {
  csrfField,
  formatDate,
  formError,
  htmlResponse,
  page,
  notFoundPage,
  postButton,
  seeOther,
  shownOnce,
  when
} from "./layout.ts"
import { PATHS, pathFor } from "./paths.ts"
import { recentReplays, replayOfferBox, replaysTable } from "./replays.ts"
import { pendingReplayOffer, type ReplayOffer } from "../../webhooks/replay/queries.ts"
import { idOf, signedIn, signedInForm } from "./request.ts"
import { setFlash, type Session } from "../../access/sessions.ts"

/** A circuit in full, on an endpoint's page. */
const circuitFacts = (c: CircuitView): Html =>
  c.state === "closed"
    ? html`<span class="state on">Closed</span> <span class="muted">deliveries go</span>`
    : html`<span class="state failing">${c.state === "open" ? "Open" : "Half-open"}</span> since ${when(c.openedAt)}, after ${c.failures} timeouts or refused connections in a row${c.lastError === null ? "" : html` <span class="muted">(${c.lastError})</span>`}. Deliveries that fall due are not sent (each counts as a failed attempt and is retried on schedule) until a probe gets an answer; the next delivery due from ${when(c.nextProbeAt)} is the probe${c.probes > 0 ? html` <span class="muted">(${c.probes} got no answer)</span>` : ""}.`

const stateOf = (e: EndpointView): Html => {
  switch (endpointHealth(e)) {
    case "off":
      return html`<span class="state off">Switched off</span>`
    case "failing":
      return html`<span class="state failing">Failing</span> <span class="muted">${e.consecutiveFailures} failed in a row; ${SWITCH_OFF_AT} switch it off</span>`
    default:
      return html`<span class="state on">On</span>`
  }
}

/** Told before it happens, from the tenth delivery in a row failing every attempt (docs/events.md#switching-off). */
const failingWarning = (session: Session, e: EndpointView): Html =>
  endpointHealth(e) !== "failing"
    ? html``
    : html`<section class="flash warn" role="status" aria-labelledby="failing-title" id="failing-warning">
  <h2 id="failing-title">This endpoint is failing</h2>
  <p>${e.consecutiveFailures} deliveries in a row failed every attempt. At ${SWITCH_OFF_AT} it is switched off and receives nothing until it is turned on again. Check the receiver, or send it a test event.</p>
  ${postButton(session, pathFor(PATHS.endpointTest, e.id), "Send test event", { style: "secondary" })}
</section>`

const endpointsTable = (endpoints: ReadonlyArray<EndpointView>): Html =>
  endpoints.length === 0
    ? html`<p class="muted">No endpoints yet.</p>`
    : html`<table class="stack">
  <thead><tr><th scope="col">Name</th><th scope="col">Address</th><th scope="col">Events</th><th scope="col">State</th><th scope="col">Made</th></tr></thead>
  <tbody>
  ${endpoints.map(
    (e) => html`<tr data-endpoint-id="${e.id}">
    <td data-label="Name"><a href="${pathFor(PATHS.endpoint, e.id)}">${e.name}</a></td>
    <td data-label="Address" class="url">${e.url}</td>
    <td data-label="Events">${e.events.join(", ")}</td>
    <td data-label="State">${stateOf(e)}${!e.enabled && e.disabledReason !== null ? html`<br><span class="muted">${e.disabledReason}</span>` : ""}${circuitNote(e.circuit)}</td>
    <td data-label="Made">${e.createdBy ?? ""} <span class="muted">${when(e.createdAt)}</span></td>
  </tr>`
  )}
  </tbody>
</table>`

const webhooksPage = (
  session: Session,
  offered: ReadonlyArray<string>,
  endpoints: ReadonlyArray<EndpointView>,
  subscriptions: ReadonlyArray<SubscriptionView>,
  replays: ReadonlyArray<ReplayView>,
  options: {
    readonly form?: EndpointForm
    readonly error?: string
    readonly created?: { readonly id: string; readonly name: string; readonly secret: string }
  } = {}
): Html =>
  page({
    title: "Webhooks",
    section: "webhooks",
    session,
    content: html`${
      options.created !== undefined
        ? html`${shownOnce({
            id: "new-secret",
            label: `Endpoint "${options.created.name}" added: its signing secret`,
            secret: options.created.secret,
            warning:
              "The receiver checks the Service-Signature header with it. This is the only time it is shown; if it is lost, rotate it."
          })}<p><a href="${pathFor(PATHS.endpoint, options.created.id)}">Open the endpoint</a> to send it a test event.</p>`
        : ""
    }
<p>Endpoints receive a signed HTTPS POST when an event happens to a record.</p>
<h2>Endpoints</h2>
${endpointsTable(endpoints)}
<form method="post" action="${PATHS.endpoints}" class="card" id="add-endpoint" aria-labelledby="add-endpoint-title">
  ${csrfField(session)}
  <h2 id="add-endpoint-title">Add an endpoint</h2>
  ${formError("add-endpoint-error", options.error)}
  ${endpointFields("new", options.form ?? EMPTY, offered)}
  <div class="actions"><button type="submit" class="primary">Add endpoint</button></div>
</form>
${subscriptionsSection(session, subscriptions)}
<section aria-labelledby="replays-title" id="recent-replays">
<h2 id="replays-title">Replays</h2>
<p class="hint">Events sent again after an outage, from an endpoint's page or a subscription's Replay link. The last 10:</p>
${replaysTable(replays, { showDestination: true })}
</section>`
  })

/**
 * A delivery's last answer: the HTTP status and the error, leaving out an error that only
 * repeats the status ("http 500").
 */
export const lastAnswer = (d: Pick<DeliveryView, "lastStatus" | "lastError">): Html => {
  const status = d.lastStatus !== null ? `HTTP ${d.lastStatus}` : null
  const error =
    d.lastError !== null && (d.lastStatus === null || d.lastError !== `http ${d.lastStatus}`) ? d.lastError : null
  if (status === null && error === null) return html`<span class="muted">none yet</span>`
  return html`${status}${status !== null && error !== null ? html`<br>` : ""}${error !== null ? html`<span class="muted">${error}</span>` : ""}`
}

const deliveriesTable = (session: Session, endpointId: string, deliveries: ReadonlyArray<DeliveryView>): Html =>
  deliveries.length === 0
    ? html`<p class="muted">No deliveries yet. Events of the chosen kinds are sent as they happen; a test event is not a delivery.</p>`
    : html`<table class="stack" id="deliveries">
  <thead><tr><th scope="col">Made</th><th scope="col">Event</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Next attempt</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
  <tbody>
  ${deliveries.map(
    (d) => html`<tr data-delivery-id="${d.id}">
    <td data-label="Made">${when(d.createdAt)}<br><code class="muted">${d.id}</code></td>
    <td data-label="Event">${d.event}</td>
    <td data-label="State"><span class="state ${d.state}">${d.state}</span>${d.heldReason !== null ? html`<br><span class="muted">${d.heldReason}</span>` : ""}</td>
    <td data-label="Attempts" class="num">${d.attempts}</td>
    <td data-label="Last answer">${lastAnswer(d)}</td>
    <td data-label="Next attempt">${d.nextAttemptAt !== null ? when(d.nextAttemptAt) : d.finishedAt !== null ? html`<span class="muted">finished ${when(d.finishedAt)}</span>` : html`<span class="muted">—</span>`}</td>
    <td data-label="Actions"><form method="post" action="${pathFor(PATHS.deliveryResend, d.id)}" class="inline">${csrfField(session)}<input type="hidden" name="endpoint" value="${endpointId}"><button type="submit" class="secondary" aria-label="Send again delivery ${d.id}">Send Again</button></form></td>
  </tr>`
  )}
  </tbody>
</table>`

const endpointPage = (
  session: Session,
  offered: ReadonlyArray<string>,
  e: EndpointView,
  deliveries: ReadonlyArray<DeliveryView>,
  replays: { readonly list: ReadonlyArray<ReplayView>; readonly offer: ReplayOffer | null },
  health: DeliveryHealth | null,
  options: {
    readonly form?: EndpointForm
    readonly error?: string
    readonly secret?: string
    /** A refused rotation: what was typed as the overlap, and why. */
    readonly rotate?: { readonly overlap: string; readonly error: string }
  } = {}
): Html =>
  page({
    title: `Endpoint "${e.name}"`,
    section: "webhooks",
    session,
    content: html`<p><a href="${PATHS.webhooks}">← All webhooks</a></p>
${
  options.secret !== undefined
    ? shownOnce({
        id: "new-secret",
        label: "New signing secret",
        secret: options.secret,
        warning: `Deliveries are signed with it from now on. This is the only time it is shown.${
          e.previousSecretExpiresAt === null
            ? " The old secret no longer signs anything."
            : ` Until ${formatDate(e.previousSecretExpiresAt)} they are signed with the old secret too, so the receiver keeps verifying them until it is given this one.`
        }`
      })
    : ""
}
${
  e.enabled
    ? ""
    : html`<section class="flash error" aria-labelledby="off-title">
  <h2 id="off-title">This endpoint is switched off</h2>
  <p>${e.disabledReason ?? "It was switched off."}${e.disabledAt !== null ? html` <span class="muted">(${when(e.disabledAt)})</span>` : ""}</p>
  <p>Fix the receiver, then turn it on: it takes events again, and deliveries held meanwhile resume. You are then offered to replay what failed while it was off.</p>
  ${postButton(session, pathFor(PATHS.endpointEnable, e.id), "Turn On", { style: "primary" })}
</section>`
}
${failingWarning(session, e)}
${e.enabled && replays.offer !== null ? replayOfferBox(e.id, replays.offer) : ""}
<dl class="facts">
  <dt>Address</dt><dd class="url">${e.url}</dd>
  <dt>Events</dt><dd>${e.events.join(", ")}</dd>
  <dt>State</dt><dd>${stateOf(e)}${e.consecutiveFailures > 0 && endpointHealth(e) === "ok" ? html` <span class="muted">${e.consecutiveFailures} failed deliveries in a row (${SWITCH_OFF_AT} switch it off)</span>` : ""}</dd>
  <dt>Circuit</dt><dd id="circuit">${circuitFacts(e.circuit)}</dd>
  <dt>Rate</dt><dd>${e.rateLimit === null ? html`<span class="muted">no limit</span>` : `at most ${e.rateLimit} deliveries a second`}</dd>
  <dt>Order</dt><dd>${e.ordering === "record" ? "each record's events in the order they happened" : html`<span class="muted">none</span>`}</dd>
  <dt>Filter</dt><dd>${e.filter === null ? html`<span class="muted">none: every event it takes</span>` : html`<code>${JSON.stringify(e.filter)}</code>`}</dd>
  <dt>Payload</dt><dd>${e.payload === "thin" ? "thin: the record's id, company and API address only" : "full: the record"}</dd>
  <dt>Made</dt><dd>${e.createdBy ?? ""} ${when(e.createdAt)}</dd>
  <dt>Secret rotated</dt><dd>${when(e.secretRotatedAt)}</dd>
  ${e.previousSecretExpiresAt === null ? "" : html`<dt>Old secret signs until</dt><dd>${when(e.previousSecretExpiresAt)} <span class="muted">(beside the current one)</span></dd>`}
</dl>
<div class="actions">
  ${postButton(session, pathFor(PATHS.endpointTest, e.id), "Send test event", { style: "primary" })}
  ${postButton(session, pathFor(PATHS.endpointDelete, e.id), "Delete endpoint", {
    style: "danger",
    confirm: `Delete the endpoint "${e.name}" and its delivery log? Pending deliveries go with it. This cannot be undone.`
  })}
</div>
<form method="post" action="${pathFor(PATHS.endpointRotate, e.id)}" class="card" id="rotate-secret" aria-labelledby="rotate-secret-title" data-confirm="Rotate the signing secret? Deliveries are signed with the new one at once; the receiver must be given it.">
  ${csrfField(session)}
  <h2 id="rotate-secret-title">Rotate the signing secret</h2>
  ${formError("rotate-secret-error", options.rotate?.error)}
  <label for="rotate-overlap">Old secret keeps signing for</label>
  <input type="text" id="rotate-overlap" name="overlap" required value="${options.rotate?.overlap ?? DEFAULT_OVERLAP}" aria-describedby="rotate-overlap-hint" spellcheck="false" autocomplete="off">
  <p class="hint" id="rotate-overlap-hint">Until then every delivery is signed with the new secret and the old one, so the receiver can switch when it likes. E.g. 24h, 90m, 7d (the most), or 0 to stop the old secret at once.</p>
  <div class="actions"><button type="submit" class="secondary">Rotate secret</button></div>
</form>
${health === null ? "" : healthCharts("health", health)}
<h2>Last 25 deliveries</h2>
${deliveriesTable(session, e.id, deliveries)}
<section aria-labelledby="endpoint-replays-title" id="endpoint-replays">
<h2 id="endpoint-replays-title">Replays</h2>
<p><a href="${pathFor(PATHS.endpointReplay, e.id)}">Replay events to this endpoint…</a> <span class="muted">(you see the count first)</span></p>
${replaysTable(replays.list)}
</section>
<form method="post" action="${pathFor(PATHS.endpoint, e.id)}" class="card" id="edit-endpoint" aria-labelledby="edit-endpoint-title">
  ${csrfField(session)}
  <h2 id="edit-endpoint-title">Edit</h2>
  ${formError("edit-endpoint-error", options.error)}
  ${endpointFields(
    "edit",
    options.form ?? {
      name: e.name,
      url: e.url,
      events: e.events,
      rateLimit: e.rateLimit === null ? "" : String(e.rateLimit),
      ordering: e.ordering,
      filter: e.filter === null ? "" : JSON.stringify(e.filter),
      payload: e.payload
    },
    offered
  )}
  <div class="actions"><button type="submit" class="primary">Save changes</button></div>
</form>`
  })

/** Renders the endpoint page (with deliveries), or the 404 page the API's 404 would be. */
const showEndpoint = (
  session: Session,
  id: string,
  options: Parameters<typeof endpointPage>[6] & { readonly status?: number } = {}
) =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    const found = yield* Effect.result(w.getEndpoint({ id, companyId: session.actor.companyId }))
    if (found._tag === "Failure") return notFoundPage(httpMessage(found.failure), session)
    const deliveries = yield* w
      .listEndpointDeliveries({ endpointId: id, companyId: session.actor.companyId })
      .pipe(Effect.orElseSucceed(() => []))
    const offered = yield* w.offeredEvents({ companyId: session.actor.companyId }).pipe(Effect.orDie)
    const list = yield* recentReplays(session.actor.companyId, { endpointId: found.success.id })
    const offer = yield* pendingReplayOffer(session.actor.companyId, found.success.id)
    // The page still serves its other parts should the health read fail.
    const health = yield* w.deliveryHealth({ endpointId: found.success.id }).pipe(Effect.orElseSucceed(() => null))
    return htmlResponse(endpointPage(session, offered, found.success, deliveries, { list, offer }, health, options), {
      status: options.status ?? 200
    })
  })

const showWebhooks = (
  session: Session,
  options: Parameters<typeof webhooksPage>[5] & { readonly status?: number } = {}
) =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    const companyId = session.actor.companyId
    const endpoints = yield* w.listEndpoints({ companyId }).pipe(Effect.orDie)
    const subscriptions = yield* w.listSubscriptions({ companyId }).pipe(Effect.orDie)
    const offered = yield* w.offeredEvents({ companyId }).pipe(Effect.orDie)
    const replays = yield* recentReplays(companyId)
    return htmlResponse(webhooksPage(session, offered, endpoints, subscriptions, replays, options), {
      status: options.status ?? 200
    })
  })

/** A change whose result is a flash message on the page it redirects to. */
const flashAfter = <A, E extends DomainError>(
  session: Session,
  operation: Effect.Effect<A, E, Webhooks>,
  success: (a: A) => Parameters<typeof setFlash>[1],
  location: (ok: boolean) => string
) =>
  Effect.gen(function* () {
    const r = yield* Effect.result(operation)
    yield* setFlash(
      session,
      r._tag === "Success" ? success(r.success) : { kind: "error", message: httpMessage(r.failure) }
    )
    return seeOther(location(r._tag === "Success"))
  })

/** What a form POST on one endpoint, delivery or subscription works with. */
interface Post {
  readonly w: WebhooksShape
  readonly session: Session
  readonly body: URLSearchParams
  /** The admin, as the activity log records them. */
  readonly actor: Actor
  /** The item in the path, in the admin's company. */
  readonly target: { readonly id: string; readonly companyId: string }
}

/** A signed-in form POST (same-origin and CSRF checked by signedInForm) on the item in the path. */
const postOn = <R>(
  path: HttpRouter.PathInput,
  handle: (post: Post) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
) =>
  HttpRouter.add(
    "POST",
    path,
    signedInForm((session, body, params) =>
      Effect.flatMap(Webhooks, (w) =>
        handle({
          w,
          session,
          body,
          actor: userActor(session.actor),
          target: { id: idOf(params), companyId: session.actor.companyId }
        })
      )
    )
  )

/** Back to the endpoint's page, with what happened as a flash. */
const onEndpoint = <A, E extends DomainError>(
  { session, target }: Post,
  operation: Effect.Effect<A, E, Webhooks>,
  success: (a: A) => Parameters<typeof setFlash>[1]
) => flashAfter(session, operation, success, () => pathFor(PATHS.endpoint, target.id))

/** A subscription a key made: what it is, and its delivery health (its deliveries are the key's, through its API or portal). */
export const WebhooksRoutes = Layer.mergeAll(
  HttpRouter.add(
    "GET",
    PATHS.subscription,
    signedIn((session, _request, params) =>
      Effect.gen(function* () {
        const w = yield* Webhooks
        const id = idOf(params)
        const subs = yield* w.listSubscriptions({ companyId: session.actor.companyId }).pipe(Effect.orDie)
        const s = subs.find((x) => x.id === id.toLowerCase())
        if (s === undefined) return notFoundPage("no such subscription", session)
        const health = yield* w.deliveryHealth({ subscriptionId: s.id }).pipe(Effect.orElseSucceed(() => null))
        return htmlResponse(subscriptionPage(session, s, health))
      })
    )
  ),
  HttpRouter.add(
    "GET",
    PATHS.webhooks,
    signedIn((session) => showWebhooks(session))
  ),
  postOn(PATHS.endpoints, ({ w, session, body, actor }) =>
    Effect.gen(function* () {
      const form = endpointFormOf(body)
      const created = yield* Effect.result(
        Effect.flatMap(rateOf(form), (rateLimit) =>
          w.createEndpoint(actor, {
            companyId: session.actor.companyId,
            name: form.name,
            url: form.url,
            events: form.events,
            rateLimit,
            ordering: form.ordering,
            filter: filterOf(form),
            payload: form.payload
          })
        )
      )
      if (created._tag === "Failure")
        return yield* showWebhooks(session, {
          form,
          error: httpMessage(created.failure),
          status: httpStatus(created.failure)
        })
      return yield* showWebhooks(session, {
        created: { id: created.success.id, name: created.success.endpoint.name, secret: created.success.secret }
      })
    })
  ),
  HttpRouter.add(
    "GET",
    PATHS.endpoint,
    signedIn((session, _request, params) => showEndpoint(session, idOf(params)))
  ),
  postOn(PATHS.endpoint, ({ w, session, body, actor, target }) =>
    Effect.gen(function* () {
      const form = endpointFormOf(body)
      const updated = yield* Effect.result(
        Effect.flatMap(rateOf(form), (rateLimit) =>
          w.updateEndpoint(actor, {
            ...target,
            name: form.name,
            url: form.url,
            events: form.events,
            rateLimit,
            ordering: form.ordering,
            filter: filterOf(form),
            payload: form.payload
          })
        )
      )
      if (updated._tag === "Failure") {
        if (updated.failure._tag === "NotFound") return notFoundPage(httpMessage(updated.failure))
        return yield* showEndpoint(session, target.id, {
          form,
          error: httpMessage(updated.failure),
          status: httpStatus(updated.failure)
        })
      }
      yield* setFlash(session, { kind: "success", message: `Endpoint "${updated.success.name}" saved.` })
      return seeOther(pathFor(PATHS.endpoint, target.id))
    })
  ),
  postOn(PATHS.endpointRotate, ({ w, session, body, actor, target }) =>
    Effect.gen(function* () {
      const overlap = body.get("overlap") ?? DEFAULT_OVERLAP
      const rotated = yield* Effect.result(w.rotateEndpointSecret(actor, { ...target, overlap }))
      if (rotated._tag === "Failure") {
        if (rotated.failure._tag === "NotFound") return notFoundPage(httpMessage(rotated.failure))
        return yield* showEndpoint(session, target.id, {
          rotate: { overlap, error: httpMessage(rotated.failure) },
          status: httpStatus(rotated.failure)
        })
      }
      return yield* showEndpoint(session, target.id, { secret: rotated.success.secret })
    })
  ),
  postOn(PATHS.endpointDelete, ({ w, session, actor, target }) =>
    Effect.gen(function* () {
      const existing = yield* Effect.result(w.getEndpoint(target))
      const name = existing._tag === "Success" ? existing.success.name : target.id
      return yield* flashAfter(
        session,
        w.deleteEndpoint(actor, target),
        () => ({ kind: "success", message: `Endpoint "${name}" deleted.` }),
        (ok) => (ok ? PATHS.webhooks : pathFor(PATHS.endpoint, target.id))
      )
    })
  ),
  postOn(PATHS.endpointEnable, (post) =>
    onEndpoint(post, post.w.enableEndpoint(post.actor, post.target), (e) => ({
      kind: "success",
      message: `Endpoint "${e.name}" is on again.`
    }))
  ),
  postOn(PATHS.endpointTest, (post) =>
    onEndpoint(post, post.w.testEndpoint(post.actor, post.target), (p) => ({
      kind: p.ok ? "success" : "error",
      message: p.ok
        ? `Test event delivered: the receiver answered HTTP ${p.status}.`
        : `Test event failed: ${p.error ?? "no answer"}.`,
      ping: { ok: p.ok, status: p.status, durationMs: p.durationMs, error: p.error, response: p.response }
    }))
  ),
  postOn(PATHS.deliveryResend, ({ w, session, body, actor, target }) =>
    Effect.gen(function* () {
      const from = body.get("endpoint")
      const back = from !== null && isUuid(from) ? pathFor(PATHS.endpoint, from) : PATHS.webhooks
      const r = yield* Effect.result(w.resendDelivery(actor, target))
      yield* setFlash(
        session,
        r._tag === "Success"
          ? {
              kind: "success",
              message: `Delivery ${r.success.id} (${r.success.event}) is being sent again now, with the same delivery id.`
            }
          : { kind: "error", message: httpMessage(r.failure) }
      )
      return seeOther(
        r._tag === "Success" && r.success.endpointId !== null ? pathFor(PATHS.endpoint, r.success.endpointId) : back
      )
    })
  ),
  ...(["disable", "enable", "delete"] as const).map((action) =>
    postOn(
      action === "disable"
        ? PATHS.subscriptionDisable
        : action === "enable"
          ? PATHS.subscriptionEnable
          : PATHS.subscriptionDelete,
      ({ w, session, actor, target }) => {
        const operation =
          action === "disable"
            ? Effect.map(
                w.disableSubscription(actor, target),
                (s) => `Subscription to ${s.event} at ${s.url} turned off.`
              )
            : action === "enable"
              ? Effect.map(
                  w.enableSubscription(actor, target),
                  (s) => `Subscription to ${s.event} at ${s.url} turned on.`
                )
              : Effect.as(w.deleteSubscription(actor, target), "Subscription deleted.")
        return flashAfter(
          session,
          operation,
          (message) => ({ kind: "success", message }),
          () => `${PATHS.webhooks}#subscriptions`
        )
      }
    )
  )
)
