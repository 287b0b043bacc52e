// Capture's reader of pgoutput row messages gives what the library's parser followed by the
// normal form gave, value for value (pure: messages built here byte by byte).
import { PgoutputPlugin } from "pg-logical-replication"
import type { Message } from "pg-logical-replication/dist/output-plugins/pgoutput/pgoutput.types.js"
import { describe, expect, it } from "vitest"
import { normalizeRow } from "../../../src/pipeline/capture/normalize.ts"
import { RowPgoutputPlugin, utcTimestampIso } from "../../../src/pipeline/capture/pgoutput.ts"

const options = { protoVersion: 1 as const, publicationNames: ["p"] }

const cstr = (s: string) => Buffer.concat([Buffer.from(s, "utf8"), Buffer.from([0])])
const i16 = (n: number) => {
  const b = Buffer.alloc(2)
  b.writeInt16BE(n)
  return b
}
const i32 = (n: number) => {
  const b = Buffer.alloc(4)
  b.writeInt32BE(n)
  return b
}
const ch = (c: string) => Buffer.from(c, "latin1")

const COLUMNS: ReadonlyArray<readonly [name: string, oid: number, key?: boolean]> = [
  ["id", 2950, true],
  ["title", 25],
  ["score", 1700],
  ["count", 23],
  ["big", 20],
  ["ratio", 701],
  ["done", 16],
  ["at", 1184],
  ["day", 1082],
  ["notes", 25]
]
const RELID = -123 // past 2^31 as PostgreSQL sends it: the library reads it signed

const relation = Buffer.concat([
  ch("R"),
  i32(RELID),
  cstr("app"),
  cstr("things"),
  ch("d"),
  i16(COLUMNS.length),
  ...COLUMNS.flatMap(([name, oid, key]) => [Buffer.from([key ? 1 : 0]), cstr(name), i32(oid), i32(-1)])
])

type Value = string | null | "unchanged"
const tuple = (values: ReadonlyArray<Value>) =>
  Buffer.concat([
    i16(values.length),
    ...values.map((v) => {
      if (v === null) return ch("n")
      if (v === "unchanged") return ch("u")
      const bytes = Buffer.from(v, "utf8")
      return Buffer.concat([ch("t"), i32(bytes.length), bytes])
    })
  ])

const ROWS: ReadonlyArray<ReadonlyArray<Value>> = [
  [
    "7d3c1f7e-1f0a-4a55-9d5b-111111111111",
    'Zoë fell ✓ "quoted" \\ back',
    "12.50",
    "42",
    "9007199254740993",
    "0.25",
    "t",
    "2026-11-23 10:00:00.123456+00",
    "2026-11-23",
    "x"
  ],
  [
    "7d3c1f7e-1f0a-4a55-9d5b-222222222222",
    "",
    "NaN",
    "-7",
    "1",
    "NaN",
    "f",
    "2026-11-23 10:00:00+00",
    "infinity",
    null
  ],
  [
    "7d3c1f7e-1f0a-4a55-9d5b-333333333333",
    "a",
    "0",
    "0",
    "0",
    "Infinity",
    "t",
    "2026-11-23 10:00:00.5+00",
    "2026-01-01",
    null
  ],
  ["7d3c1f7e-1f0a-4a55-9d5b-444444444444", "b", null, null, null, null, null, "2026-11-23 11:00:00.129+01", null, null],
  ["7d3c1f7e-1f0a-4a55-9d5b-555555555555", "c", "1e3", "1", "2", "3.5", "t", "2026-11-23 10:00:00+05:30", null, null],
  ["7d3c1f7e-1f0a-4a55-9d5b-666666666666", "d", "1", "1", "2", "3", "t", "infinity", null, null],
  ["7d3c1f7e-1f0a-4a55-9d5b-777777777777", "e", "1", "1", "2", "3", "t", "0099-03-04 05:06:07.08+00", null, null],
  ["7d3c1f7e-1f0a-4a55-9d5b-888888888888", "f", "1", "1", "2", "3", "t", "2026-11-23 10:00:00.123+00 BC", null, null]
]

const types = new Map(COLUMNS.map(([name, oid]) => [name, oid]))
/** What capture had before: the library's tuple, then the normal form. */
const reference = (msg: Message) => {
  const norm = (t: Record<string, unknown> | null) => (t === null ? null : normalizeRow(t, types))
  if (msg.tag === "insert") return { tag: msg.tag, new: norm(msg.new) }
  if (msg.tag === "update") return { tag: msg.tag, key: norm(msg.key), old: norm(msg.old), new: norm(msg.new) }
  if (msg.tag === "delete") return { tag: msg.tag, key: norm(msg.key), old: norm(msg.old) }
  throw new Error(msg.tag)
}
const ours = (msg: Message) => {
  // Plain objects here, null-prototype objects in the library's: compared by their entries.
  const plain = (t: Record<string, unknown> | null) => (t === null ? null : { ...t })
  if (msg.tag === "insert") return { tag: msg.tag, new: plain(msg.new) }
  if (msg.tag === "update") return { tag: msg.tag, key: plain(msg.key), old: plain(msg.old), new: plain(msg.new) }
  if (msg.tag === "delete") return { tag: msg.tag, key: plain(msg.key), old: plain(msg.old) }
  throw new Error(msg.tag)
}

const both = () => {
  const mine = new RowPgoutputPlugin(options)
  const library = new PgoutputPlugin(options)
  mine.parse(relation)
  library.parse(relation)
  return (buffer: Buffer) => {
    const m = mine.parse(buffer)
    expect(ours(m)).toEqual(reference(library.parse(buffer) as Message))
    return m
  }
}

describe("capture's pgoutput row reader", () => {
  it("reads inserts as the library and the normal form did, for every type and odd value", () => {
    const parse = both()
    for (const row of ROWS) parse(Buffer.concat([ch("I"), i32(RELID), ch("N"), tuple(row)]))
    const first = parse(Buffer.concat([ch("I"), i32(RELID), ch("N"), tuple(ROWS[0]!)]))
    expect(first.tag === "insert" && first.relation.name).toBe("things")
    expect(first.tag === "insert" && first.new).toMatchObject({
      title: 'Zoë fell ✓ "quoted" \\ back',
      score: 12.5,
      count: 42,
      done: true,
      at: "2026-11-23T10:00:00.123Z"
    })
  })

  it("reads updates with a key, with the old row (unchanged TOAST values from it), and alone", () => {
    const parse = both()
    const withKey = parse(
      Buffer.concat([
        ch("U"),
        i32(RELID),
        ch("K"),
        tuple([ROWS[1]![0]!, null, null, null, null, null, null, null, null, null]),
        ch("N"),
        tuple(ROWS[0]!)
      ])
    )
    expect(withKey.tag === "update" && withKey.key).toEqual({ id: ROWS[1]![0] })
    const withOld = parse(
      Buffer.concat([
        ch("U"),
        i32(RELID),
        ch("O"),
        tuple(ROWS[2]!),
        ch("N"),
        tuple([...ROWS[2]!.slice(0, 9), "unchanged"])
      ])
    )
    expect(withOld.tag === "update" && withOld.new.notes).toBeNull()
    const toast = parse(Buffer.concat([ch("U"), i32(RELID), ch("N"), tuple([...ROWS[0]!.slice(0, 9), "unchanged"])]))
    // No old row: the value stays undefined (not null), so the mirror keeps what it has.
    expect(toast.tag === "update" && "notes" in toast.new && toast.new.notes === undefined).toBe(true)
  })

  it("reads deletes by key and by old row", () => {
    const parse = both()
    const byKey = parse(
      Buffer.concat([
        ch("D"),
        i32(RELID),
        ch("K"),
        tuple([ROWS[3]![0]!, null, null, null, null, null, null, null, null, null])
      ])
    )
    expect(byKey.tag === "delete" && byKey.key).toEqual({ id: ROWS[3]![0] })
    parse(Buffer.concat([ch("D"), i32(RELID), ch("O"), tuple(ROWS[4]!)]))
  })

  it("refuses a row of a relation it was not told about, and a cut message", () => {
    const mine = new RowPgoutputPlugin(options)
    expect(() => mine.parse(Buffer.concat([ch("I"), i32(RELID), ch("N"), tuple(ROWS[0]!)]))).toThrow(/relation/)
    mine.parse(relation)
    const whole = Buffer.concat([ch("I"), i32(RELID), ch("N"), tuple(ROWS[0]!)])
    expect(() => mine.parse(whole.subarray(0, whole.length - 3))).toThrow()
  })
})

describe("utcTimestampIso", () => {
  it.each([
    ["2026-11-23 10:00:00.123456+00", "2026-11-23T10:00:00.123Z"],
    ["2026-11-23 10:00:00.999999+00", "2026-11-23T10:00:00.999Z"],
    ["2026-11-23 10:00:00.1+00", "2026-11-23T10:00:00.100Z"],
    ["2026-11-23 10:00:00+00", "2026-11-23T10:00:00.000Z"],
    ["2026-11-23 10:00:00+01", null],
    ["2026-11-23 10:00:00.5+05:30", null],
    ["infinity", null],
    ["2026-11-23 10:00:00+00 BC", null],
    ["2026-11-23 10:00:00.+00", null],
    ["2026-11-23 10:00:0x.1+00", null],
    ["12026-11-23 10:00:00+00", null]
  ])("%s -> %s", (text, iso) => {
    expect(utcTimestampIso(text)).toBe(iso)
  })
})
