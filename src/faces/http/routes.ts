// What a route is to the HTTP faces: a method and a path in the router's syntax, and the one
// matcher over a table of them. The whole table is put together once, in src/faces/routes.ts.
import { HttpApi, type HttpApiGroup } from "effect/http-api"
import { FindMyWay } from "effect/http"
import { ROUTER_CONFIG } from "../../platform/http/node-server.ts"

export interface KnownRoute {
  readonly method: string
  /** Router syntax: /api/v1/incidents/:id */
  readonly path: string
  /**
   * A POST's or PATCH's body fields, those every version of the API knows (its payload
   * schema's): another is a 400 naming it. Undefined: the body is not checked here.
   */
  readonly bodyFields?: ReadonlyArray<string>
}

/** The top-level field names a payload schema takes (a struct's, or each struct's of a union). */
const fieldNames = (ast: { readonly _tag: string }, out: Set<string>): void => {
  const a = ast as {
    _tag: string
    propertySignatures?: ReadonlyArray<{ name: PropertyKey }>
    types?: ReadonlyArray<{ _tag: string }>
  }
  if (a._tag === "Objects") for (const p of a.propertySignatures ?? []) out.add(String(p.name))
  else if (a._tag === "Union") for (const t of a.types ?? []) fieldNames(t, out)
}

/** The routes of an HttpApi, for working out which methods a path takes. */
export const routesOf = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): ReadonlyArray<KnownRoute> => {
  const routes: Array<KnownRoute> = []
  HttpApi.reflect(api as unknown as HttpApi.Top, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      if (endpoint.method !== "POST" && endpoint.method !== "PATCH")
        return void routes.push({ method: endpoint.method, path: endpoint.path })
      const names = new Set<string>()
      for (const [, p] of endpoint.payload) for (const schema of p.schemas) fieldNames(schema.ast, names)
      routes.push({ method: endpoint.method, path: endpoint.path, bodyFields: [...names] })
    }
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
  /** The body fields a request's route knows (KnownRoute.bodyFields); undefined: not checked. */
  readonly bodyFields: (method: string, url: string) => ReadonlyArray<string> | undefined
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
  const bodies = new Map<string, ReadonlyArray<string>>()
  for (const r of routes) {
    if (r.bodyFields !== undefined && !bodies.has(`${r.method.toUpperCase()} ${r.path}`))
      bodies.set(`${r.method.toUpperCase()} ${r.path}`, r.bodyFields)
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
    },
    bodyFields: (method, url) => {
      const m = method.toUpperCase()
      const path = router.find(m, url)?.handler
      return path === undefined ? undefined : bodies.get(`${m} ${path}`)
    }
  }
}
