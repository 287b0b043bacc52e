// pgoutput's row messages (insert, update, delete) read straight into the mirror's normal
// form (src/pipeline/capture/normalize.ts): one plain object per tuple, values cut from the message
// and normalised as they are read. The library's parser makes a view, a decoder call and a
// dictionary-mode object per value and tuple, which the normal form then copied again: about
// a third of what capture allocated per change. Every other message goes to the library.
import pg from "pg"
import { PgoutputPlugin } from "pg-logical-replication"
import type {
  Message,
  MessageDelete,
  MessageInsert,
  MessageRelation,
  MessageUpdate
} from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { PUBLISHED_COLUMNS } from "../../domain/records/index.ts"
import { normalizeValue } from "./normalize.ts"

type Tuple = Record<string, unknown>

const TIMESTAMPTZ = 1184

const scratch = Buffer.alloc(24)
const digit = (c: number | undefined) => c !== undefined && c >= 48 && c <= 57
const at = (b: Buffer, i: number, c: number) => b[i] === c

/**
 * A timestamptz as PostgreSQL prints it in UTC ("2026-11-23 10:00:00.123456+00", bytes
 * [start, end) of `b`) into the ISO text its Date would give (milliseconds cut, not rounded,
 * as pg-types reads them), made from the bytes in one string; null for any other form
 * (another zone, BC, infinity), which takes the general way.
 */
export const utcTimestampIsoBytes = (b: Buffer, start: number, end: number): string | null => {
  const n = end - start
  if (n < 22 || n > 29) return null
  for (let i = 0; i < 19; i++) {
    const c = b[start + i]
    const ok = i === 4 || i === 7 ? c === 45 : i === 10 ? c === 32 : i === 13 || i === 16 ? c === 58 : digit(c)
    if (!ok) return null
  }
  if (!at(b, end - 3, 43) || !at(b, end - 2, 48) || !at(b, end - 1, 48)) return null // "+00"
  // "+00" right after the seconds, or a point and 1 to 6 digits between.
  const fraction = n === 22 ? 0 : n - 23
  if (n !== 22 && (fraction === 0 || !at(b, start + 19, 46))) return null
  for (let i = 0; i < fraction; i++) if (!digit(b[start + 20 + i])) return null
  b.copy(scratch, 0, start, start + 10)
  scratch[10] = 84 // T
  b.copy(scratch, 11, start + 11, start + 19)
  scratch[19] = 46 // .
  for (let i = 0; i < 3; i++) scratch[20 + i] = i < fraction ? b[start + 20 + i]! : 48
  scratch[23] = 90 // Z
  return scratch.toString("latin1", 0, 24)
}

/** utcTimestampIsoBytes for text (tests). */
export const utcTimestampIso = (t: string): string | null => {
  const b = Buffer.from(t, "latin1")
  return b.length === t.length ? utcTimestampIsoBytes(b, 0, b.length) : null
}

class Reader {
  readonly b: Buffer
  p: number
  constructor(b: Buffer, start: number) {
    this.b = b
    this.p = start
  }
  u8(): number {
    if (this.p >= this.b.length) throw new Error("unexpected end of pgoutput message")
    return this.b[this.p++]!
  }
  i16(): number {
    const v = this.b.readInt16BE(this.p)
    this.p += 2
    return v
  }
  i32(): number {
    const v = this.b.readInt32BE(this.p)
    this.p += 4
    return v
  }
}

/** How a column's text becomes its normal value: as it is (text, varchar, uuid...), by the
 *  timestamptz short cut, or by its pg-types parser and normalizeValue. */
const PLAIN = 0
const TIMESTAMP = 1
const GENERAL = 2
/** A column of an app table the service does not read (renamed from one it reads, or added to
 *  the publication): its value is passed over, never decoded or kept (its table's records are
 *  held until it fits again: quarantine/). */
const SKIP = 3

interface ColumnPlan {
  readonly name: string
  readonly how: typeof PLAIN | typeof TIMESTAMP | typeof GENERAL | typeof SKIP
  readonly parser: (text: string) => unknown
  readonly typeOid: number
}

// Types whose text is already their normal value: pg-types has no parser for them (its
// parser gives the text back) and normalizeValue keeps a string. Checked against the parser
// the library chose, in case one was registered for them.
const TEXT_OIDS = new Set([19, 25, 1042, 1043, 2950]) // name, text, bpchar, varchar, uuid
const textParser = pg.types.getTypeParser(25)

interface RelationPlan {
  readonly columns: ReadonlyArray<ColumnPlan>
  /** Makes a whole tuple from its values in column order as one object literal: V8 gives it
   *  fixed properties, where a row of more than about 16 columns set one by one under computed
   *  names becomes a dictionary, slower to read for every shaper and to stringify for the mirror. */
  readonly make: (values: ReadonlyArray<unknown>) => Tuple
  /** The values of the tuple being read (readTuple is synchronous and never reentered). */
  readonly values: unknown[]
}

/** A relation's columns, planned once (a relation message comes before its rows). The names,
 *  the app's column names, are quoted as JSON strings in the literal. */
const planOf = (rel: MessageRelation): RelationPlan => {
  const published = rel.schema === "app" ? PUBLISHED_COLUMNS[rel.name] : undefined
  const read = (name: string) => published === undefined || published.includes(name)
  const literal = rel.columns.flatMap((c, i) => (read(c.name) ? [`${JSON.stringify(c.name)}: v[${i}]`] : [])).join(", ")
  return {
    columns: rel.columns.map((c) => ({
      name: c.name,
      how: !read(c.name)
        ? SKIP
        : c.typeOid === TIMESTAMPTZ
          ? TIMESTAMP
          : TEXT_OIDS.has(c.typeOid) && c.parser === textParser
            ? PLAIN
            : GENERAL,
      parser: c.parser,
      typeOid: c.typeOid
    })),
    make: new Function("v", `return { ${literal} }`) as RelationPlan["make"],
    values: new Array<unknown>(rel.columns.length)
  }
}

/** The first value the tuple being read could not decode (readTuple is synchronous), or null. */
let rejected: string | null = null

/** Reads one TupleData; `fallback` supplies unchanged TOAST values (the old tuple, when sent). */
const readTuple = (r: Reader, rel: MessageRelation, plan: RelationPlan, fallback: Tuple | null): Tuple => {
  const n = r.i16()
  // Every column (as pgoutput sends them): the tuple is made at once from its values; else
  // its values are set one by one.
  const whole = n === plan.columns.length
  const values = plan.values
  const some: Tuple = {}
  for (let i = 0; i < n; i++) {
    const col = plan.columns[i]
    if (col === undefined)
      throw new Error(`pgoutput tuple of ${rel.schema}.${rel.name} has more columns than its relation`)
    const kind = r.u8()
    let value: unknown
    if (kind === 0x74) {
      // 't': text
      const len = r.i32()
      const start = r.p
      const end = start + len
      if (end > r.b.length) throw new Error("unexpected end of pgoutput message")
      r.p = end
      if (col.how === SKIP) value = undefined
      else if (col.how === PLAIN) value = r.b.toString("utf8", start, end)
      else {
        const iso = col.how === TIMESTAMP ? utcTimestampIsoBytes(r.b, start, end) : null
        if (iso !== null) value = iso
        else {
          // A value its type's parser rejects is left out (undefined, as an unchanged one) and
          // the row is marked: the records it feeds are held, the rest of the stream goes on.
          try {
            value = normalizeValue(col.parser(r.b.toString("utf8", start, end)), col.typeOid)
          } catch (e) {
            value = undefined
            rejected ??= `app.${rel.name}.${col.name}: the decoder rejects its value (${e instanceof Error ? e.message : String(e)})`
          }
        }
      }
    } else if (kind === 0x6e) {
      value = null // 'n'
    } else if (kind === 0x75) {
      // 'u': unchanged TOAST value; undefined when no old tuple came (the mirror keeps its value)
      value = fallback === null ? undefined : fallback[col.name]
    } else if (kind === 0x62) {
      // 'b': binary (not asked for); no bytea among the published columns
      const len = r.i32()
      r.p += len
      value = null
    } else {
      throw new Error(`unknown pgoutput tuple value kind ${String.fromCharCode(kind)}`)
    }
    if (whole) values[i] = value
    else if (col.how !== SKIP) some[col.name] = value
  }
  if (!whole) return some
  const tuple = plan.make(values)
  values.fill(undefined) // holds no row's values after
  return tuple
}

/** A key tuple ('K'): only the key columns; their non-key places are null in it and left out. */
const keyOf = (rel: MessageRelation, tuple: Tuple): Tuple => {
  const key: Tuple = {}
  for (const c of rel.keyColumns) key[c] = tuple[c] === null ? undefined : tuple[c]
  return key
}

export class RowPgoutputPlugin extends PgoutputPlugin {
  private readonly relations = new Map<number, { readonly relation: MessageRelation; readonly plan: RelationPlan }>()

  override parse(buffer: Buffer): Message {
    const tag = buffer[0]
    if (tag === 0x49 || tag === 0x55 || tag === 0x44) return this.row(buffer, tag)
    const msg = super.parse(buffer) as Message
    if (msg.tag === "relation") this.relations.set(msg.relationOid, { relation: msg, plan: planOf(msg) })
    return msg
  }

  private row(buffer: Buffer, tag: number): MessageInsert | MessageUpdate | MessageDelete {
    const r = new Reader(buffer, 1)
    const known = this.relations.get(r.i32()) // signed, as the library keys its relations
    if (known === undefined) throw new Error("pgoutput row message for a relation not described first")
    const { relation, plan } = known
    rejected = null
    const msg = this.rowOf(r, tag, relation, plan)
    if (rejected !== null) (msg as { poison?: string }).poison = rejected
    return msg
  }

  private rowOf(
    r: Reader,
    tag: number,
    relation: MessageRelation,
    plan: RelationPlan
  ): MessageInsert | MessageUpdate | MessageDelete {
    if (tag === 0x49) {
      if (r.u8() !== 0x4e) throw new Error("pgoutput insert without its new tuple")
      return { tag: "insert", relation, new: readTuple(r, relation, plan, null) }
    }
    let key: Tuple | null = null
    let old: Tuple | null = null
    let sub = r.u8()
    if (sub === 0x4b)
      key = keyOf(relation, readTuple(r, relation, plan, null)) // 'K'
    else if (sub === 0x4f) old = readTuple(r, relation, plan, null) // 'O'
    if (tag === 0x44) {
      if (key === null && old === null)
        throw new Error(`unknown pgoutput delete submessage ${String.fromCharCode(sub)}`)
      return { tag: "delete", relation, key, old }
    }
    if (key !== null || old !== null) sub = r.u8()
    if (sub !== 0x4e) throw new Error(`unknown pgoutput update submessage ${String.fromCharCode(sub)}`)
    return { tag: "update", relation, key, old, new: readTuple(r, relation, plan, old) }
  }
}
