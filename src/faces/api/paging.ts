// How the documents describe a page: its items in their order and the next page's cursor
// (the cursor itself is the read model's: src/read/cursor.ts); and a feed's list endpoint.
import { Schema } from "effect"
import type { HttpRouter } from "effect/http"
import { HttpApiEndpoint, OpenApi } from "effect/http-api"
import { BadRequest, Forbidden } from "../http/errors.ts"

/** A page's nextCursor in the documents. */
export const NextCursor = Schema.NullOr(Schema.String).annotate({
  description: "Pass as cursor for the next page; null on the last page"
})

/** A page of items: their order, described, and the next page's cursor. */
export const pageOf = <S extends Schema.Top>(item: S, order: string) =>
  Schema.Struct({ data: Schema.Array(item).annotate({ description: order }), nextCursor: NextCursor })

/**
 * GET of a feed's pages (the events feed, the deletions): `query`, a page of `item` in `order`,
 * 400 for a bad query and 403 for what the key may not read; `doc`'s paragraphs are joined.
 */
export const feedList = <const Path extends HttpRouter.PathInput, Q extends Schema.Struct.Fields, S extends Schema.Top>(
  path: Path,
  query: Q,
  item: S,
  order: string,
  doc: { readonly summary: string; readonly description: ReadonlyArray<string> }
) =>
  HttpApiEndpoint.get("list", path, {
    query,
    success: pageOf(item, order),
    error: [BadRequest, Forbidden]
  }).annotateMerge(OpenApi.annotations({ summary: doc.summary, description: doc.description.join("\n\n") }))
