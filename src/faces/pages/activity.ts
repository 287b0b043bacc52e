// The activity log: newest first, filterable by kind ("endpoint.created") or family
// ("endpoint"), exactly as GET /admin/v1/activity?kind= answers.
import { Effect } from "effect"
import { HttpRouter } from "effect/http"
import { ACTIVITY_KINDS } from "../../access/activity.ts"
import { Webhooks } from "../../webhooks/service.ts"
import { html, type Html } from "./html.ts"
import { htmlResponse, page, when } from "./layout.ts"
import { PATHS } from "./paths.ts"
import { signedIn } from "./request.ts"

// The admin API's limits (src/faces/admin-api/webhooks-handlers.ts, "activity").
const ACTIVITY_LIMIT = 200

const FAMILY_LABELS: ReadonlyArray<readonly [family: string, label: string]> = [
  ["key", "API keys"],
  ["admin_token", "Admin tokens"],
  ["endpoint", "Endpoints"],
  ["subscription", "Subscriptions"],
  ["delivery", "Send Again"],
  ["deliveries", "Replays"]
]

/** The filter's choices: each family of the activity log's kinds, under its label. */
export const ACTIVITY_FAMILIES = FAMILY_LABELS.map(([family, label]) => ({
  family,
  label,
  kinds: (ACTIVITY_KINDS as ReadonlyArray<string>).filter((k) => k.startsWith(`${family}.`))
}))

const detailsOf = (details: Record<string, unknown>): Html => {
  const entries = Object.entries(details).filter(([, v]) => v !== null && v !== undefined)
  if (entries.length === 0) return html``
  return html`<ul class="details">${entries.map(
    ([k, v]) =>
      html`<li><span class="muted">${k}:</span> ${Array.isArray(v) ? v.join(", ") : typeof v === "object" ? JSON.stringify(v) : String(v)}</li>`
  )}</ul>`
}

const filterForm = (kind: string): Html => {
  const known = ACTIVITY_FAMILIES.some((f) => f.family === kind || f.kinds.includes(kind))
  return html`<form method="get" action="${PATHS.activity}" class="filter card" role="search" aria-label="Filter the activity log">
  <div>
    <label for="kind">Kind</label>
    <select id="kind" name="kind">
      <option value=""${kind === "" ? html` selected` : ""}>Everything</option>
      ${!known && kind !== "" ? html`<option value="${kind}" selected>${kind}</option>` : ""}
      ${ACTIVITY_FAMILIES.map(
        (f) => html`<optgroup label="${f.label}">
        <option value="${f.family}"${f.family === kind ? html` selected` : ""}>All ${f.label.toLowerCase()}</option>
        ${f.kinds.map((k) => html`<option value="${k}"${k === kind ? html` selected` : ""}>${k}</option>`)}
      </optgroup>`
      )}
    </select>
  </div>
  <button type="submit" class="primary">Filter</button>
</form>`
}

export const ActivityRoutes = HttpRouter.add(
  "GET",
  PATHS.activity,
  signedIn((session, request) =>
    Effect.gen(function* () {
      const w = yield* Webhooks
      const kind = (new URL(request.url, "http://admin.invalid").searchParams.get("kind") ?? "").trim().slice(0, 100)
      const shown = yield* w
        .listActivity({ companyId: session.actor.companyId, limit: ACTIVITY_LIMIT, kind })
        .pipe(Effect.orDie)
      return htmlResponse(
        page({
          title: "Activity log",
          section: "activity",
          session,
          content: html`<p>Every change to keys, admin tokens, endpoints and subscriptions, newest first.</p>
${filterForm(kind)}
${
  shown.length === 0
    ? html`<p class="muted">Nothing${kind === "" ? "" : html` of kind <code>${kind}</code>`} yet.</p>`
    : html`<table class="stack" id="activity">
  <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Subject</th><th scope="col">Details</th></tr></thead>
  <tbody>
  ${shown.map(
    (e) => html`<tr>
    <td data-label="When">${when(e.at)}</td>
    <td data-label="Who">${e.actorEmail ?? (typeof e.details["byKey"] === "string" ? html`<span class="muted">API key</span>${e.keyName === null ? "" : html` <strong>${e.keyName}</strong>`}` : html`<span class="muted">the service</span>`)}</td>
    <td data-label="What"><code>${e.kind}</code></td>
    <td data-label="Subject"><code class="muted">${e.subjectId ?? ""}</code></td>
    <td data-label="Details">${detailsOf(e.details)}</td>
  </tr>`
  )}
  </tbody>
</table>`
}`
        })
      )
    })
  )
)
