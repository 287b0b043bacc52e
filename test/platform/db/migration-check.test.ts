// Every migration is checked for locks that block the processes serving beside a migration,
// and for what breaks the release before (docs/design.md, "Online migrations"); the check
// itself is tested on small migrations, one rule each.
import { readdirSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { checkMigrations } from "../../support/migration-check.ts"

const SQL = fileURLToPath(new URL("../../../sql/", import.meta.url))
const ALLOWS_DROP =
  "-- migrate: allows ban-drop-column (blocks reads and writes of service.views for under 10 ms: a catalog change): no release reads it\n"

/** [what, the migration's text, the rules it must be refused for (none: it passes)] */
const CASES: ReadonlyArray<readonly [string, string, ReadonlyArray<string>]> = [
  [
    "an index built under lock on a table in use",
    "create index x on service.views (name);",
    ["require-concurrent-index-creation"]
  ],
  [
    "an index built concurrently in a steps migration",
    "-- migrate: steps\ncreate index concurrently if not exists x on service.views (name);",
    []
  ],
  [
    "an index on a table the same migration makes",
    "create table service.t (a int);\ncreate index t_a on service.t (a);",
    []
  ],
  ["an index dropped under lock", "drop index service.views_page;", ["require-concurrent-index-deletion"]],
  [
    "CONCURRENTLY outside a steps migration (it would run in a transaction)",
    "create index concurrently if not exists x on service.views (name);",
    ["alone-outside-steps"]
  ],
  [
    "a concurrent build that cannot run again",
    "-- migrate: steps\ncreate index concurrently x on service.views (name);",
    ["steps-rerun"]
  ],
  [
    "a concurrent drop that cannot run again",
    "-- migrate: steps\ndrop index concurrently service.views_page;",
    ["steps-rerun"]
  ],
  [
    "a column added with a volatile default (a rewrite)",
    "alter table service.views add column token uuid default gen_random_uuid();",
    ["adding-field-with-default"]
  ],
  ["a column added with a constant default", "alter table service.views add column n integer not null default 0;", []],
  [
    "a column's type changed (a rewrite)",
    "alter table service.rows alter column data type jsonb using data::jsonb;",
    ["changing-column-type"]
  ],
  [
    "NOT NULL set by a scan",
    "alter table service.views alter column name set not null;",
    ["adding-not-nullable-field"]
  ],
  [
    "a constraint validated under lock",
    "alter table service.views add constraint views_name check (name <> '');",
    ["constraint-missing-not-valid"]
  ],
  [
    "a constraint added NOT VALID and validated on its own",
    "-- migrate: steps\nalter table service.views add constraint views_name check (name <> '') not valid;\nalter table service.views validate constraint views_name;",
    []
  ],
  [
    "a column dropped that the release before reads",
    "alter table service.views drop column name;",
    ["ban-drop-column"]
  ],
  ["a column renamed", "alter table service.views rename column name to title;", ["renaming-column"]],
  ["a table dropped", "drop table service.views;", ["ban-drop-table"]],
  [
    "a backfill in the transaction that altered its table",
    "alter table service.views add column n integer;\nupdate service.views set n = 1;",
    ["backfill-under-lock"]
  ],
  [
    "a backfill in committed batches after the column is added",
    "-- migrate: steps\nalter table service.views add column if not exists n integer;\ndo $$ begin update service.views set n = 1 where n is null; commit; end $$;",
    []
  ],
  [
    "a rule broken with a header that says why and how long",
    `${ALLOWS_DROP}alter table service.views drop column name;`,
    []
  ],
  ["an allowance for a rule no longer broken", `${ALLOWS_DROP}select 1;`, ["no longer breaks"]],
  [
    "an allowance that does not say how long it blocks",
    "-- migrate: allows ban-drop-column (blocks reads of service.views briefly): no release reads it\nalter table service.views drop column name;",
    ["what it blocks and for how long"]
  ],
  ["an unknown directive", "-- migrate: fast\nselect 1;", ["is not a directive"]]
]

describe("the migrations' lock check", () => {
  it.each(CASES)("%s", (_what, sql, refused) => {
    const problems = checkMigrations([{ name: "900_case.sql", sql }])
    if (refused.length === 0) expect(problems).toEqual([])
    else for (const rule of refused) expect(problems.join("\n")).toContain(rule)
  })

  it("passes every migration in sql/ (a rule broken on purpose is allowed in its header, with what it blocks and for how long)", () => {
    const texts = readdirSync(SQL)
      .filter((f) => /^\d+_.*\.sql$/.test(f))
      .map((name) => ({ name, sql: readFileSync(SQL + name, "utf8") }))
    expect(checkMigrations(texts)).toEqual([])
  })
})
