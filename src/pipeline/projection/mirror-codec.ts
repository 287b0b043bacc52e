// The text of a mirror row (service.rows.data): its values as a JSON array in the order of
// its table's published columns (PUBLISHED_COLUMNS, from APP_COLUMNS), without their names,
// which were about a third of every row's bytes (docs/design.md, "A mirror instead of REPLICA
// IDENTITY FULL").
//
// Positions are append-only: a column the service comes to read is added at the END of its
// table's list in APP_COLUMNS. Reordering or removing a column would make every row stored
// before misread (a value under another column's name); test/pipeline/projection/mirror-codec.test.ts
// pins the lists' order as it was first stored. A row stored before a column was appended is
// a shorter array: the columns it lacks are left out, as an object written then lacked them.
//
// Rows stored as objects (by a version before this one, and rows that do not hold exactly
// their table's columns, below) stay readable: decoding takes either form, and the next write
// of a row stores it by position.
import { PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import type { Row } from "../../domain/records/types.ts"

interface TableCodec {
  readonly names: ReadonlyArray<string>
  /** One array per table reused by every encode (encoding is synchronous and never reentered). */
  readonly scratch: unknown[]
  /** A row from a whole array, as one object literal: V8 gives it fixed properties, where
   *  more than about 16 set one by one under computed names make it a dictionary, slower for
   *  every shaper to read (as src/pipeline/capture/pgoutput.ts makes rows). */
  readonly make: (values: ReadonlyArray<unknown>) => Row
}

const CODECS = new Map<string, TableCodec>(
  Object.entries(PUBLISHED_COLUMNS).map(([table, names]) => [
    table,
    {
      names,
      scratch: new Array<unknown>(names.length),
      make: new Function(
        "v",
        `return { ${names.map((name, i) => `${JSON.stringify(name)}: v[${i}]`).join(", ")} }`
      ) as TableCodec["make"]
    }
  ])
)

/** A row of `table` from its values in its column order (as many as the table has). */
export const rowOfValues = (table: string, values: ReadonlyArray<unknown>): Row => {
  const codec = CODECS.get(table)
  if (codec === undefined) throw new MirrorDataError(table)
  return codec.make(values)
}

/** A stored row of a table the service no longer knows, by position: no names to read it by. */
export class MirrorDataError extends Error {
  constructor(table: string) {
    super(`mirror row of ${table} is stored by position, but ${table} has no column list`)
    this.name = "MirrorDataError"
  }
}

/**
 * A mirror row's stored text. By position when the row holds exactly its table's columns,
 * each with a value (null included); else as an object, as before, so that nothing is lost or
 * made up: a row missing a column (one the app renamed, or whose value the decoder rejected:
 * pgoutput leaves those out) must read back without it, not with null.
 */
export const encodeMirrorData = (table: string, row: Row): string => {
  const codec = CODECS.get(table)
  if (codec === undefined) return JSON.stringify(row)
  const { names, scratch } = codec
  let keys = 0
  for (const _ in row) keys++
  if (keys !== names.length) return JSON.stringify(row)
  for (let i = 0; i < names.length; i++) {
    const value = row[names[i]!]
    if (value === undefined) {
      scratch.fill(undefined)
      return JSON.stringify(row)
    }
    scratch[i] = value
  }
  const text = JSON.stringify(scratch)
  scratch.fill(undefined) // holds no row's values after
  return text
}

/** A mirror row from its stored text, in either form. Values past the end of the table's list
 *  (stored by a later version that reads more columns) are not this version's to read. */
export const decodeMirrorData = (table: string, text: string): Row => {
  const parsed = JSON.parse(text) as unknown
  if (!Array.isArray(parsed)) return parsed as Row
  const codec = CODECS.get(table)
  if (codec === undefined) throw new MirrorDataError(table)
  const { names } = codec
  if (parsed.length >= names.length) return codec.make(parsed)
  const row: Record<string, unknown> = {}
  for (let i = 0; i < parsed.length; i++) row[names[i]!] = parsed[i]
  return row
}
