// The page shell of the admin pages, their answers (always with the security headers) and
// the small pieces every page uses: flash messages, forms that carry the CSRF token,
// buttons that ask for confirmation, dates.
import { HttpServerResponse } from "effect/http"
import { html, type Html, type Interpolation } from "./html.ts"
import { PATHS } from "./paths.ts"
import { PAGE_HEADERS } from "./security.ts"
import type { Flash, Session } from "../../access/sessions.ts"

export type Section = "keys" | "webhooks" | "activity" | "status"

const NAV: ReadonlyArray<{ readonly section: Section; readonly href: string; readonly label: string }> = [
  { section: "keys", href: PATHS.keys, label: "API keys" },
  { section: "webhooks", href: PATHS.webhooks, label: "Webhooks" },
  { section: "activity", href: PATHS.activity, label: "Activity log" },
  { section: "status", href: PATHS.status, label: "Status" }
]

const head = (title: string): Html => html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${title} · Safety Records admin</title>
<link rel="stylesheet" href="${PATHS.styles}">
<script src="${PATHS.script}" defer></script>
</head>`

/** A page for a signed-in admin: navigation, who is signed in, the flash, the content. */
export const page = (options: {
  readonly title: string
  readonly section: Section
  readonly session: Session
  readonly content: Interpolation
  /** Errors and notices made on this request (e.g. a refused form), besides the session's flash. */
  readonly notice?: Flash | undefined
}): Html => {
  const { session } = options
  return html`${head(options.title)}
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <div class="brand">Safety Records <span>admin</span></div>
  <nav aria-label="Admin sections">
    <ul>
      ${NAV.map(
        (n) =>
          html`<li><a href="${n.href}"${n.section === options.section ? html` aria-current="page"` : ""}>${n.label}</a></li>`
      )}
    </ul>
  </nav>
  <div class="who">
    <span>${session.actor.name} <span class="muted">(${session.actor.email})</span>${session.companyName !== "" ? html` · ${session.companyName}` : ""}</span>
    <form method="post" action="${PATHS.signOut}" class="inline">${csrfField(session)}<button type="submit" class="link">Sign out</button></form>
  </div>
</header>
<main id="main" tabindex="-1">
${flashBox(session.flash)}${flashBox(options.notice ?? null)}
<h1>${options.title}</h1>
${options.content}
</main>
</body>
</html>`
}

/** A page with no session: sign-in, refusals. */
export const barePage = (title: string, content: Interpolation): Html => html`${head(title)}
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><div class="brand">Safety Records <span>admin</span></div></header>
<main id="main" tabindex="-1" class="narrow">
<h1>${title}</h1>
${content}
</main>
</body>
</html>`

export const flashBox = (flash: Flash | null): Html => {
  if (flash === null) return html``
  const role = flash.kind === "error" ? "alert" : "status"
  return html`<div class="flash ${flash.kind}" role="${role}"><p>${flash.message}</p>${flash.ping ? pingResult(flash.ping) : ""}</div>`
}

const pingResult = (p: NonNullable<Flash["ping"]>): Html => html`<dl class="ping">
  <dt>Receiver's status</dt><dd>${p.status === null ? "no answer" : String(p.status)}</dd>
  <dt>Time</dt><dd>${p.durationMs} ms</dd>
  ${p.error !== null ? html`<dt>Error</dt><dd>${p.error}</dd>` : ""}
  <dt>Answer</dt><dd><pre class="answer">${p.response === "" ? "(empty)" : p.response}</pre></dd>
</dl>`

export const csrfField = (session: Session): Html => html`<input type="hidden" name="csrf" value="${session.csrf}">`

/** A one-button form; with `confirm`, the script asks before it is sent. */
export const postButton = (
  session: Session,
  action: string,
  label: Interpolation,
  options: {
    readonly confirm?: string
    readonly style?: "primary" | "danger" | "secondary"
    readonly accessibleLabel?: string
  } = {}
): Html =>
  html`<form method="post" action="${action}" class="inline"${options.confirm !== undefined ? html` data-confirm="${options.confirm}"` : ""}>${csrfField(session)}<button type="submit" class="${options.style ?? "secondary"}"${options.accessibleLabel !== undefined ? html` aria-label="${options.accessibleLabel}"` : ""}>${label}</button></form>`

/** The error next to a form, announced by screen readers. */
export const formError = (id: string, message: string | undefined): Html =>
  message === undefined ? html`` : html`<p class="form-error" role="alert" id="${id}">${message}</p>`

/** A secret shown once, with a copy button and the warning that it will not be shown again. */
export const shownOnce = (options: {
  readonly id: string
  readonly label: string
  readonly secret: string
  readonly warning: string
}): Html => html`<section class="once" aria-labelledby="${options.id}-label">
  <h2 id="${options.id}-label">${options.label}</h2>
  <p class="warning"><strong>Copy it now.</strong> ${options.warning}</p>
  <div class="secret-row">
    <code id="${options.id}" class="secret" tabindex="0">${options.secret}</code>
    <button type="button" class="primary" data-copy="${options.id}" hidden>Copy</button>
    <span class="copy-status" role="status" aria-live="polite"></span>
  </div>
</section>`

export const when = (iso: string | null, never = "never"): Html =>
  iso === null ? html`<span class="muted">${never}</span>` : html`<time datetime="${iso}">${formatDate(iso)}</time>`

/** "2026-03-04 05:06 UTC": the same for every admin, whatever their locale. */
export const formatDate = (iso: string): string => {
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return iso
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`
}

export const htmlResponse = (
  body: Html,
  options: { readonly status?: number; readonly headers?: Record<string, string> } = {}
) =>
  HttpServerResponse.text(body.value, {
    status: options.status ?? 200,
    contentType: "text/html; charset=utf-8",
    headers: { ...PAGE_HEADERS, ...options.headers }
  })

/** Post/Redirect/Get: 303 so the browser follows with a GET. */
export const seeOther = (location: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.redirect(location, { status: 303, headers: { ...PAGE_HEADERS, ...headers } })

/** The answer to a refused request: an HTML page for the browser; nothing was changed. */
export const refusedPage = (
  status: 400 | 403 | 404 | 413 | 415,
  title: string,
  reason: string,
  pending: Flash | null = null
) =>
  htmlResponse(
    barePage(
      title,
      // What the session had to say (the outcome of the form that led here) is shown too, not lost.
      html`${flashBox(pending)}<div class="flash error" role="alert"><p>${reason}</p></div>
<p>${status === 404 ? "" : "Nothing was changed. "}<a href="${PATHS.root}">Back to the admin pages</a></p>`
    ),
    { status }
  )

/** 429: the client's failed sign-ins are spent (made-up tokens or sessions); nothing was looked up. */
export const tooManyPage = (message: string, retryAfter: number) =>
  htmlResponse(barePage("Too many attempts", html`<div class="flash error" role="alert"><p>${message}</p></div>`), {
    status: 429,
    headers: { "retry-after": String(retryAfter) }
  })

/** 404 for an id in the path that is not the admin's company's (or not an id at all). */
export const notFoundPage = (message: string, session?: Session) =>
  refusedPage(404, "Not found", message, session?.flash ?? null)
