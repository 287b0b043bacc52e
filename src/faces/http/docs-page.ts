// The API reference pages (/docs, /admin/v1/docs): Scalar over the generated OpenAPI document.
// Effect's HttpApiScalar.layer loads Scalar's 3.2 MB bundle when the layer is built, which kept
// ~12 MB of heap in every process (docs/benchmarks.md, bench:soak) though few ever open the page.
// Here the bundle is loaded, and the page rendered, on the first request only.
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { Effect } from "effect"
import { HttpRouter, HttpServerResponse } from "effect/http"
import { OpenApi, type HttpApi, type HttpApiGroup } from "effect/http-api"

// `</` and the two JS line terminators cannot appear raw inside a <script>.
const scriptJson = (value: unknown) =>
  JSON.stringify(value)
    .replace(/</g, "\\u003c")
    .replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"))
const escapeHtml = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const render = async <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>
): Promise<string> => {
  // Effect's own bundle of Scalar, beside effect/http-api (its package exports do not name it).
  // (Resolved from this file, so the service bundle npm start runs finds it too: src/build.ts.)
  const bundle = new URL(
    "./internal/httpApiScalar.js",
    pathToFileURL(createRequire(import.meta.url).resolve("effect/http-api"))
  )
  const { javascript } = (await import(/* @vite-ignore */ bundle.href)) as { javascript: string }
  const spec = OpenApi.fromApi(api)
  return `<!doctype html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>${escapeHtml(spec.info.title)}</title>
    <meta name="viewport" content="width=device-width, initial-scale=1" />
  </head>
  <body>
    <div id="api-reference-container"></div>
    <script>${javascript}</script>
    <script>
      window.Scalar.createApiReference(document.getElementById('api-reference-container'), {
        _integration: "html",
        content: ${scriptJson(spec)}
      })
    </script>
  </body>
</html>`
}

/** GET `path`: the Scalar reference for `api`, rendered once, on first use. */
export const docsPage = <Id extends string, Groups extends HttpApiGroup.Constraint>(
  api: HttpApi.HttpApi<Id, Groups>,
  path: `/${string}`
) => {
  let page: Promise<string> | undefined
  return HttpRouter.add(
    "GET",
    path,
    Effect.map(
      Effect.promise(() => (page ??= render(api))),
      (html) => HttpServerResponse.html(html)
    )
  )
}
