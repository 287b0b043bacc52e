// The admin pages' request security, pure: our cookies' attributes, the constant-time
// comparison of CSRF tokens, the same-origin check of every POST, and the headers of every page.
import { timingSafeEqual } from "node:crypto"
import { Duration } from "effect"
import { Cookies } from "effect/http"
import { sha256 } from "../../access/keys/bearer-secrets.ts"

/** The session cookie: __Host- means Secure, Path=/ and no Domain, so no other host can set it. */
export const SESSION_COOKIE = "__Host-srs_admin"
/** Before a session exists, the sign-in form's CSRF token is double-submitted with this cookie. */
export const SIGN_IN_COOKIE = "__Host-srs_admin_signin"

/** Compares two secrets in time that depends on neither (both are hashed to equal lengths first). */
export const safeEqual = (a: string, b: string): boolean => {
  const equal = timingSafeEqual(sha256(a), sha256(b))
  return equal && a.length === b.length
}

/** Our cookies' attributes: the __Host- prefix requires Secure, Path=/ and no Domain. */
const COOKIE_ATTRIBUTES = { path: "/", secure: true, httpOnly: true, sameSite: "strict" } as const

/**
 * A Set-Cookie value for one of our cookies: Secure, HttpOnly, SameSite=Strict, Path=/ and
 * no Domain. Without maxAge it lasts the browser session; maxAge 0 deletes it.
 */
export const serializeCookie = (name: string, value: string, options: { readonly maxAge?: number } = {}): string => {
  // Our values are random base64url tokens: anything else is a bug here, not text to encode.
  if (!/^[A-Za-z0-9_-]*$/.test(value)) throw new Error("a cookie value must be base64url")
  const maxAge =
    options.maxAge === undefined ? {} : { maxAge: Duration.seconds(Math.max(0, Math.trunc(options.maxAge))) }
  // Throws on a name that is no cookie name.
  return Cookies.serializeCookie(Cookies.makeCookieUnsafe(name, value, { ...COOKIE_ATTRIBUTES, ...maxAge }))
}

export const expiredCookie = (name: string): string => serializeCookie(name, "", { maxAge: 0 })

export type OriginCheck = { readonly ok: true } | { readonly ok: false; readonly reason: string }

/**
 * A state-changing request must come from a page of this very origin: Sec-Fetch-Site (sent
 * by current browsers) must say same-origin, and Origin (sent by browsers on every POST) must
 * be this host. A request with neither is refused too: browsers always send one of them, so
 * only a forged or stripped request lacks both. Host must be what the browser addressed (a
 * reverse proxy must pass it through, as the read API also needs).
 */
export const checkSameOrigin = (headers: {
  readonly origin?: string | undefined
  readonly secFetchSite?: string | undefined
  readonly host?: string | undefined
}): OriginCheck => {
  const host = headers.host?.trim().toLowerCase()
  if (host === undefined || host === "") return { ok: false, reason: "the request has no Host header" }
  const site = headers.secFetchSite?.trim().toLowerCase()
  if (site !== undefined && site !== "" && site !== "same-origin") {
    return { ok: false, reason: `the form was sent from another site (Sec-Fetch-Site: ${site})` }
  }
  const origin = headers.origin?.trim()
  if (origin !== undefined && origin !== "") {
    if (origin === "null") return { ok: false, reason: "the form was sent from an opaque origin (Origin: null)" }
    let url: URL
    try {
      url = new URL(origin)
    } catch {
      return { ok: false, reason: "the Origin header is not an origin" }
    }
    if ((url.protocol !== "http:" && url.protocol !== "https:") || url.host.toLowerCase() !== host) {
      return { ok: false, reason: `the form was sent from another origin (${url.origin})` }
    }
    return { ok: true }
  }
  if (site === "same-origin") return { ok: true }
  return { ok: false, reason: "the request does not say where it came from (no Origin or Sec-Fetch-Site header)" }
}

/**
 * Headers of every admin page. Scripts and styles only from this origin (no inline code at
 * all), never framed, forms only to this origin, nothing cached. Referrer-Policy is
 * same-origin rather than no-referrer: under no-referrer browsers send "Origin: null" with
 * every POST, which would defeat the Origin check; same-origin still sends nothing to
 * other sites.
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
  "cache-control": "no-store",
  "x-content-type-options": "nosniff",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin"
}
