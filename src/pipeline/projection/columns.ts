// Bulk statements take each column as one text parameter that PostgreSQL splits
// (string_to_array(<text>, chr(30), '')), unnested side by side, instead of one JSON
// document of all rows: JSON text inside JSON escapes every quote of every body twice over
// and json_to_recordset parses it back, which cost capture about 2.5 times the server time
// of this form and more of its own CPU (docs/benchmarks.md, "Capture").

/** The separator: a control character, which JSON text (it escapes them all), a uuid, a
 *  timestamp, an LSN, a number or one of the service's own names never holds. */
export const SEPARATOR = "\x1e"

/**
 * One column, for `string_to_array($n, chr(30), '')`: null becomes the empty string, which
 * that call reads back as NULL. Only for values that cannot hold the separator (above);
 * free text from the app goes as a text[] parameter instead. A single empty element comes
 * back as an empty array, which unnest pads with NULL beside the other columns: still NULL.
 */
export const packed = (values: ReadonlyArray<string | number | null>): string => {
  // Concatenated, not joined: Array.prototype.join costs several times as much on large
  // strings (4.5 ms against 0.7 ms for 2,000 bodies of 500 bytes, Node 24).
  let out = ""
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    out += i === 0 ? (v ?? "") : SEPARATOR + (v ?? "")
  }
  return out
}
