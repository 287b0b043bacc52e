// The endpoint form of the webhooks pages (add and edit): its fields, and what a posted form
// holds, as the Webhooks service takes it (its rules and error messages are the admin API's).
import { WEBHOOK_EVENTS, type WebhookEvent } from "../../domain/event-kinds.ts"
import { MAX_FILTER_BYTES } from "../../domain/filters/filter.ts"
import { checked, MAX_RATE_LIMIT, MIN_RATE_LIMIT, parseRateLimitText } from "../../webhooks/endpoints/validate.ts"
import { attr, html, type Html } from "./html.ts"

export const EVENT_LABELS: Readonly<Record<WebhookEvent, string>> = {
  "incident.created": "An incident is reported",
  "observation.created": "A safety observation is reported",
  "corrective_action.created": "A corrective action is raised",
  "corrective_action.closed": "A corrective action is completed or verified",
  "audit.created": "A site audit is saved",
  "inspection.failed": "An equipment inspection fails",
  "training_record.created": "A training record is added",
  "change.approved": "A change is approved",
  "change.implemented": "A change is implemented",
  "permit.approved": "A permit is approved",
  "permit.closed": "A permit is closed out",
  "webhook.failing": "Another webhook destination is failing",
  "webhook.recovered": "Another webhook destination delivers again",
  "webhook.switched_off": "Another webhook destination is switched off"
}

export type EndpointForm = {
  readonly name: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  /** As typed: a number, or empty for no limit. */
  readonly rateLimit: string
  readonly ordering: string
  /** As typed: JSON, or empty for none. */
  readonly filter: string
  readonly payload: "full" | "thin"
}

export const EMPTY: EndpointForm = {
  name: "",
  url: "",
  events: [],
  rateLimit: "",
  ordering: "none",
  filter: "",
  payload: "full"
}

/** The events offered: those of the modules that are on (docs/events.md#destinations), and any the endpoint
 *  already has (marked, so an admin sees why they would be refused now). */
export const endpointFields = (
  prefix: string,
  form: EndpointForm,
  offered: ReadonlyArray<string>
): Html => html`<label for="${prefix}-name">Name</label>
  <input type="text" id="${prefix}-name" name="name" maxlength="200" required value="${form.name}">
  <label for="${prefix}-url">Address</label>
  <input type="url" id="${prefix}-url" name="url" required value="${form.url}" placeholder="https://" aria-describedby="${prefix}-url-hint" inputmode="url" spellcheck="false">
  <p class="hint" id="${prefix}-url-hint">An https:// address on the public internet; private networks are refused.</p>
  <fieldset id="${prefix}-events">
    <legend>Events to send</legend>
    <div class="choices">
      ${WEBHOOK_EVENTS.filter((e) => offered.includes(e) || form.events.includes(e)).map(
        (e) =>
          html`<label for="${prefix}-event-${e}"><input type="checkbox" id="${prefix}-event-${e}" name="events" value="${e}"${attr("checked", form.events.includes(e))}> <span>${EVENT_LABELS[e]} <code class="muted">${e}</code>${offered.includes(e) ? "" : html` <span class="muted">(its module is turned off)</span>`}</span></label>`
      )}
    </div>
    <button type="button" class="link" data-check-all="${prefix}-events" hidden>Tick all / none</button>
  </fieldset>
  <label for="${prefix}-rate">At most this many deliveries a second</label>
  <input type="text" id="${prefix}-rate" name="rateLimit" value="${form.rateLimit}" inputmode="decimal" autocomplete="off" spellcheck="false" aria-describedby="${prefix}-rate-hint">
  <p class="hint" id="${prefix}-rate-hint">E.g. 5 or 0.5 (from ${MIN_RATE_LIMIT} to ${MAX_RATE_LIMIT}); empty for no limit. Retries, Send Again and replays keep to it too.</p>
  <label for="${prefix}-ordering"><input type="checkbox" id="${prefix}-ordering" name="ordering" value="record"${attr("checked", form.ordering === "record")}> <span>Send each record's events in the order they happened</span></label>
  <p class="hint">A later event of a record then waits while an earlier one is retried, until it gets through or runs out of attempts.</p>
  <label for="${prefix}-filter">Only events whose data matches (a filter)</label>
  <textarea id="${prefix}-filter" name="filter" rows="3" maxlength="${MAX_FILTER_BYTES}" spellcheck="false" aria-describedby="${prefix}-filter-hint">${form.filter}</textarea>
  <p class="hint" id="${prefix}-filter-hint">JSON over the fields of the event's data, e.g. <code>{"severity": {"$in": ["serious", "critical"]}}</code>; empty for every event.</p>
  <label for="${prefix}-payload"><input type="checkbox" id="${prefix}-payload" name="payload" value="thin"${attr("checked", form.payload === "thin")}> <span>Thin payloads: send only the record's id, company and where to read it</span></label>`

export const endpointFormOf = (body: URLSearchParams): EndpointForm => ({
  name: body.get("name") ?? "",
  url: body.get("url") ?? "",
  events: body.getAll("events"),
  rateLimit: body.get("rateLimit") ?? "",
  ordering: body.get("ordering") === "record" ? "record" : "none",
  filter: body.get("filter") ?? "",
  payload: body.get("payload") === "thin" ? "thin" : "full"
})

/** The form's rate as the operations take it (empty: no limit), refused as they refuse it. */
export const rateOf = (form: EndpointForm) => checked(() => parseRateLimitText(form.rateLimit))

/** The form's filter as the operations take it: JSON (checked by them), or null when empty. */
export const filterOf = (form: EndpointForm): unknown => {
  const t = form.filter.trim()
  if (t === "") return null
  try {
    return JSON.parse(t) as unknown
  } catch {
    return t // not JSON: refused by the operations as not an object
  }
}
