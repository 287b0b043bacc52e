// Which answers must never be stored by a browser, proxy or CDN: those that may carry a key, a
// signing secret or a session (the admin API and pages, a subscription made through the API).
import { describe, expect, it } from "vitest"
import { mayCarrySecret } from "../../../src/faces/http/no-store.ts"

describe("Cache-Control: no-store", () => {
  it.each([
    ["POST", "/admin/v1/keys", true],
    ["GET", "/admin/v1/keys", true],
    ["POST", "/admin/v1/endpoints/x/rotate-secret", true],
    ["GET", "/admin", true],
    ["GET", "/admin/sign-in?next=/admin", true],
    ["POST", "/api/v1/hooks", true],
    ["POST", "/api/v1/hooks?x=1", true],
    ["GET", "/api/v1/hooks", false],
    ["GET", "/api/v1/incidents", false],
    ["GET", "/administrator", false],
    ["GET", "/healthz", false]
  ] as const)("%s %s: %s", (method, url, expected) => {
    expect(mayCarrySecret(method, url)).toBe(expected)
  })
})
