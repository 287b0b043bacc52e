// What a route is to the HTTP faces: a method and a path in the router's syntax, and the one
// matcher over a table of them. The whole table is put together once, in src/faces/routes.ts.
import { HttpApi, type HttpApiGroup } from "effect/http-api"
import { FindMyWay } from "effect/http"
import { ROUTER_CONFIG } from "../../platform/http/node-server.ts"

export interface KnownRoute {
  readonly method: string
  /** Router syntax: /api/v1/incidents/:id */
  readonly path: string
}

/** The routes of an HttpApi, for working out which methods a path takes. */
export const routesOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<KnownRoute> => {
  const routes: Array<KnownRoute> = []
  HttpApi.reflect(api as unknown as HttpApi.Top, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => routes.push({ method: endpoint.method, path: endpoint.path })
  })
  return routes
}

const METHOD_ORDER = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

export interface RouteTable {
  /**
   * A request's route pattern (/api/v1/incidents/:id), for metric labels and span names; a
   * known path with another method is still that route (its 405 is counted there); HEAD is
   * its GET route; "unmatched" for anything else, so unknown paths never make a series each.
   */
  readonly routeOf: (method: string, url: string) => string
  /** The methods a URL's path takes (GET implies HEAD), in a stable order; empty for an unknown path. */
  readonly allowedMethods: (url: string) => ReadonlyArray<string>
}

const tables = new WeakMap<ReadonlyArray<KnownRoute>, RouteTable>()

/**
 * The router's own matcher (find-my-way, as HttpRouter uses it) with the server's settings,
 * so a path matches here exactly when the router would serve it: the same case sensitivity,
 * trailing slash, static-before-parameter order and percent-decoding. Built once per table:
 * the fallback, the request metrics and the span names share it.
 */
export const routeTable = (routes: ReadonlyArray<KnownRoute>): RouteTable => {
  const built = tables.get(routes)
  if (built !== undefined) return built
  const table = buildTable(routes)
  tables.set(routes, table)
  return table
}

const buildTable = (routes: ReadonlyArray<KnownRoute>): RouteTable => {
  const router = FindMyWay.make<string>(ROUTER_CONFIG)
  const methods: Array<string> = []
  const seen = new Set<string>()
  for (const r of routes) {
    const method = r.method.toUpperCase()
    if (!methods.includes(method)) methods.push(method)
    // A route given twice (the router takes the first) would make the matcher throw.
    if (seen.has(`${method} ${r.path}`)) continue
    seen.add(`${method} ${r.path}`)
    router.on(method, r.path as FindMyWay.PathInput, r.path)
  }
  const anyMethod = (url: string): string | undefined => {
    for (const m of methods) {
      const found = router.find(m, url)
      if (found !== undefined) return found.handler
    }
    return undefined
  }
  return {
    routeOf: (method, url) => {
      const m = method.toUpperCase() === "HEAD" ? "GET" : method.toUpperCase()
      return router.find(m, url)?.handler ?? anyMethod(url) ?? "unmatched"
    },
    allowedMethods: (url) => {
      const allowed = new Set(methods.filter((m) => router.find(m, url) !== undefined))
      if (allowed.has("GET")) allowed.add("HEAD")
      return [...allowed].sort((a, b) => METHOD_ORDER.indexOf(a) - METHOD_ORDER.indexOf(b))
    }
  }
}
