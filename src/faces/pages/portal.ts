// The portal (docs/operations.md#portal-links): the page of one API key that an admin's portal
// link opens for an integrator, with no admin account. Its subscriptions and their health,
// each one's deliveries and attempts as /api/v1/hooks/<id>/deliveries serves them, Send Again,
// recover since a time and a test event: the key's own operations (the Webhooks service's hook
// operations, which check the key's rights at each call and log under the key), never anything
// of another key or of the company's admin side. The link's token works once and opens a
// session, its cookie HttpOnly, SameSite=Strict, Path=/portal, and Secure behind TLS.
import { Effect, Layer } from "effect"
import { HttpRouter, type HttpServerRequest, type HttpServerResponse } from "effect/http"
import {
  endPortalSession,
  openPortalLink,
  peekPortalLink,
  PORTAL_REFUSALS,
  type PortalRefusal,
  type PortalSession,
  resolvePortalSession
} from "../../access/portal.ts"
import { isToken } from "../../access/keys/bearer-secrets.ts"
import type { DomainError } from "../../domain/errors.ts"
import { isUuid } from "../../domain/ids.ts"
import { TrustProxySetting } from "../../platform/config.ts"
import type { PingResult } from "../../webhooks/endpoints/ping.ts"
import type { DeliveryHealth } from "../../webhooks/deliveries/health.ts"
import type { HookAttemptDetail, HookDelivery } from "../../webhooks/subscriptions/hook-deliveries.ts"
import type { HookRecord } from "../../webhooks/subscriptions/hooks.ts"
import { Webhooks } from "../../webhooks/service.ts"
import { httpMessage, httpStatus } from "../http/errors.ts"
import { cameOverTls } from "../http/origin.ts"
import { healthCharts } from "./charts.ts"
import { html, raw, type Html, type Interpolation } from "./html.ts"
import { formatDate, htmlResponse, seeOther, when } from "./layout.ts"
import { PATHS } from "./paths.ts"
import { cookieOf, readOwnForm } from "./request.ts"
import { safeEqual } from "./security.ts"
import { EVENT_LABELS } from "./webhooks.ts"

export const PORTAL_COOKIE = "srs_portal"

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse
type Params = Readonly<Record<string, string | undefined>>

/**
 * The portal's cookie: HttpOnly, SameSite=Strict, only for /portal; Secure when the browser
 * came over TLS (a proxy we trust says so: the service itself speaks plain HTTP behind it).
 * Without maxAge it lasts the browser session; maxAge 0 deletes it. Pure.
 */
export const portalCookie = (
  value: string,
  options: { readonly secure: boolean; readonly maxAge?: number }
): string => {
  if (!/^[A-Za-z0-9_-]*$/.test(value)) throw new Error("a cookie value must be base64url")
  return [
    `${PORTAL_COOKIE}=${value}`,
    "Path=/portal",
    ...(options.maxAge === undefined ? [] : [`Max-Age=${Math.max(0, Math.trunc(options.maxAge))}`]),
    "HttpOnly",
    ...(options.secure ? ["Secure"] : []),
    "SameSite=Strict"
  ].join("; ")
}

const overTls = (request: Request) => Effect.map(TrustProxySetting, (trust) => cameOverTls(request, trust))

const pathWith = (path: string, values: Record<string, string>) =>
  Object.entries(values).reduce((p, [k, v]) => p.replace(`:${k}`, encodeURIComponent(v)), path)

/** The page shell of the portal: the company's (or the link's) name and colour, the key, no admin navigation. */
const portalPage = (options: {
  readonly title: string
  readonly session: PortalSession | null
  /** Before a session: the link's. */
  readonly brand?: PortalSession
  readonly content: Interpolation
  readonly notice?: { readonly kind: "success" | "error"; readonly message: string; readonly ping?: PingResult } | null
}): Html => {
  const s = options.session
  const b = s ?? options.brand ?? null
  const brand = b?.brandName ?? b?.companyName ?? ""
  const colour = b?.brandColour ?? null
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${options.title}${brand === "" ? "" : ` · ${brand}`} · Webhooks portal</title>
<link rel="stylesheet" href="${PATHS.styles}">
<script src="${PATHS.script}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
${colour !== null && /^#[0-9a-f]{6}$/.test(colour) ? raw(`<svg class="brand-bar" aria-hidden="true" focusable="false" viewBox="0 0 10 1" preserveAspectRatio="none"><rect width="10" height="1" fill="${colour}"/></svg>`) : ""}
<header class="top">
  <div class="brand">${brand === "" ? "Webhooks" : brand} <span>webhooks portal</span></div>
  ${
    s === null
      ? ""
      : html`<nav aria-label="Portal"><ul><li><a href="${PATHS.portal}">Subscriptions</a></li></ul></nav>
  <div class="who"><span>API key <strong>${s.keyName}</strong> <span class="muted">until ${formatDate(s.expiresAt)}</span></span>
    <form method="post" action="${PATHS.portalSignOut}" class="inline"><input type="hidden" name="csrf" value="${s.csrf}"><button type="submit" class="link">Sign out</button></form></div>`
  }
</header>
<main id="main" tabindex="-1">
${
  options.notice
    ? html`<div class="flash ${options.notice.kind}" role="${options.notice.kind === "error" ? "alert" : "status"}"><p>${options.notice.message}</p>${options.notice.ping ? pingFacts(options.notice.ping) : ""}</div>`
    : ""
}
<h1>${options.title}</h1>
${options.content}
</main>
</body>
</html>`
}

const pingFacts = (p: PingResult): Html => html`<dl class="ping">
  <dt>Receiver's status</dt><dd>${p.status === null ? "no answer" : String(p.status)}</dd>
  <dt>Time</dt><dd>${p.durationMs} ms</dd>
  ${p.error !== null ? html`<dt>Error</dt><dd>${p.error}</dd>` : ""}
  <dt>Answer</dt><dd><pre class="answer">${p.response === "" ? "(empty)" : p.response}</pre></dd>
</dl>`

const refused = (reason: PortalRefusal, status = 403) =>
  htmlResponse(
    portalPage({
      title: "Portal link refused",
      session: null,
      content: html`<div class="flash error" role="alert"><p>${PORTAL_REFUSALS[reason]}</p></div>`
    }),
    { status, headers: { "set-cookie": portalCookie("", { secure: false, maxAge: 0 }) } }
  )

/** The session the request's cookie names, or the refusal page. */
const portalSessionOf = (request: Request) =>
  Effect.gen(function* () {
    const cookie = cookieOf(request, PORTAL_COOKIE)
    const none = (reason: PortalRefusal) => ({ session: undefined, response: refused(reason, 401) })
    if (!isToken(cookie)) return none("none")
    const r = yield* resolvePortalSession(cookie)
    if ("refused" in r) return none(r.refused)
    return { session: r.session, response: undefined }
  })

const portalGet = <R>(
  path: HttpRouter.PathInput,
  handler: (session: PortalSession, request: Request, params: Params) => Effect.Effect<Response, never, R>
) =>
  HttpRouter.add("GET", path, (request: Request) =>
    Effect.gen(function* () {
      const s = yield* portalSessionOf(request)
      if (s.session === undefined) return s.response
      return yield* handler(s.session, request, yield* HttpRouter.params)
    })
  )

/** A form of the portal: same origin (as the admin pages' forms), a live session and its CSRF token. */
const portalPost = <R>(
  path: HttpRouter.PathInput,
  handler: (session: PortalSession, form: URLSearchParams, params: Params) => Effect.Effect<Response, never, R>
) =>
  HttpRouter.add("POST", path, (request: Request) =>
    Effect.gen(function* () {
      const read = yield* readOwnForm(request)
      if ("refused" in read) return read.refused
      const s = yield* portalSessionOf(request)
      if (s.session === undefined) return s.response
      const token = read.form.get("csrf")
      if (token === null || !safeEqual(token, s.session.csrf))
        return htmlResponse(
          portalPage({
            title: "Request refused",
            session: s.session,
            content: html`<div class="flash error" role="alert"><p>This form's security token is missing or out of date. Reload the page and try again.</p></div>`
          }),
          { status: 403 }
        )
      return yield* handler(s.session, read.form, yield* HttpRouter.params)
    })
  )

const keyOf = (s: PortalSession) => ({ keyId: s.keyId, companyId: s.companyId })

const stateOf = (h: HookRecord): Html =>
  h.active ? html`<span class="state on">On</span>` : html`<span class="state off">Off</span>`

const subscriptionFacts = (h: HookRecord): Html => html`<dl class="facts">
  <dt>Address</dt><dd class="url">${h.url}</dd>
  <dt>Event</dt><dd>${EVENT_LABELS[h.event as keyof typeof EVENT_LABELS] ?? h.event} <code class="muted">${h.event}</code></dd>
  <dt>State</dt><dd>${stateOf(h)}</dd>
  <dt>Rate</dt><dd>${h.rateLimit === undefined ? html`<span class="muted">no limit</span>` : `at most ${h.rateLimit} deliveries a second`}</dd>
  <dt>Order</dt><dd>${h.ordering === "record" ? "each record's events in the order they happened" : html`<span class="muted">none</span>`}</dd>
  <dt>Made</dt><dd>${when(h.createdAt)}</dd>
</dl>`

const homePage = (session: PortalSession, hooks: ReadonlyArray<HookRecord>): Html =>
  portalPage({
    title: "Your webhook subscriptions",
    session,
    content: html`<p>The subscriptions of API key <strong>${session.keyName}</strong>: where events are sent, and how each delivery went. Open one for its deliveries, Send Again and recovery.</p>
${
  hooks.length === 0
    ? html`<p class="muted">This key has no subscriptions. It subscribes with POST /api/v1/hooks.</p>`
    : html`<table class="stack" id="subscriptions">
  <thead><tr><th scope="col">Event</th><th scope="col">Address</th><th scope="col">State</th><th scope="col">Made</th></tr></thead>
  <tbody>
  ${hooks.map(
    (h) => html`<tr data-subscription-id="${h.id}">
    <td data-label="Event"><a href="${pathWith(PATHS.portalSubscription, { id: h.id })}">${h.event}</a>${h.rateLimit === undefined ? "" : html`<br><span class="muted">at most ${h.rateLimit} a second</span>`}${h.ordering === "record" ? html`<br><span class="muted">in order per record</span>` : ""}</td>
    <td data-label="Address" class="url">${h.url}</td>
    <td data-label="State">${stateOf(h)}</td>
    <td data-label="Made">${when(h.createdAt)}</td>
  </tr>`
  )}
  </tbody>
</table>`
}`
  })

const attemptsList = (d: HookDelivery): Html =>
  d.attempts.length === 0
    ? html`<span class="muted">none yet</span>`
    : html`<ol class="attempts">${d.attempts.map(
        (a) =>
          html`<li>${when(a.startedAt)}: ${a.status === null ? "" : `HTTP ${a.status}`}${a.error !== null && a.error !== `http ${a.status}` ? html` <span class="muted">${a.error}</span>` : ""} <span class="muted">(${a.durationMs} ms)</span></li>`
      )}</ol>`

const deliveriesTable = (session: PortalSession, subId: string, deliveries: ReadonlyArray<HookDelivery>): Html =>
  deliveries.length === 0
    ? html`<p class="muted">No deliveries in the last 30 days.</p>`
    : html`<table class="stack" id="deliveries">
  <thead><tr><th scope="col">Made</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Next attempt</th><th scope="col"><span class="muted">Actions</span></th></tr></thead>
  <tbody>
  ${deliveries.map(
    (d) => html`<tr data-delivery-id="${d.id}">
    <td data-label="Made">${when(d.createdAt)}<br><a href="${pathWith(PATHS.portalDelivery, { id: subId, deliveryId: d.id })}" aria-label="Delivery ${d.id}: every attempt and your receiver's answers"><code>${d.id}</code></a></td>
    <td data-label="State"><span class="state ${d.status}">${d.status}</span>${d.heldReason !== null ? html`<br><span class="muted">${d.heldReason}</span>` : ""}</td>
    <td data-label="Attempts"><span class="num">${d.attemptCount}</span>${attemptsList(d)}</td>
    <td data-label="Next attempt">${d.nextAttemptAt !== null ? when(d.nextAttemptAt) : d.finishedAt !== null ? html`<span class="muted">finished ${when(d.finishedAt)}</span>` : html`<span class="muted">—</span>`}</td>
    <td data-label="Actions"><form method="post" action="${pathWith(PATHS.portalResend, { id: subId, deliveryId: d.id })}" class="inline"><input type="hidden" name="csrf" value="${session.csrf}"><button type="submit" class="secondary" aria-label="Send again delivery ${d.id}">Send Again</button></form></td>
  </tr>`
  )}
  </tbody>
</table>`

/** One delivery: every attempt (the latest 50) with the start of the receiver's answer, as GET /api/v1/hooks/<id>/deliveries/<deliveryId> serves it. */
const deliveryPage = (session: PortalSession, subId: string, d: HookDelivery<HookAttemptDetail>): Html =>
  portalPage({
    title: `Delivery ${d.id}`,
    session,
    content: html`<p><a href="${pathWith(PATHS.portalSubscription, { id: subId })}">← The subscription</a></p>
<dl class="facts">
  <dt>Event</dt><dd>${d.event} <code class="muted">${d.eventId}</code></dd>
  <dt>State</dt><dd><span class="state ${d.status}">${d.status}</span>${d.heldReason !== null ? html` <span class="muted">${d.heldReason}</span>` : ""}</dd>
  <dt>Made</dt><dd>${when(d.createdAt)}</dd>
  <dt>Next attempt</dt><dd>${d.nextAttemptAt !== null ? when(d.nextAttemptAt) : d.finishedAt !== null ? html`<span class="muted">finished ${when(d.finishedAt)}</span>` : html`<span class="muted">—</span>`}</dd>
</dl>
<form method="post" action="${pathWith(PATHS.portalResend, { id: subId, deliveryId: d.id })}"><input type="hidden" name="csrf" value="${session.csrf}"><div class="actions"><button type="submit" class="primary">Send Again</button></div></form>
<h2>Attempts</h2>
${
  d.attempts.length === 0
    ? html`<p class="muted">Not attempted yet.</p>`
    : html`<table class="stack" id="attempts">
  <thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Answer</th><th scope="col">Time</th><th scope="col">Your receiver said</th></tr></thead>
  <tbody>${d.attempts.map(
    (a) => html`<tr>
    <td data-label="#" class="num">${a.number}</td>
    <td data-label="When">${when(a.startedAt)}</td>
    <td data-label="Answer">${a.status === null ? "" : `HTTP ${a.status}`}${a.error !== null && a.error !== `http ${a.status}` ? html`<br><span class="muted">${a.error}</span>` : ""}</td>
    <td data-label="Time" class="num">${a.durationMs} ms</td>
    <td data-label="Your receiver said">${a.response === null || a.response === "" ? html`<span class="muted">(nothing)</span>` : html`<pre class="answer">${a.response}</pre>`}</td>
  </tr>`
  )}</tbody>
</table>`
}`
  })

const STATUS_FILTERS = ["", "failed", "pending", "succeeded"] as const

const subscriptionPage = (
  session: PortalSession,
  hook: HookRecord,
  deliveries: ReadonlyArray<HookDelivery>,
  health: DeliveryHealth | null,
  status: string,
  options: {
    readonly notice?: { readonly kind: "success" | "error"; readonly message: string; readonly ping?: PingResult }
    readonly since?: string
  } = {}
): Html =>
  portalPage({
    title: `${hook.event} to ${hook.url}`,
    session,
    notice: options.notice ?? null,
    content: html`<p><a href="${PATHS.portal}">← All subscriptions</a></p>
${subscriptionFacts(hook)}
<div class="actions">
  <form method="post" action="${pathWith(PATHS.portalTest, { id: hook.id })}" class="inline"><input type="hidden" name="csrf" value="${session.csrf}"><button type="submit" class="primary">Send test event</button></form>
</div>
${health === null ? "" : healthCharts("health", health)}
<h2 id="deliveries-title">Deliveries</h2>
<form method="get" action="${pathWith(PATHS.portalSubscription, { id: hook.id })}" class="filter" aria-labelledby="deliveries-title">
  <label for="status">Show</label>
  <select id="status" name="status">${STATUS_FILTERS.map(
    (s) => html`<option value="${s}"${s === status ? raw(" selected") : ""}>${s === "" ? "all" : s}</option>`
  )}</select>
  <button type="submit" class="secondary">Show</button>
</form>
<p class="hint">The latest 50 of the last 30 days, newest first, each with its latest attempts. Send Again sends a delivery at once, under the same delivery id.</p>
${deliveriesTable(session, hook.id, deliveries)}
<form method="post" action="${pathWith(PATHS.portalRecover, { id: hook.id })}" class="card" id="recover" aria-labelledby="recover-title">
  <input type="hidden" name="csrf" value="${session.csrf}">
  <h2 id="recover-title">Recover after an outage</h2>
  <label for="recover-since">Send again every failed delivery since</label>
  <input type="text" id="recover-since" name="since" required value="${options.since ?? ""}" placeholder="2026-03-04T05:00:00Z" aria-describedby="recover-since-hint" spellcheck="false" autocomplete="off">
  <p class="hint" id="recover-since-hint">A date and time (ISO 8601, e.g. 2026-03-04T05:00:00Z, or a date), within the last 30 days. Deliveries that failed since then are sent again, at a gentle pace, under their own ids.</p>
  <div class="actions"><button type="submit" class="secondary">Recover</button></div>
</form>`
  })

const showSubscription = (
  session: PortalSession,
  id: string,
  status: string,
  options: Parameters<typeof subscriptionPage>[5] & { readonly httpStatus?: number } = {}
) =>
  Effect.gen(function* () {
    const w = yield* Webhooks
    const hook = yield* Effect.result(w.getHook(keyOf(session), id))
    if (hook._tag === "Failure")
      return htmlResponse(
        portalPage({
          title: "Not found",
          session,
          content: html`<div class="flash error" role="alert"><p>${httpMessage(hook.failure)}</p></div><p><a href="${PATHS.portal}">Back to your subscriptions</a></p>`
        }),
        { status: httpStatus(hook.failure) }
      )
    const filter = (STATUS_FILTERS as ReadonlyArray<string>).includes(status) ? status : ""
    const page = yield* w
      .listHookDeliveries(keyOf(session), id, {
        limit: 50,
        ...(filter === "" ? {} : { status: filter as "failed" | "pending" | "succeeded" })
      })
      .pipe(Effect.orElseSucceed(() => ({ data: [] as ReadonlyArray<HookDelivery>, next: null })))
    const health = yield* w.deliveryHealth({ subscriptionId: hook.success.id }).pipe(Effect.orElseSucceed(() => null))
    return htmlResponse(subscriptionPage(session, hook.success, page.data, health, filter, options), {
      status: options.httpStatus ?? 200
    })
  })

/** After an action on a subscription: its page, saying what happened. */
const afterAction = <A>(
  session: PortalSession,
  id: string,
  operation: Effect.Effect<A, DomainError, Webhooks>,
  success: (a: A) => { readonly kind: "success" | "error"; readonly message: string; readonly ping?: PingResult },
  extra: { readonly since?: string } = {}
) =>
  Effect.gen(function* () {
    const r = yield* Effect.result(operation)
    return yield* showSubscription(session, id, "", {
      ...extra,
      notice: r._tag === "Success" ? success(r.success) : { kind: "error", message: httpMessage(r.failure) },
      ...(r._tag === "Failure" ? { httpStatus: httpStatus(r.failure) } : {})
    })
  })

const param = (params: Params, name: string) => params[name] ?? ""

export const PortalRoutes = Layer.mergeAll(
  // The link: a page that opens it with a button, so that a link preview or a mail scanner
  // fetching it does not spend its one use; only the button's POST does.
  HttpRouter.add("GET", PATHS.portalLink, () =>
    Effect.gen(function* () {
      const token = param(yield* HttpRouter.params, "token")
      if (!isToken(token)) return refused("unknown", 404)
      const peek = yield* peekPortalLink(token)
      if ("refused" in peek) return refused(peek.refused)
      const link = peek.session
      return htmlResponse(
        portalPage({
          title: "Open the webhooks portal",
          session: null,
          brand: link,
          content: html`<p>This link opens a page of the webhook subscriptions and deliveries of API key <strong>${link.keyName}</strong>, until ${formatDate(link.expiresAt)}. It works once: open it in the browser you will use.</p>
<form method="post" action="${pathWith(PATHS.portalLink, { token })}"><div class="actions"><button type="submit" class="primary">Open the portal</button></div></form>`
        })
      )
    })
  ),
  HttpRouter.add("POST", PATHS.portalLink, (request: Request) =>
    Effect.gen(function* () {
      const read = yield* readOwnForm(request)
      if ("refused" in read) return read.refused
      const token = param(yield* HttpRouter.params, "token")
      if (!isToken(token)) return refused("unknown", 404)
      const opened = yield* openPortalLink(token)
      if ("refused" in opened) return refused(opened.refused)
      const secure = yield* overTls(request)
      return seeOther(PATHS.portal, { "set-cookie": portalCookie(opened.sessionId, { secure }) })
    })
  ),
  portalGet(PATHS.portal, (session) =>
    Effect.gen(function* () {
      const w = yield* Webhooks
      const hooks = yield* w.listHooks(keyOf(session)).pipe(Effect.map((r) => r.data))
      return htmlResponse(homePage(session, hooks))
    }).pipe(
      Effect.catch((e: DomainError) =>
        Effect.succeed(
          htmlResponse(
            portalPage({
              title: "Your webhook subscriptions",
              session,
              content: html`<div class="flash error" role="alert"><p>${httpMessage(e)}</p></div>`
            }),
            { status: httpStatus(e) }
          )
        )
      )
    )
  ),
  portalGet(PATHS.portalSubscription, (session, request, params) => {
    const query = new URL(request.url, "http://portal.invalid").searchParams
    const sent = query.get("sent")
    return showSubscription(
      session,
      param(params, "id"),
      query.get("status") ?? "",
      sent !== null && isUuid(sent)
        ? {
            notice: {
              kind: "success",
              message: `Delivery ${sent.toLowerCase()} is being sent again now, with the same delivery id.`
            }
          }
        : {}
    )
  }),
  portalGet(PATHS.portalDelivery, (session, _request, params) =>
    Effect.gen(function* () {
      const w = yield* Webhooks
      const id = param(params, "id")
      const d = yield* Effect.result(w.getHookDelivery(keyOf(session), id, param(params, "deliveryId")))
      if (d._tag === "Failure")
        return htmlResponse(
          portalPage({
            title: "Not found",
            session,
            content: html`<div class="flash error" role="alert"><p>${httpMessage(d.failure)}</p></div><p><a href="${PATHS.portal}">Back to your subscriptions</a></p>`
          }),
          { status: httpStatus(d.failure) }
        )
      return htmlResponse(deliveryPage(session, id, d.success))
    })
  ),
  // Sent again: back to the subscription's page (Post/Redirect/Get, so a reload sends nothing),
  // which says so; a refusal is said on the page at once.
  portalPost(PATHS.portalResend, (session, _form, params) =>
    Effect.gen(function* () {
      const w = yield* Webhooks
      const id = param(params, "id")
      const r = yield* Effect.result(w.resendHookDelivery(keyOf(session), id, param(params, "deliveryId")))
      if (r._tag === "Success")
        return seeOther(`${pathWith(PATHS.portalSubscription, { id })}?sent=${encodeURIComponent(r.success.id)}`)
      return yield* showSubscription(session, id, "", {
        notice: { kind: "error", message: httpMessage(r.failure) },
        httpStatus: httpStatus(r.failure)
      })
    })
  ),
  portalPost(PATHS.portalRecover, (session, form, params) =>
    Effect.flatMap(Webhooks, (w) => {
      const since = (form.get("since") ?? "").trim()
      return afterAction(
        session,
        param(params, "id"),
        w.recoverHook(keyOf(session), param(params, "id"), { since }),
        (r) => ({
          kind: "success",
          message:
            r.id === null
              ? `Nothing to recover: no delivery failed since ${formatDate(r.since)}.`
              : `Recovering ${r.queued.toLocaleString("en")} failed deliveries since ${formatDate(r.since)}; they are sent again at a gentle pace.`
        }),
        { since }
      )
    })
  ),
  portalPost(PATHS.portalTest, (session, _form, params) =>
    Effect.flatMap(Webhooks, (w) =>
      afterAction(session, param(params, "id"), w.testHook(keyOf(session), param(params, "id")), (p) => ({
        kind: p.ok ? "success" : "error",
        message: p.ok
          ? `Test event delivered: the receiver answered HTTP ${p.status}.`
          : `Test event failed: ${p.error ?? "no answer"}.`,
        ping: p
      }))
    )
  ),
  portalPost(PATHS.portalSignOut, (session) =>
    Effect.gen(function* () {
      yield* endPortalSession(session.linkId)
      return htmlResponse(
        portalPage({
          title: "Signed out",
          session: null,
          content: html`<p>You left the portal. Its link works once: to come back, ask for a new one.</p>`
        }),
        { headers: { "set-cookie": portalCookie("", { secure: false, maxAge: 0 }) } }
      )
    })
  )
)
