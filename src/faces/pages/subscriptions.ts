// The subscriptions keys made through the API, as the webhooks pages show them: the list by
// key (turn off or on, replay, delete) and a subscription's own page with its delivery health.
// Their routes are the webhooks pages' (webhooks.ts).
import type { CircuitView } from "../../webhooks/endpoints/circuit.ts"
import type { DeliveryHealth } from "../../webhooks/deliveries/health.ts"
import type { SubscriptionView } from "../../webhooks/subscriptions/subscriptions.ts"
import type { Session } from "../../access/sessions.ts"
import { healthCharts } from "./charts.ts"
import { html, type Html } from "./html.ts"
import { page, postButton, when } from "./layout.ts"
import { PATHS, pathFor } from "./paths.ts"

/** A circuit that is not closed, under a destination's state. */
export const circuitNote = (c: CircuitView): Html =>
  c.state === "closed"
    ? html``
    : html`<br><span class="state failing">Circuit ${c.state}</span> <span class="muted">not sending; next probe from ${when(c.nextProbeAt)}</span>`

export const subscriptionsSection = (session: Session, subscriptions: ReadonlyArray<SubscriptionView>): Html => {
  const byKey = new Map<string, Array<SubscriptionView>>()
  for (const s of subscriptions) byKey.set(s.keyId, [...(byKey.get(s.keyId) ?? []), s])
  return html`<section aria-labelledby="subscriptions-title" id="subscriptions">
<h2 id="subscriptions-title">Subscriptions made through the API</h2>
<p class="hint">Keys with the webhooks permission subscribe themselves (POST /api/v1/hooks). Revoking a key deletes its subscriptions.</p>
${
  byKey.size === 0
    ? html`<p class="muted">No key has subscribed to anything.</p>`
    : [...byKey.entries()].map(
        ([keyId, subs]) => html`<h3>Key ${subs[0]!.keyName ?? keyId}</h3>
<table class="stack">
  <thead><tr><th scope="col">Event</th><th scope="col">Address</th><th scope="col">State</th><th scope="col">Made</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
  <tbody>
  ${subs.map(
    (s) => html`<tr data-subscription-id="${s.id}">
    <td data-label="Event"><a href="${pathFor(PATHS.subscription, s.id)}" aria-label="${s.event} to ${s.url}: its deliveries' health">${s.event}</a>${s.rateLimit === null ? "" : html`<br><span class="muted">at most ${s.rateLimit} a second</span>`}${s.ordering === "record" ? html`<br><span class="muted">in order per record</span>` : ""}</td>
    <td data-label="Address" class="url">${s.url}</td>
    <td data-label="State">${s.active ? html`<span class="state on">On</span>` : html`<span class="state off">Off</span>`}${circuitNote(s.circuit)}</td>
    <td data-label="Made">${when(s.createdAt)}</td>
    <td data-label="Actions"><div class="actions">${
      s.active
        ? postButton(session, pathFor(PATHS.subscriptionDisable, s.id), "Turn off", {
            accessibleLabel: `Turn off ${s.event} to ${s.url}`
          })
        : postButton(session, pathFor(PATHS.subscriptionEnable, s.id), "Turn on", {
            accessibleLabel: `Turn on ${s.event} to ${s.url}`
          })
    }<a href="${pathFor(PATHS.subscriptionReplay, s.id)}" aria-label="Replay ${s.event} to ${s.url}">Replay</a>${postButton(
      session,
      pathFor(PATHS.subscriptionDelete, s.id),
      "Delete",
      {
        style: "danger",
        accessibleLabel: `Delete ${s.event} to ${s.url}`,
        confirm: `Delete the subscription to ${s.event} at ${s.url}? Its pending deliveries go with it.`
      }
    )}</div></td>
  </tr>`
  )}
  </tbody>
</table>`
      )
}
</section>`
}

export const subscriptionPage = (session: Session, s: SubscriptionView, health: DeliveryHealth | null): Html =>
  page({
    title: `Subscription to ${s.event}`,
    section: "webhooks",
    session,
    content: html`<p><a href="${PATHS.webhooks}#subscriptions">← All webhooks</a></p>
<dl class="facts">
  <dt>Key</dt><dd>${s.keyName ?? s.keyId}</dd>
  <dt>Address</dt><dd class="url">${s.url}</dd>
  <dt>Event</dt><dd>${s.event}</dd>
  <dt>State</dt><dd>${s.active ? html`<span class="state on">On</span>` : html`<span class="state off">Off</span>`}${circuitNote(s.circuit)}</dd>
  <dt>Rate</dt><dd>${s.rateLimit === null ? html`<span class="muted">no limit</span>` : `at most ${s.rateLimit} deliveries a second`}</dd>
  <dt>Order</dt><dd>${s.ordering === "record" ? "each record's events in the order they happened" : html`<span class="muted">none</span>`}</dd>
  <dt>Made</dt><dd>${when(s.createdAt)}</dd>
</dl>
<p><a href="${pathFor(PATHS.subscriptionReplay, s.id)}">Replay events to this subscription…</a> <span class="muted">(you see the count first)</span></p>
${health === null ? "" : healthCharts("health", health)}`
  })
