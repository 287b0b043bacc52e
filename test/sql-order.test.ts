// No statement orders by a column it selects cast to text under the same name: PostgreSQL reads
// a bare name in ORDER BY as the output column first, so `select id::text ... order by id`
// sorts the text (10 before 9), not the number. It once made capture's retry chunks skip held
// records and the alert mailer hold back the wrong mails. Order by the qualified column
// (`q.id`), which is the table's.
import { readdirSync, readFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const SRC = resolve(import.meta.dirname, "../src")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

/** The names a statement selects as `name::text` (keeping the name) and orders by, unqualified. */
const orderedAsText = (statement: string): Array<string> => {
  const kept = new Set(
    [...statement.matchAll(/(?<![\w.])(?:\w+\.)?(\w+)::text(?=\s*(?:,|\n|\s+from\b|\s+as\s+(\w+)\b))/gi)]
      .filter((m) => m[2] === undefined || m[2] === m[1])
      .map((m) => m[1]!)
  )
  const orders = [...statement.matchAll(/order\s+by\s+([^`;)]*)/gi)].map((m) => m[1]!)
  return [...kept].filter((name) => orders.some((o) => new RegExp(`(?<![\\w.])${name}\\b`).test(o)))
}

describe("statements' ORDER BY", () => {
  it("never names a column selected as text under its own name", () => {
    const found = sourceFiles(SRC).flatMap((f) =>
      [...readFileSync(f, "utf8").matchAll(/`([^`]*)`/g)]
        .filter((m) => /order\s+by/i.test(m[1]!))
        .flatMap((m) => orderedAsText(m[1]!).map((name) => `${relative(SRC, f)}: order by ${name}`))
    )
    expect(found).toEqual([])
  })

  it("finds one when there is one (the check itself)", () => {
    expect(orderedAsText("select id::text, tbl from service.capture_quarantine order by id limit 5")).toEqual(["id"])
    expect(orderedAsText("select id::text as id from t where x order by id")).toEqual(["id"])
    expect(orderedAsText("select q.id::text, tbl from t q\n order by q.id")).toEqual([])
    expect(orderedAsText("select id::text as key from t order by id")).toEqual([])
    expect(orderedAsText("select n::text from t order by tbl")).toEqual([])
  })
})
