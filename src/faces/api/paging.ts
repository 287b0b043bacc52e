// How the documents describe a page: its items in their order and the next page's cursor
// (the cursor itself is the read model's: src/read/cursor.ts).
import { Schema } from "effect"

/** A page's nextCursor in the documents. */
export const NextCursor = Schema.NullOr(Schema.String).annotate({
  description: "Pass as cursor for the next page; null on the last page"
})

/** A page of items: their order, described, and the next page's cursor. */
export const pageOf = <S extends Schema.Top>(item: S, order: string) =>
  Schema.Struct({ data: Schema.Array(item).annotate({ description: order }), nextCursor: NextCursor })
