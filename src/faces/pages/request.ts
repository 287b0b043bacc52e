// What every admin page request goes through. A page (GET) needs a live session, else the
// browser goes to the sign-in page. A form (POST) must come from this origin (Origin and
// Sec-Fetch-Site), be a small urlencoded body, belong to a live session and carry that
// session's CSRF token; otherwise it is refused with a 403 page before anything changes.
import { ByteSize, Effect } from "effect"
import { HttpIncomingMessage, HttpRouter, type HttpServerRequest, type HttpServerResponse } from "effect/http"
import { refusedPage, seeOther, tooManyPage } from "./layout.ts"
import { ADMIN_WEB_ROUTES, PATHS } from "./paths.ts"
import { routeTable } from "../http/routes.ts"
import { checkSameOrigin, expiredCookie, safeEqual, SESSION_COOKIE } from "./security.ts"
import { resolveSession, type EndedReason, type Resolved, type Session } from "../../access/sessions.ts"
import { ApiKeys } from "../../access/keys/service.ts"
import { isToken } from "../../access/keys/bearer-secrets.ts"
import { tooManyTokenFailures } from "../../access/tokens.ts"
import { ApiSettings } from "../../platform/api-settings.ts"
import { TrustProxySetting } from "../../platform/config.ts"
import { clientOf } from "../api/auth.ts"

export const MAX_FORM_BYTES = 64 * 1024

type Request = HttpServerRequest.HttpServerRequest
type Response = HttpServerResponse.HttpServerResponse

/** A cookie of the request (parsed by effect/http: the first of a repeated name wins, the most specific path). */
export const cookieOf = (request: Request, name: string): string | undefined => request.cookies[name]

/** The path and query of a request, if it is one of ours to come back to after signing in. */
export const localTarget = (url: string | null | undefined): string | undefined => {
  if (url === null || url === undefined) return undefined
  if (!/^\/admin(\/[A-Za-z0-9/_.-]*)?(\?[A-Za-z0-9=&%._-]*)?$/.test(url) || url.includes("//") || url.includes(".."))
    return undefined
  // A page, that is, something a browser can be sent to (not /admin/sign-out, a form's action).
  const path = url.split("?")[0]!
  return PAGES.routeOf("GET", path) === "unmatched" ? undefined : url
}

// Only GET routes, so a path with only a form (POST) is no page: its label is "unmatched".
const PAGES = routeTable(ADMIN_WEB_ROUTES.filter((r) => r.method === "GET"))

/** To the sign-in page, saying why when there was a session, and dropping its cookie. */
const toSignIn = (request: Request, ended: EndedReason | undefined) => {
  const params = new URLSearchParams()
  const next = request.method === "GET" ? localTarget(request.url) : undefined
  if (next !== undefined && next !== PATHS.root) params.set("next", next)
  if (ended !== undefined) params.set("ended", ended)
  const query = params.toString()
  return seeOther(
    `${PATHS.signIn}${query === "" ? "" : `?${query}`}`,
    ended !== undefined ? { "set-cookie": expiredCookie(SESSION_COOKIE) } : {}
  )
}

/**
 * A credential of the pages (a session cookie, a pasted admin token) checked with the client's
 * failed authentications, as the read API bounds unknown keys: a made-up one costs a lookup only
 * while the client has failures left; past them, a 429 page and no lookup.
 */
export type Guarded<A> = { readonly checked: A } | { readonly refused: Response }

export const guardedCheck = <A, E, R>(
  request: Request,
  credential: string,
  check: Effect.Effect<A, E, R>,
  accepted: (a: A) => boolean
) =>
  Effect.gen(function* () {
    const keys = yield* ApiKeys
    const guarded = yield* keys.guard(clientOf(request, yield* TrustProxySetting), credential, check, accepted)
    if ("checked" in guarded) return guarded as Guarded<A>
    const { authFailuresPerMinute } = yield* ApiSettings
    const message = (guarded.error ?? tooManyTokenFailures(authFailuresPerMinute, guarded.retryAfter)).message
    return { refused: tooManyPage(message, guarded.retryAfter) } as Guarded<A>
  })

/** The session the request's cookie names; a cookie that is no session's counts as a failed authentication. */
export const sessionOf = (request: Request, options: { readonly takeFlash: boolean }) => {
  const cookie = cookieOf(request, SESSION_COOKIE)
  // No cookie, or none of a session's shape: decided without a lookup.
  if (!isToken(cookie))
    return Effect.map(resolveSession(cookie, options), (checked): Guarded<Resolved> => ({ checked }))
  return guardedCheck(request, cookie, resolveSession(cookie, options), (r) => "session" in r)
}

export type PageHandler<R> = (
  session: Session,
  request: Request,
  params: Readonly<Record<string, string | undefined>>
) => Effect.Effect<Response, never, R>
export type FormHandler<R> = (
  session: Session,
  form: URLSearchParams,
  params: Readonly<Record<string, string | undefined>>,
  request: Request
) => Effect.Effect<Response, never, R>

/** A page for a signed-in admin. */
export const signedIn =
  <R>(handler: PageHandler<R>) =>
  (request: Request) =>
    Effect.gen(function* () {
      const cookie = cookieOf(request, SESSION_COOKIE)
      const found = yield* sessionOf(request, { takeFlash: true })
      if ("refused" in found) return found.refused
      const resolved = found.checked
      if ("ended" in resolved) return toSignIn(request, cookie === undefined ? undefined : resolved.ended)
      return yield* handler(resolved.session, request, yield* HttpRouter.params)
    })

export type FormRead = { readonly form: URLSearchParams } | { readonly refused: Response }

/** A small application/x-www-form-urlencoded body (what every form of these pages sends). */
const readForm = (request: Request): Effect.Effect<FormRead> => {
  const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
  if (type !== "application/x-www-form-urlencoded") {
    return Effect.succeed({
      refused: refusedPage(
        415,
        "Request refused",
        "The admin pages take forms sent as application/x-www-form-urlencoded only."
      )
    })
  }
  const length = Number(request.headers["content-length"] ?? "0")
  if (Number.isFinite(length) && length > MAX_FORM_BYTES) {
    return Effect.succeed({ refused: refusedPage(413, "Request refused", "The form is too large.") })
  }
  return request.text.pipe(
    Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MAX_FORM_BYTES)),
    // A leading "?" is part of the data; URLSearchParams would drop it as a query prefix.
    Effect.map((text): FormRead => {
      const form = new URLSearchParams(text.startsWith("?") ? `%3F${text.slice(1)}` : text)
      // PostgreSQL text cannot hold a NUL character: refuse it here, not as a failure deep inside.
      for (const [name, value] of form) {
        if (name.includes("\u0000") || value.includes("\u0000")) {
          return {
            refused: refusedPage(
              400,
              "Request refused",
              "The form contains a NUL character (%00), which no field can hold."
            )
          }
        }
      }
      return { form }
    }),
    Effect.catch(() =>
      Effect.succeed<FormRead>({ refused: refusedPage(400, "Request refused", "The form could not be read.") })
    )
  )
}

/** Refuses a POST that does not come from a page of this origin; undefined when it does. */
const refuseCrossOrigin = (request: Request): Response | undefined => {
  const check = checkSameOrigin({
    origin: request.headers["origin"],
    secFetchSite: request.headers["sec-fetch-site"],
    host: request.headers["host"]
  })
  return check.ok
    ? undefined
    : refusedPage(
        403,
        "Request refused",
        `This form was refused: ${check.reason}. Admin changes are only accepted from the admin pages themselves.`
      )
}

/** The id in a page's path ("" when absent: no id matches it). */
export const idOf = (params: Readonly<Record<string, string | undefined>>) => params["id"] ?? ""

/** A form POST's body, read only when it comes from the admin pages' own origin. */
export const readOwnForm = (request: Request): Effect.Effect<FormRead> => {
  const crossOrigin = refuseCrossOrigin(request)
  return crossOrigin !== undefined ? Effect.succeed({ refused: crossOrigin }) : readForm(request)
}

/** A form of a signed-in admin's page: same origin, live session, the session's CSRF token. */
export const signedInForm =
  <R>(handler: FormHandler<R>) =>
  (request: Request) =>
    Effect.gen(function* () {
      const read = yield* readOwnForm(request)
      if ("refused" in read) return read.refused
      const cookie = cookieOf(request, SESSION_COOKIE)
      const found = yield* sessionOf(request, { takeFlash: false })
      if ("refused" in found) return found.refused
      const resolved = found.checked
      if ("ended" in resolved) return toSignIn(request, cookie === undefined ? undefined : resolved.ended)
      const token = read.form.get("csrf")
      if (token === null || !safeEqual(token, resolved.session.csrf)) {
        return refusedPage(
          403,
          "Request refused",
          "This form's security token is missing or out of date. Reload the page and try again."
        )
      }
      // A page this form's answer renders shows no flash left from before (that is for the next GET).
      return yield* handler({ ...resolved.session, flash: null }, read.form, yield* HttpRouter.params, request)
    })
