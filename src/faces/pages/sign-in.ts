// Signing in with an admin token (the CLI's `tokens create --as <e-mail>`) and out. The token
// is checked exactly as the admin API checks it and then forgotten: the browser keeps a
// session id in the __Host-srs_admin cookie. The sign-in form is protected against login
// CSRF by the same-origin check and a double-submitted token (a __Host- cookie it cannot
// be set by another site, and the form's hidden field).
import { Effect, Layer } from "effect"
import { HttpRouter, type HttpServerRequest } from "effect/http"
import { html } from "./html.ts"
import { barePage, htmlResponse, refusedPage, seeOther } from "./layout.ts"
import { PATHS } from "./paths.ts"
import { cookieOf, guardedCheck, localTarget, readOwnForm, sessionOf, signedInForm } from "./request.ts"
import { isToken, randomToken } from "../../access/keys/bearer-secrets.ts"
import { expiredCookie, safeEqual, serializeCookie, SESSION_COOKIE, SIGN_IN_COOKIE } from "./security.ts"
import { endSession, openSession } from "../../access/sessions.ts"
import { needsLookup } from "../../access/tokens.ts"

const ENDED_MESSAGES: Readonly<Record<string, string>> = {
  session:
    "Your session has ended: it expired, you signed out elsewhere, or its admin token was revoked. Sign in again.",
  role: "You are no longer an admin of this company.",
  "signed-out": "You signed out."
}

const signInForm = (options: {
  readonly csrf: string
  readonly next: string | undefined
  readonly error?: string
  readonly notice?: string
}) =>
  barePage(
    "Sign in",
    html`${options.notice !== undefined ? html`<div class="flash info" role="status"><p>${options.notice}</p></div>` : ""}
<form method="post" action="${PATHS.signIn}" class="card">
  <input type="hidden" name="csrf" value="${options.csrf}">
  ${options.next !== undefined ? html`<input type="hidden" name="next" value="${options.next}">` : ""}
  <label for="token">Admin token</label>
  <input type="password" id="token" name="token" autocomplete="off" spellcheck="false" required
    aria-describedby="token-hint${options.error !== undefined ? " token-error" : ""}"${options.error !== undefined ? html` aria-invalid="true" autofocus` : ""}>
  <p class="hint" id="token-hint">An admin makes one on the server: <code>npm run admin -- tokens create --as &lt;your e-mail&gt;</code>. It starts with <code>mat_</code>. This browser keeps only a session (12 hours without use at most), never the token.</p>
  ${options.error !== undefined ? html`<p class="form-error" role="alert" id="token-error">${options.error}</p>` : ""}
  <div class="actions"><button type="submit" class="primary">Sign in</button></div>
</form>`
  )

/** The sign-in form with its double-submit token (kept while the cookie lasts, so two tabs work). */
const showSignIn = (
  request: HttpServerRequest.HttpServerRequest,
  options: {
    readonly next: string | undefined
    readonly error?: string
    readonly notice?: string
    readonly status?: number
  }
) => {
  const existing = cookieOf(request, SIGN_IN_COOKIE)
  const csrf = isToken(existing) ? existing : randomToken()
  return htmlResponse(
    signInForm({
      csrf,
      next: options.next,
      ...(options.error !== undefined ? { error: options.error } : {}),
      ...(options.notice !== undefined ? { notice: options.notice } : {})
    }),
    {
      status: options.status ?? 200,
      headers: { "set-cookie": serializeCookie(SIGN_IN_COOKIE, csrf) }
    }
  )
}

const nextOf = (value: string | null | undefined): string | undefined => {
  const target = localTarget(value)
  return target === PATHS.signIn || target?.startsWith(`${PATHS.signIn}?`) ? undefined : target
}

const searchParam = (request: HttpServerRequest.HttpServerRequest, name: string): string | null =>
  new URL(request.url, "http://admin.invalid").searchParams.get(name)

export const SignInRoutes = Layer.mergeAll(
  HttpRouter.add("GET", PATHS.root, (request) =>
    Effect.map(sessionOf(request, { takeFlash: false }), (found) =>
      "refused" in found ? found.refused : seeOther("session" in found.checked ? PATHS.keys : PATHS.signIn)
    )
  ),
  HttpRouter.add("GET", PATHS.signIn, (request) =>
    Effect.gen(function* () {
      const next = nextOf(searchParam(request, "next"))
      const found = yield* sessionOf(request, { takeFlash: false })
      if ("refused" in found) return found.refused
      if ("session" in found.checked) return seeOther(next ?? PATHS.keys)
      const ended = ENDED_MESSAGES[searchParam(request, "ended") ?? ""]
      return showSignIn(request, { next, ...(ended !== undefined ? { notice: ended } : {}) })
    })
  ),
  HttpRouter.add("POST", PATHS.signIn, (request) =>
    Effect.gen(function* () {
      const read = yield* readOwnForm(request)
      if ("refused" in read) return read.refused
      const expected = cookieOf(request, SIGN_IN_COOKIE)
      const sent = read.form.get("csrf")
      if (!isToken(expected) || sent === null || !safeEqual(sent, expected)) {
        return refusedPage(
          403,
          "Request refused",
          "The sign-in form's security token is missing or out of date. Open the sign-in page again."
        )
      }
      const next = nextOf(read.form.get("next"))
      const token = (read.form.get("token") ?? "").trim()
      if (token === "")
        return showSignIn(request, { next, error: "Paste your admin token (it starts with mat_).", status: 400 })
      const guarded = needsLookup(token)
        ? yield* guardedCheck(request, token, openSession(token), (o) => !("refused" in o))
        : { checked: yield* openSession(token) }
      if ("refused" in guarded) return guarded.refused
      const opened = guarded.checked
      if ("refused" in opened)
        return showSignIn(request, { next, error: `Not signed in: ${opened.refused}.`, status: 401 })
      return seeOther(next ?? PATHS.keys, { "set-cookie": serializeCookie(SESSION_COOKIE, opened.sessionId) })
    })
  ),
  HttpRouter.add(
    "POST",
    PATHS.signOut,
    signedInForm((session) =>
      Effect.as(
        endSession(session),
        seeOther(`${PATHS.signIn}?ended=signed-out`, { "set-cookie": expiredCookie(SESSION_COOKIE) })
      )
    )
  )
)
