// What a route is to the HTTP faces: a method and a path in the router's syntax. The whole
// table is put together once, in src/faces/routes.ts.
import { HttpApi, type HttpApiGroup } from "effect/http-api"

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
