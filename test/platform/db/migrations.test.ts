// A migration file as the runner reads it: its directives, its checksum, its statements and
// the steps a steps migration runs in.
import { createHash } from "node:crypto"
import { describe, expect, it } from "vitest"
import {
  accepts,
  parseMigration,
  recordedChecksum,
  splitStatements,
  stepsOf
} from "../../../src/platform/db/migrations.ts"

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const TEXT = "-- a comment\ncreate table service.t (a int);\n"
const EARLIER = "a".repeat(64)

describe("a migration's header", () => {
  it("is read: steps, equivalent-to, accepts, fence, allows", () => {
    const m = parseMigration(
      "041_x.sql",
      `-- migrate: steps\n-- migrate: equivalent-to ${EARLIER}\n-- migrate: accepts ${"c".repeat(64)}\n-- migrate: fence 0.2.0\n-- migrate: allows ban-drop-column (blocks reads of service.t for under 10 ms): nobody reads it\n${TEXT}`
    )
    expect(m).toMatchObject({
      number: 41,
      steps: true,
      equivalents: [EARLIER],
      accepted: ["c".repeat(64)],
      fence: "0.2.0",
      allows: [{ rule: "ban-drop-column", blocks: "blocks reads of service.t for under 10 ms", why: "nobody reads it" }]
    })
    expect(recordedChecksum(m)).toBe(EARLIER)
    expect(accepts(m, EARLIER)).toBe(true)
    expect(accepts(m, m.checksum)).toBe(true)
    expect(accepts(m, "c".repeat(64))).toBe(true)
    expect(accepts(m, "b".repeat(64))).toBe(false)
  })

  it("is left out of the checksum, so a directive added to an applied migration is not an edit", () => {
    const plain = parseMigration("031_x.sql", TEXT)
    const fenced = parseMigration("031_x.sql", `-- migrate: fence 0.2.0\n${TEXT}`)
    expect(plain.checksum).toBe(sha256(TEXT))
    expect(fenced.checksum).toBe(plain.checksum)
    expect(recordedChecksum(plain)).toBe(plain.checksum)
  })

  it.each([
    ["-- migrate: fast", /is not a directive/],
    ["-- migrate: steps please", /is not a directive/],
    ["-- migrate: equivalent-to abc", /64 hex digits/],
    ["-- migrate: fence 2", /MAJOR.MINOR.PATCH/],
    ["-- migrate: allows ban-drop-column because", /must read: allows/],
    ["-- migrate: allows ban-drop-column (a catalog change): fine", /what it blocks and for how long/]
  ])("refuses %s, naming the migration", (line, why) => {
    expect(() => parseMigration("041_x.sql", `${line}\n${TEXT}`)).toThrow(why)
    expect(() => parseMigration("041_x.sql", `${line}\n${TEXT}`)).toThrow(/041_x\.sql/)
  })

  it("needs a number", () => expect(() => parseMigration("x.sql", TEXT)).toThrow(/its number/))
})

describe("a migration's statements", () => {
  it("are split at semicolons outside quotes, dollar quotes and comments", () => {
    const sql = `-- one; still a comment
create function f() returns text language sql as $$ select 'a;b' $$;
/* a; /* nested; */ comment */ insert into t values ('it''s; fine', E'back\\'slash;', "we;ird");
do $body$ begin perform 1; commit; end $body$;
-- only a comment;
`
    expect(splitStatements(sql)).toEqual([
      "-- one; still a comment\ncreate function f() returns text language sql as $$ select 'a;b' $$",
      `/* a; /* nested; */ comment */ insert into t values ('it''s; fine', E'back\\'slash;', "we;ird")`,
      "do $body$ begin perform 1; commit; end $body$"
    ])
  })

  it("of a steps migration run alone when they cannot share a transaction, the others together", () => {
    const steps = stepsOf(`alter table service.t add column if not exists b int;
create or replace function service.f() returns int language sql as $$ select 1 $$;
create index concurrently if not exists t_b on service.t (b);
do $$ begin update service.t set b = 1; commit; end $$;
do $$ begin perform 1; end $$;
alter table service.t add constraint t_b check (b > 0) not valid;
alter table service.t validate constraint t_b;
drop index concurrently if exists service.t_a;`)
    expect(steps.map((s) => [s.alone, s.statements.length])).toEqual([
      [false, 2],
      [true, 1],
      [true, 1],
      [false, 2],
      [true, 1],
      [true, 1]
    ])
  })
})
