// The replay pages (docs/operations.md#replays): a form on an endpoint's (or subscription's) page,
// a dry run to confirm first (how many deliveries go where), the replay's progress with a
// Cancel button, and the offer Turn On makes to send what failed while an endpoint was off.
// Every step goes through the same operations as the admin API (src/webhooks/replay/manage.ts), so
// the rules and the messages are the same.
import { userActor } from "../../access/activity.ts"
import { Effect, Layer } from "effect"
import { HttpRouter, type HttpServerResponse } from "effect/http"
import { FILTER_DATE_FORMATS } from "../../domain/dates.ts"
import type { ReplayView } from "../../webhooks/replay/jobs.ts"
import type { ReplayOffer } from "../../webhooks/replay/queries.ts"
import { Webhooks } from "../../webhooks/service.ts"
import { httpMessage, httpStatus } from "../http/errors.ts"
import {
  replaysOf,
  showReplay,
  startReplay,
  stopReplay,
  type ReplayPlan,
  type ReplayRequest
} from "../../webhooks/replay/manage.ts"
import { attr, html, type Html } from "./html.ts"
import {
  csrfField,
  formError,
  formatDate,
  htmlResponse,
  page,
  notFoundPage,
  postButton,
  seeOther,
  when
} from "./layout.ts"
import { PATHS, pathFor } from "./paths.ts"
import { idOf, signedIn, signedInForm } from "./request.ts"
import { setFlash, type Session } from "../../access/sessions.ts"

type Kind = "endpoint" | "subscription"

/** What a replay goes to, as the pages name it. */
type Target = {
  readonly kind: Kind
  readonly id: string
  readonly label: string
  readonly url: string
  readonly events: ReadonlyArray<string>
  readonly on: boolean
  /** Its page (a subscription's: the webhooks page's list). */
  readonly back: string
}

export type ReplayForm = {
  readonly since: string
  readonly until: string
  readonly events: ReadonlyArray<string>
  readonly failed: boolean
}

/** The form as a query string, e.g. Turn On's offer (failed only, the window it was off). */
export const replayQuery = (form: ReplayForm): string => {
  const q = new URLSearchParams()
  if (form.since !== "") q.set("since", form.since)
  if (form.until !== "") q.set("until", form.until)
  for (const e of form.events) q.append("events", e)
  if (form.failed) q.set("failed", "1")
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

/** Reads the form (a query or a body); only the destination's events are kept. Pure. */
export const replayFormOf = (params: URLSearchParams): ReplayForm => ({
  since: (params.get("since") ?? "").trim().slice(0, 100),
  until: (params.get("until") ?? "").trim().slice(0, 100),
  events: params
    .getAll("events")
    .map((e) => e.trim())
    .filter((e) => e !== ""),
  failed: params.get("failed") === "1"
})

const requestOf = (target: Target, form: ReplayForm, dryRun: boolean): ReplayRequest => ({
  ...(target.kind === "endpoint" ? { endpointId: target.id } : { subscriptionId: target.id }),
  since: form.since === "" ? undefined : form.since,
  until: form.until === "" ? undefined : form.until,
  events: form.events.length > 0 ? form.events : undefined,
  failedOnly: form.failed,
  dryRun
})

const targetOf = (session: Session, kind: Kind, id: string): Effect.Effect<Target | undefined, never, Webhooks> =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    const companyId = session.actor.companyId
    if (kind === "endpoint") {
      const e = yield* Effect.result(w.getEndpoint({ id, companyId }))
      if (e._tag === "Failure") return undefined
      const v = e.success
      return {
        kind,
        id: v.id,
        label: `endpoint "${v.name}"`,
        url: v.url,
        events: v.events,
        on: v.enabled,
        back: pathFor(PATHS.endpoint, v.id)
      }
    }
    const all = yield* w.listSubscriptions({ companyId }).pipe(Effect.orElseSucceed(() => []))
    const s = all.find((x) => x.id === id.toLowerCase())
    if (s === undefined) return undefined
    return {
      kind,
      id: s.id,
      label: `subscription to ${s.event}`,
      url: s.url,
      events: [s.event],
      on: s.active,
      back: `${PATHS.webhooks}#subscriptions`
    }
  })

const formPath = (target: Pick<Target, "kind" | "id">) =>
  pathFor(target.kind === "endpoint" ? PATHS.endpointReplay : PATHS.subscriptionReplay, target.id)

const offNote = (target: Target): Html =>
  target.on
    ? html``
    : html`<p class="warning"><strong>The ${target.kind} is ${target.kind === "endpoint" ? "switched off" : "turned off"}.</strong> A replay waits until it is turned on.</p>`

const replayFormPage = (session: Session, target: Target, form: ReplayForm, error?: string): Html =>
  page({
    title: `Replay to ${target.label}`,
    section: "webhooks",
    session,
    content: html`<p><a href="${target.back}">← Back</a></p>
<p>Sends the ${target.kind}'s events again, oldest first, to <span class="url">${target.url}</span>. An event it had a delivery for goes with that delivery's id (receivers drop repeats); an event it never got gets a new one. Replays are sent a few a second, behind live deliveries; you see the count before anything is sent.</p>
${offNote(target)}
<form method="post" action="${formPath(target)}" class="card" id="replay-form" aria-labelledby="replay-form-title">
  ${csrfField(session)}
  <input type="hidden" name="step" value="check">
  <h2 id="replay-form-title">What to send again</h2>
  ${formError("replay-form-error", error)}
  <label for="replay-since">From</label>
  <input type="text" id="replay-since" name="since" value="${form.since}" placeholder="2026-03-01" aria-describedby="replay-dates-hint" spellcheck="false">
  <label for="replay-until">Until (not included)</label>
  <input type="text" id="replay-until" name="until" value="${form.until}" placeholder="2026-03-04T12:00:00Z" aria-describedby="replay-dates-hint" spellcheck="false">
  <p class="hint" id="replay-dates-hint">${FILTER_DATE_FORMATS}; UTC unless an offset is given. Empty: from when the ${target.kind} was made, until now.</p>
  ${
    target.events.length > 1
      ? html`<fieldset id="replay-events">
    <legend>Events (none ticked: all of them)</legend>
    <div class="choices">
      ${target.events.map(
        (e) =>
          html`<label for="replay-event-${e}"><input type="checkbox" id="replay-event-${e}" name="events" value="${e}"${attr("checked", form.events.includes(e))}> <code>${e}</code></label>`
      )}
    </div>
  </fieldset>`
      : html`<p>Events: <code>${target.events.join(", ")}</code></p>`
  }
  <label class="check" for="replay-failed"><input type="checkbox" id="replay-failed" name="failed" value="1"${attr("checked", form.failed)}> <span>Only events never delivered successfully to it</span></label>
  <div class="actions"><button type="submit" class="primary">Count first</button></div>
</form>`
  })

const duration = (seconds: number): string =>
  seconds < 60
    ? `${seconds} s`
    : seconds < 3_600
      ? `${Math.ceil(seconds / 60)} min`
      : `${(seconds / 3_600).toFixed(1)} h`

/** The dry run: how many deliveries go to which destination, and a button to start. */
const checkPage = (session: Session, target: Target, form: ReplayForm, plan: ReplayPlan): Html => {
  // The window exactly as counted: "until now" must not move between counting and starting.
  const exact: ReplayForm = { since: plan.since, until: plan.until, events: form.events, failed: plan.failedOnly }
  return page({
    title: `Replay to ${target.label}: check`,
    section: "webhooks",
    session,
    content: html`<p><a href="${formPath(target)}${replayQuery(form)}">← Change</a></p>
<section class="card" aria-labelledby="plan-title" id="replay-plan">
  <h2 id="plan-title">${plan.deliveries === 0 ? "Nothing to send" : `${plan.deliveries} ${plan.deliveries === 1 ? "delivery" : "deliveries"} to send`}</h2>
  <dl class="facts">
    <dt>To</dt><dd>${target.kind} <code>${target.id}</code><br><span class="url">${plan.destination.url}</span></dd>
    <dt>Events</dt><dd>${plan.events.join(", ")}</dd>
    <dt>From</dt><dd>${when(plan.since)}</dd>
    <dt>Until</dt><dd>${when(plan.until)}</dd>
    <dt>Only failed</dt><dd>${plan.failedOnly ? "yes: events never delivered successfully" : "no: delivered events go again too"}</dd>
    <dt>Matched</dt><dd>${plan.matched} events</dd>
    <dt>Again</dt><dd data-count="resend">${plan.resend} with their original delivery ids</dd>
    <dt>New</dt><dd data-count="create">${plan.create} events the ${target.kind} never had a delivery for</dd>
    ${plan.failedOnly ? html`<dt>Skipped</dt><dd>${plan.skippedDelivered} already delivered</dd>` : ""}
    ${plan.skippedInFlight > 0 ? html`<dt>In flight</dt><dd>${plan.skippedInFlight} being attempted right now (left alone)</dd>` : ""}
    ${plan.deliveries > 0 ? html`<dt>Time</dt><dd>about ${duration(plan.estimatedSeconds)} at ${plan.rate} a second</dd>` : ""}
  </dl>
  ${offNote(target)}
  ${
    plan.deliveries === 0
      ? html`<p><a href="${target.back}">Back</a></p>`
      : html`<form method="post" action="${formPath(target)}" class="inline" id="replay-start">
    ${csrfField(session)}
    <input type="hidden" name="step" value="start">
    <input type="hidden" name="since" value="${exact.since}">
    <input type="hidden" name="until" value="${exact.until}">
    ${exact.events.map((e) => html`<input type="hidden" name="events" value="${e}">`)}
    ${exact.failed ? html`<input type="hidden" name="failed" value="1">` : ""}
    <div class="actions"><button type="submit" class="primary">Start replay</button> <a href="${target.back}">Not now</a></div>
  </form>`
  }
</section>`
  })
}

const stateBadge = (r: ReplayView): Html => html`<span class="state ${r.state}">${r.state}</span>`

const progressText = (r: ReplayView): Html =>
  html`${r.progress.sent} of ${r.progress.queued} sent${r.progress.skipped > 0 ? html`, ${r.progress.skipped} skipped` : ""}${r.progress.restored > 0 ? html`, ${r.progress.restored} put back` : ""}`

/** Replays, newest first, linked to their pages. */
export const replaysTable = (
  replays: ReadonlyArray<ReplayView>,
  options: { readonly showDestination?: boolean } = {}
): Html =>
  replays.length === 0
    ? html`<p class="muted">No replays yet.</p>`
    : html`<table class="stack" id="replays">
  <thead><tr><th scope="col">Made</th>${options.showDestination ? html`<th scope="col">To</th>` : ""}<th scope="col">State</th><th scope="col">Progress</th><th scope="col">Range</th></tr></thead>
  <tbody>
  ${replays.map(
    (r) => html`<tr data-replay-id="${r.id}">
    <td data-label="Made"><a href="${pathFor(PATHS.replay, r.id)}">${formatDate(r.createdAt)}</a><br><span class="muted">${madeBy(r)}</span></td>
    ${options.showDestination ? html`<td data-label="To">${r.destination.kind} ${r.destination.name ?? ""}<br><span class="url muted">${r.destination.url ?? ""}</span></td>` : ""}
    <td data-label="State">${stateBadge(r)}${r.waiting !== null ? html`<br><span class="muted">${r.waiting}</span>` : ""}</td>
    <td data-label="Progress">${progressText(r)}</td>
    <td data-label="Range">${when(r.since)} to ${when(r.until)}${r.failedOnly ? html`<br><span class="muted">failed only</span>` : ""}</td>
  </tr>`
  )}
  </tbody>
</table>`

/** Who made it: an admin, an API key recovering its own subscription, or the service. */
const madeBy = (r: ReplayView): string =>
  r.createdBy ?? (r.byKey !== null ? `API key "${r.byKey.name}"` : "the service")

const replayPage = (session: Session, r: ReplayView): Html => {
  const done = r.progress.sent + r.progress.skipped + r.progress.restored
  const back =
    r.destination.kind === "endpoint" ? pathFor(PATHS.endpoint, r.destination.id) : `${PATHS.webhooks}#subscriptions`
  return page({
    title: `Replay to ${r.destination.kind} ${r.destination.name !== null ? `"${r.destination.name}"` : r.destination.id}`,
    section: "webhooks",
    session,
    content: html`<p><a href="${back}">← Back</a></p>
<section class="card" aria-labelledby="progress-title" id="replay-progress">
  <h2 id="progress-title">${stateBadge(r)} ${progressText(r)}</h2>
  <progress max="${Math.max(1, r.progress.queued)}" value="${done}" aria-labelledby="progress-title"></progress>
  ${r.waiting !== null ? html`<p class="warning"><strong>Waiting:</strong> ${r.waiting}</p>` : ""}
  <dl class="facts">
    <dt>To</dt><dd><span class="url">${r.destination.url ?? "(deleted)"}</span></dd>
    <dt>Queued</dt><dd data-count="queued">${r.progress.queued}</dd>
    <dt>Sent</dt><dd data-count="sent">${r.progress.sent}</dd>
    <dt>Handed to the engine</dt><dd data-count="in-engine">${r.progress.inEngine}</dd>
    <dt>Skipped</dt><dd data-count="skipped">${r.progress.skipped}</dd>
    ${r.state === "cancelled" ? html`<dt>Put back</dt><dd data-count="restored">${r.progress.restored}</dd>` : ""}
    <dt>${r.state === "cancelled" ? "Not sent" : "Remaining"}</dt><dd data-count="remaining">${r.progress.remaining}</dd>
    <dt>Events</dt><dd>${r.events.join(", ")}</dd>
    <dt>Range</dt><dd>${when(r.since)} to ${when(r.until)}${r.failedOnly ? ", failed only" : ""}</dd>
    <dt>Made</dt><dd>${when(r.createdAt)} by ${madeBy(r)} (${r.source})</dd>
    ${r.finishedAt !== null ? html`<dt>${r.state === "cancelled" ? "Cancelled" : "Finished"}</dt><dd>${when(r.finishedAt)}${r.cancelledBy !== null ? html` by ${r.cancelledBy}` : ""}</dd>` : ""}
  </dl>
  <div class="actions">
    ${
      r.state === "running"
        ? html`<a href="${pathFor(PATHS.replay, r.id)}">Refresh</a> ${postButton(
            session,
            pathFor(PATHS.replayCancel, r.id),
            "Cancel replay",
            {
              style: "danger",
              confirm: "Cancel this replay? What it has not sent stays as it was; nothing already sent is undone."
            }
          )}`
        : ""
    }
  </div>
</section>`
  })
}

/** The offer on the endpoint's page after Turn On. */
export const replayOfferBox = (
  endpointId: string,
  offer: ReplayOffer
): Html => html`<section class="flash info" aria-labelledby="offer-title" id="replay-offer">
  <h2 id="offer-title">Send what it missed?</h2>
  <p>It was turned on again ${when(offer.at)}. Deliveries that failed before it was switched off, and events while it was off (${when(offer.since)} to ${when(offer.until)}), were not delivered.</p>
  <p><a href="${pathFor(PATHS.endpointReplay, endpointId)}${replayQuery({ since: offer.since, until: offer.until, events: [], failed: true })}">Replay what failed while it was off</a> <span class="muted">(you see the count first)</span></p>
</section>`

/** Runs `use` on the replay's destination in the path; an unknown one is the 404 page. */
const onTarget = <R>(
  session: Session,
  kind: Kind,
  params: Readonly<Record<string, string | undefined>>,
  use: (target: Target) => Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
) =>
  Effect.flatMap(targetOf(session, kind, idOf(params)), (target) =>
    target === undefined ? Effect.succeed(notFoundPage(`no ${kind} ${idOf(params)}`, session)) : use(target)
  )

const formRoutes = (kind: Kind, path: typeof PATHS.endpointReplay | typeof PATHS.subscriptionReplay) =>
  Layer.mergeAll(
    HttpRouter.add(
      "GET",
      path,
      signedIn((session, request, params) =>
        onTarget(session, kind, params, (target) =>
          Effect.succeed(
            htmlResponse(
              replayFormPage(session, target, replayFormOf(new URL(request.url, "http://admin.invalid").searchParams))
            )
          )
        )
      )
    ),
    HttpRouter.add(
      "POST",
      path,
      signedInForm((session, body, params) =>
        onTarget(session, kind, params, (target) =>
          Effect.gen(function* () {
            const form = replayFormOf(body)
            const start = body.get("step") === "start"
            const actor = userActor(session.actor)
            const r = yield* Effect.result(
              startReplay(actor, session.actor.companyId, "pages", requestOf(target, form, !start))
            )
            if (r._tag === "Failure") {
              if (r.failure._tag === "NotFound") return notFoundPage(httpMessage(r.failure))
              return htmlResponse(replayFormPage(session, target, form, httpMessage(r.failure)), {
                status: httpStatus(r.failure)
              })
            }
            if ("plan" in r.success) {
              if (!start) return htmlResponse(checkPage(session, target, form, r.success.plan))
              yield* setFlash(session, {
                kind: "success",
                message: "Nothing to replay: every event in the range was delivered."
              })
              return seeOther(target.back)
            }
            const made = r.success.replay
            yield* setFlash(session, {
              kind: "success",
              message: `Replay started: ${made.progress.queued} deliveries to ${target.url}, a few a second behind live deliveries.`
            })
            return seeOther(pathFor(PATHS.replay, made.id))
          })
        )
      )
    )
  )

export const ReplaysRoutes = Layer.mergeAll(
  formRoutes("endpoint", PATHS.endpointReplay),
  formRoutes("subscription", PATHS.subscriptionReplay),
  HttpRouter.add(
    "GET",
    PATHS.replay,
    signedIn((session, _request, params) =>
      Effect.gen(function* () {
        const r = yield* Effect.result(showReplay(session.actor.companyId, idOf(params)))
        if (r._tag === "Failure") return notFoundPage(httpMessage(r.failure), session)
        return htmlResponse(replayPage(session, r.success))
      })
    )
  ),
  HttpRouter.add(
    "POST",
    PATHS.replayCancel,
    signedInForm((session, _body, params) =>
      Effect.gen(function* () {
        const id = idOf(params)
        const r = yield* Effect.result(stopReplay(userActor(session.actor), session.actor.companyId, id))
        if (r._tag === "Failure" && r.failure._tag === "NotFound") return notFoundPage(httpMessage(r.failure))
        yield* setFlash(
          session,
          r._tag === "Success"
            ? {
                kind: "success",
                message: `Replay cancelled: ${r.success.progress.sent} sent, ${r.success.progress.remaining} not sent.`
              }
            : { kind: "error", message: httpMessage(r.failure) }
        )
        return seeOther(pathFor(PATHS.replay, id))
      })
    )
  )
)

/** The company's (or an endpoint's) replays for a page; none when they cannot be read. */
export const recentReplays = (companyId: string, filter: { readonly endpointId?: string } = {}) =>
  replaysOf(companyId, { ...filter, limit: 10 }).pipe(Effect.orElseSucceed((): ReadonlyArray<ReplayView> => []))
