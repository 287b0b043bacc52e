// Cache-Control: no-store on every answer that may carry a secret or a key, so that no browser,
// proxy or CDN keeps one: the admin API and pages (keys when made, signing secrets when made or
// rotated, sessions) and a subscription made through the API (its signing secret). Set here,
// once, rather than by each handler, so a new admin route cannot forget it.
import { Effect } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"

/** True for the answers that must not be stored: everything under /admin, and POST /api/v1/hooks. */
export const mayCarrySecret = (method: string, url: string): boolean => {
  const q = url.indexOf("?")
  const path = q === -1 ? url : url.slice(0, q)
  return path === "/admin" || path.startsWith("/admin/") || (method === "POST" && path === "/api/v1/hooks")
}

/** A global router middleware: install once, beside every route of the public server. */
export const NoStore = HttpRouter.middleware(
  Effect.succeed((httpEffect) =>
    Effect.flatMap(Effect.service(HttpServerRequest.HttpServerRequest), (request) =>
      mayCarrySecret(request.method, request.url)
        ? Effect.map(httpEffect, (response) => HttpServerResponse.setHeader(response, "cache-control", "no-store"))
        : httpEffect
    )
  ),
  { global: true }
)
