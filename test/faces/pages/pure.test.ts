// The admin pages' pure parts: HTML escaping, CSRF token comparison, cookies, the
// same-origin check and where a sign-in may send the browser back to.
import { describe, expect, it } from "vitest"
import { attr, escapeHtml, html, raw } from "../../../src/faces/pages/html.ts"
import { formatDate } from "../../../src/faces/pages/layout.ts"
import { ADMIN_WEB_ROUTES, PATHS, pathFor } from "../../../src/faces/pages/paths.ts"
import { HttpServerRequest } from "effect/http"
import { cookieOf, localTarget } from "../../../src/faces/pages/request.ts"
import {
  checkSameOrigin,
  expiredCookie,
  PAGE_HEADERS,
  safeEqual,
  serializeCookie,
  SESSION_COOKIE
} from "../../../src/faces/pages/security.ts"
import { lastAnswer } from "../../../src/faces/pages/webhooks.ts"
import { isToken, randomToken } from "../../../src/access/keys/bearer-secrets.ts"
import { SERVED_ROUTES } from "../../../src/faces/routes.ts"
import { OUR_ATTRIBUTES, setCookieParts } from "../../support/pages.ts"

describe("html", () => {
  it("escapes every interpolated value by default", () => {
    const evil = `<script>alert("x")</script>&'\``
    expect(html`<p title="${evil}">${evil}</p>`.value).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;&#96;</p>'
    )
    expect(escapeHtml(`" onmouseover="x`)).toBe("&quot; onmouseover=&quot;x")
  })

  it("keeps Html as is, renders arrays item by item and drops null, undefined and booleans", () => {
    const inner = html`<b>${"<i>"}</b>`
    expect(html`<div>${inner}</div>`.value).toBe("<div><b>&lt;i&gt;</b></div>")
    expect(html`<ul>${["<a>", html`<li>ok</li>`, ["b&c"]]}</ul>`.value).toBe("<ul>&lt;a&gt;<li>ok</li>b&amp;c</ul>")
    expect(html`[${null}${undefined}${false}${true}]`.value).toBe("[]")
    expect(html`${0} ${12.5} ${10n}`.value).toBe("0 12.5 10")
    expect(raw("<hr>").value).toBe("<hr>")
    expect(html`<input${attr("checked", true)}${attr("disabled", false)}>`.value).toBe("<input checked>")
  })

  it("an interpolated string that looks like markup is never trusted", () => {
    const notHtml = { value: "<script>" } as unknown as string
    expect(html`${notHtml}`.value).toBe("[object Object]")
  })

  it("formats dates the same for everyone", () => {
    expect(formatDate("2026-03-04T05:06:07.089Z")).toBe("2026-03-04 05:06 UTC")
    expect(formatDate("not a date")).toBe("not a date")
  })
})

describe("CSRF tokens", () => {
  it("are random base64url and compare in constant time, equal only when equal", () => {
    const a = randomToken()
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(randomToken()).not.toBe(a)
    expect(isToken(a)).toBe(true)
    expect(isToken("short")).toBe(false)
    expect(isToken(undefined)).toBe(false)
    expect(isToken(`${"a".repeat(40)};`)).toBe(false)
    expect(safeEqual(a, a.slice())).toBe(true)
    expect(safeEqual(a, a.slice(0, -1))).toBe(false)
    expect(safeEqual(a, `${a}x`)).toBe(false)
    expect(safeEqual(a, randomToken())).toBe(false)
    expect(safeEqual("", "")).toBe(true)
    expect(safeEqual("", a)).toBe(false)
  })
})

describe("cookies", () => {
  const withCookie = (cookie: string | undefined) =>
    HttpServerRequest.fromWeb(
      new Request("http://localhost/admin", cookie === undefined ? {} : { headers: { cookie } })
    )

  it("reads a request's Cookie header; the first of a repeated name wins", () => {
    const request = withCookie(`a=1; ${SESSION_COOKIE}=abc_-; b="quoted"; a=2; junk; =x; c=`)
    expect(cookieOf(request, "a")).toBe("1")
    expect(cookieOf(request, SESSION_COOKIE)).toBe("abc_-")
    expect(cookieOf(request, "b")).toBe("quoted")
    expect(cookieOf(request, "c")).toBe("")
    expect(cookieOf(request, "junk")).toBeUndefined()
    expect(cookieOf(withCookie(undefined), SESSION_COOKIE)).toBeUndefined()
    expect(cookieOf(withCookie(""), SESSION_COOKIE)).toBeUndefined()
  })

  it("serializes our cookies Secure, HttpOnly, SameSite=Strict, Path=/ and without Domain", () => {
    expect(setCookieParts(serializeCookie(SESSION_COOKIE, "abc"))).toEqual({
      pair: "__Host-srs_admin=abc",
      attributes: OUR_ATTRIBUTES
    })
    expect(setCookieParts(serializeCookie("x", "v", { maxAge: 60.7 }))).toEqual({
      pair: "x=v",
      attributes: [...OUR_ATTRIBUTES, "Max-Age=60"].sort()
    })
    expect(setCookieParts(expiredCookie(SESSION_COOKIE))).toEqual({
      pair: "__Host-srs_admin=",
      attributes: [...OUR_ATTRIBUTES, "Max-Age=0"].sort()
    })
    expect(() => serializeCookie(SESSION_COOKIE, "a;b")).toThrow()
    expect(() => serializeCookie("bad name", "a")).toThrow()
    const round = withCookie(serializeCookie(SESSION_COOKIE, "tok").split(";")[0])
    expect(cookieOf(round, SESSION_COOKIE)).toBe("tok")
  })
})

describe("same-origin check", () => {
  const host = "127.0.0.1:3000"
  it("accepts a form from the same origin", () => {
    expect(checkSameOrigin({ origin: "http://127.0.0.1:3000", secFetchSite: "same-origin", host })).toEqual({
      ok: true
    })
    expect(checkSameOrigin({ origin: "https://127.0.0.1:3000", host })).toEqual({ ok: true })
    expect(checkSameOrigin({ secFetchSite: "same-origin", host })).toEqual({ ok: true })
    expect(checkSameOrigin({ origin: "http://ADMIN.example:8080", host: "admin.example:8080" })).toEqual({ ok: true })
  })

  it("refuses other sites, other origins of the same site, opaque origins and requests that say nothing", () => {
    const refused = (h: Parameters<typeof checkSameOrigin>[0]) => {
      const r = checkSameOrigin(h)
      expect(r.ok, JSON.stringify(h)).toBe(false)
      return r.ok ? "" : r.reason
    }
    expect(refused({ origin: "http://localhost:4000", secFetchSite: "cross-site", host })).toMatch(/another site/)
    expect(refused({ origin: "http://127.0.0.1:4000", secFetchSite: "same-site", host })).toMatch(/another site/)
    expect(refused({ origin: "http://127.0.0.1:4000", host })).toMatch(/another origin/)
    expect(refused({ origin: "http://evil.example", host })).toMatch(/another origin/)
    expect(refused({ origin: "null", host })).toMatch(/opaque/)
    expect(refused({ origin: "not a url", host })).toMatch(/not an origin/)
    expect(refused({ origin: "ftp://127.0.0.1:3000", host })).toMatch(/another origin/)
    expect(refused({ secFetchSite: "none", host })).toMatch(/another site/)
    expect(refused({ host })).toMatch(/does not say/)
    expect(refused({ origin: "http://127.0.0.1:3000" })).toMatch(/Host/)
  })
})

describe("paths", () => {
  it("sign-in only sends the browser back to an admin page of this origin", () => {
    expect(localTarget("/admin/keys")).toBe("/admin/keys")
    expect(localTarget("/admin/activity?kind=endpoint")).toBe("/admin/activity?kind=endpoint")
    expect(localTarget("/admin/webhooks/endpoints/0b6c1f6e-4a39-4f4e-9d1e-2b7f2b1f9c11")).toBe(
      "/admin/webhooks/endpoints/0b6c1f6e-4a39-4f4e-9d1e-2b7f2b1f9c11"
    )
    // Only pages: not a form's action, nor a path that is no page.
    for (const bad of [
      "/admin/sign-out",
      "/admin/keys/x/revoke",
      "/admin/nowhere",
      "//evil.example/admin",
      "https://evil.example/admin",
      "/admin/../x",
      "/adminx",
      "/admin//evil",
      "/admin/keys\\x",
      null,
      undefined,
      "javascript:alert(1)"
    ]) {
      expect(localTarget(bad), String(bad)).toBeUndefined()
    }
  })

  it("fills ids in and every page route is a known route (405s and metrics labels)", () => {
    expect(pathFor(PATHS.endpoint, "a/b")).toBe("/admin/webhooks/endpoints/a%2Fb")
    for (const r of ADMIN_WEB_ROUTES) expect(SERVED_ROUTES).toContainEqual(r)
  })

  it("pages send the security headers", () => {
    expect(PAGE_HEADERS["content-security-policy"]).toContain("frame-ancestors 'none'")
    expect(PAGE_HEADERS["content-security-policy"]).toContain("script-src 'self'")
    expect(PAGE_HEADERS["content-security-policy"]).not.toContain("unsafe-inline")
    expect(PAGE_HEADERS["x-frame-options"]).toBe("DENY")
    expect(PAGE_HEADERS["cache-control"]).toBe("no-store")
  })
})

describe("deliveries table", () => {
  it("shows the last answer's status, and its error unless it only repeats the status", () => {
    expect(lastAnswer({ lastStatus: 500, lastError: "http 500" }).value).toBe("HTTP 500")
    expect(lastAnswer({ lastStatus: 200, lastError: null }).value).toBe("HTTP 200")
    expect(lastAnswer({ lastStatus: 302, lastError: "redirect refused" }).value).toBe(
      'HTTP 302<br><span class="muted">redirect refused</span>'
    )
    expect(lastAnswer({ lastStatus: null, lastError: "timeout after 10s" }).value).toBe(
      '<span class="muted">timeout after 10s</span>'
    )
    expect(lastAnswer({ lastStatus: null, lastError: null }).value).toBe('<span class="muted">none yet</span>')
  })
})
